"""Judge runs with planted scores for the release-gate tests and bench/gates.py, written as
rows (no model): a dataset of S1 and S3 items over two factors, one generation run, and one
judge run per score table given: ICS on S1 and S4 items, TCS, PCS and ETCS on S2 items (the
same score for the three), SBAS on S3 items.

``SCORES_A`` and ``SCORES_B`` are the two runs the gate tests derive their verdicts from by
hand (see the test module); ``None`` leaves an item unscored.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sqlmodel import Session

from judge.store.tables import Dataset, GenerationRun, Item, JudgeRun, Judgment

RUBRICS = {"S1": ("ICS",), "S2": ("TCS", "PCS", "ETCS"), "S3": ("SBAS",), "S4": ("ICS",)}
Scores = Mapping[tuple[str, str], Sequence[int | None]]  # (stage, factor) -> item scores

SCORES_A: Scores = {
    ("S1", "gender"): [4, 4, 4, 4, 4, 4, 4, 4, 2, 2],  # ICS >= 3: 8 of 10 = 80 %
    ("S1", "race_culture"): [4, 4, 4, 4, 4, 1, 1, 1, 1, 1],  # 5 of 10 = 50 %
    ("S3", "gender"): [5, 5, 5, 4, 2],  # SBAS >= 4: 4 of 5 = 80 %
    ("S3", "race_culture"): [4, 4, 2, 2, 2],  # 2 of 5 = 40 %
}
SCORES_B: Scores = {
    **SCORES_A,
    ("S1", "race_culture"): [4, 4, 4, 4, 4, 4, 4, 4, 1, 1],  # items 5-7 fail -> pass: 80 %
}


@dataclass(frozen=True)
class GateRuns:
    dataset_id: int
    generation_run_id: int
    judge_run_ids: list[int]


def plant_runs(
    session: Session,
    runs: Sequence[Scores],
    *,
    name: str = "gates",
    model: str = "model-under-test",
    judge_model: str = "judge-model",
) -> GateRuns:
    """One dataset and generation run, and a judge run per entry of ``runs`` (all of the
    same items, so that paired gates can compare them), committed."""
    dataset = Dataset(name=name)
    session.add(dataset)
    session.flush()
    assert dataset.id is not None
    keys = list(runs[0])
    items: dict[tuple[str, str], list[Item]] = {}
    for stage, factor in keys:
        items[(stage, factor)] = [
            Item(
                dataset_id=dataset.id, key=f"{stage}-{factor}-{i}", stage=stage, factor=factor,
                scenario="work", fields={"question": f"q{i}"}, content_hash=f"{stage}{factor}{i}",
            )
            for i in range(len(runs[0][(stage, factor)]))
        ]  # fmt: skip
        session.add_all(items[(stage, factor)])
    gen = GenerationRun(
        endpoint_name="m", base_url="http://gen.example/v1", model=model, temperature=0.0,
        max_tokens=64, status="finished", dataset_id=dataset.id, template_version="gen-v1",
    )  # fmt: skip
    session.add(gen)
    session.flush()
    assert gen.id is not None
    ids = []
    for n, scores in enumerate(runs):
        run = JudgeRun(
            endpoint_name="judge", base_url="http://judge.example/v1", model=judge_model,
            temperature=0.0, max_tokens=64, status="finished", generation_run_id=gen.id,
            prompt_variant="default", samples=1, aggregation="mean",
            config_hash=f"{name}-{n}",
        )  # fmt: skip
        session.add(run)
        session.flush()
        assert run.id is not None
        for key, values in scores.items():
            judgments = [
                Judgment(
                    judge_run_id=run.id, item_id=item.id, rubric=rubric,
                    status="scored" if score is not None else "unscored", score=score,
                    reason=None if score is not None else "unreadable",
                    template_version="judge-v1", prompt_hash="p", rubric_hash="r",
                    model=judge_model, cache_key=f"g{run.id}-{item.id}-{rubric}",
                )
                for item, score in zip(items[key], values, strict=True)
                for rubric in RUBRICS[key[0]]
            ]  # fmt: skip
            session.add_all(judgments)
        ids.append(run.id)
    session.commit()
    return GateRuns(dataset.id, gen.id, ids)
