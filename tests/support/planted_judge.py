"""A store holding one judge run with planted scores and planted human ratings, written as
rows (no model, no file import), for the qualification tests and bench/qualify.py.

``plant`` adds a dataset of S1 items, a generation run with one answer each, a judge run
scoring rubric ICS (1-5) as given, and ratings per rater as given (NaN: not rated). The
judge run's configuration (model, base URL, temperature, prompt variant) is an argument,
so a second run "on another model" is one more call.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from sqlmodel import Session

from judge.store.tables import (
    Dataset,
    GenerationRun,
    HumanRating,
    Item,
    JudgeRun,
    Judgment,
    Response,
)

RUBRIC = "ICS"
TEMPLATE = "judge-v1+planted000"


@dataclass(frozen=True)
class Planted:
    dataset_id: int
    generation_run_id: int
    judge_run_id: int
    item_ids: list[int]


def plant(
    session: Session,
    judge: Sequence[float | None],
    ratings: Mapping[str, Sequence[float]],
    *,
    name: str = "planted",
    model: str = "judge-model",
    base_url: str = "http://judge.example/v1",
    temperature: float = 0.0,
    rubric: str = RUBRIC,
) -> Planted:
    """The rows described in the module docstring; ``judge[i]`` None leaves item i unscored."""
    dataset = Dataset(name=name)
    session.add(dataset)
    session.flush()
    assert dataset.id is not None
    items = [
        Item(
            dataset_id=dataset.id, key=f"{name}-{i}", stage="S1", factor="gender",
            scenario="work", fields={"question": f"q{i}"}, content_hash=f"h{i}",
        )
        for i in range(len(judge))
    ]  # fmt: skip
    session.add_all(items)
    gen = GenerationRun(
        endpoint_name="m", base_url="http://gen.example/v1", model="model-under-test",
        temperature=0.0, max_tokens=64, status="finished", dataset_id=dataset.id,
        template_version="gen-v1",
    )  # fmt: skip
    session.add(gen)
    session.flush()
    assert gen.id is not None
    ids = [int(i.id) for i in items if i.id is not None]
    session.add_all(
        Response(run_id=gen.id, item_id=i, part="answer", prompt="p", raw_text="a", flag="ok",
                 cache_key=f"r{i}")
        for i in ids
    )  # fmt: skip
    return add_judge_run(
        session, gen.id, ids, judge, ratings, model=model, base_url=base_url,
        temperature=temperature, rubric=rubric, dataset_id=dataset.id,
    )  # fmt: skip


def add_judge_run(
    session: Session,
    generation_run_id: int,
    item_ids: list[int],
    judge: Sequence[float | None],
    ratings: Mapping[str, Sequence[float]] | None = None,
    *,
    model: str = "judge-model",
    base_url: str = "http://judge.example/v1",
    temperature: float = 0.0,
    rubric: str = RUBRIC,
    dataset_id: int = 0,
    swapped: Sequence[float | None] | None = None,
) -> Planted:
    """One more judge run of the same answers (and ratings, when given). With ``swapped``
    the run was judged in both orders: ``judge`` as given, ``swapped`` with the two texts
    swapped (sample index 1, as ``judge.store.queries.sample_slot`` lays them out)."""
    run = JudgeRun(
        endpoint_name="judge", base_url=base_url, model=model, temperature=temperature,
        max_tokens=64, status="finished", generation_run_id=generation_run_id,
        prompt_variant="default", samples=1, aggregation="mean",
        config_hash=f"{model}-{base_url}-{temperature}-{swapped is not None}",
        swap_order=swapped is not None,
    )  # fmt: skip
    session.add(run)
    session.flush()
    assert run.id is not None
    orders = [("given" if swapped is not None else None, 0, judge)]
    if swapped is not None:
        orders.append(("swapped", 1, swapped))
    for position, index, scores in orders:
        for item_id, score in zip(item_ids, scores, strict=True):
            scored = score is not None
            session.add(
                Judgment(
                    judge_run_id=run.id, item_id=item_id, rubric=rubric, sample_index=index,
                    status="scored" if scored else "unscored",
                    score=int(score) if score is not None else None,
                    reason=None if scored else "unreadable", template_version=TEMPLATE,
                    prompt_hash="p", rubric_hash="rubric-hash", model=model,
                    cache_key=f"j{run.id}-{item_id}-{index}", position=position,
                )
            )  # fmt: skip
    for rater, scores in (ratings or {}).items():
        add_ratings(session, generation_run_id, item_ids, rater, scores, rubric=rubric)
    session.commit()
    return Planted(dataset_id, generation_run_id, run.id, item_ids)


def add_ratings(
    session: Session,
    generation_run_id: int,
    item_ids: Sequence[int],
    rater: str,
    scores: Sequence[float],
    *,
    rubric: str = RUBRIC,
    scope: str = "import:planted",
) -> None:
    session.add_all(
        HumanRating(generation_run_id=generation_run_id, item_id=i, rubric=rubric, rater=rater,
                    score=float(s), scope=scope)
        for i, s in zip(item_ids, scores, strict=True)
        if not math.isnan(float(s))
    )  # fmt: skip


def good_judge(n: int, seed: int) -> tuple[list[float | None], dict[str, list[float]]]:
    """A true level per item (uniform on 1-5); three raters each off by one with probability
    0.4 (0.2 each way), the judge with probability 0.1: the judge is closer to the truth,
    hence to the other raters, than any single rater."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(1, 6, n)

    def noisy(p: float) -> list[float]:
        step = rng.choice([-1, 0, 1], size=n, p=[p / 2, 1 - p, p / 2])
        return np.clip(truth + step, 1, 5).astype(float).tolist()

    raters = {f"r{k}": noisy(0.4) for k in range(3)}
    return list(noisy(0.1)), raters


def add_answers(session: Session, planted: Planted, model: str) -> int:
    """Another model's answers to the same items (a generation run of ``model``, one answer
    each): the id of its generation run, for ``add_judge_run``."""
    gen = GenerationRun(
        endpoint_name="m2", base_url="http://gen.example/v1", model=model,
        temperature=0.0, max_tokens=64, status="finished", dataset_id=planted.dataset_id,
        template_version="gen-v1",
    )  # fmt: skip
    session.add(gen)
    session.flush()
    assert gen.id is not None
    session.add_all(
        Response(run_id=gen.id, item_id=i, part="answer", prompt="p", raw_text="b", flag="ok",
                 cache_key=f"r{gen.id}-{i}")
        for i in planted.item_ids
    )  # fmt: skip
    session.commit()
    return gen.id
