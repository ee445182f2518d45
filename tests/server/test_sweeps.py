"""Judge sweeps: every temperature x prompt variant as its own resumable judge run, and their
agreement with the humans as FairMonitor's Table 3."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from annotation.ratings import import_ratings
from judge import paths
from judge.config import Settings
from judge.data.datasets import import_items
from judge.errors import ConfigError, InvalidInputError, NotFoundError
from judge.grading.rubrics import load_rubrics
from judge.stats.coefficient import BootstrapOptions
from judge.store.engine import session_scope
from judge.store.tables import Item, JudgeRun, Judgment
from server import usecases
from server.usecases.requests import SweepRequest
from server.usecases.sweeps import (
    has_ratings,
    judge_requests,
    run_sweep,
    sweep_configs,
    sweep_reliability,
    sweep_table,
)
from tests.support.factories import SAMPLE, make_settings
from tests.support.stub_openai import StubServer

TEMPERATURES = (0.1, 1.0)
VARIANTS = ("plain", "cot")
OPTIONS = BootstrapOptions(n_bootstrap=100, seed=0)


@pytest.fixture
def settings(stub: StubServer, db_url: str) -> Settings:
    return make_settings(stub.base_url, db_url)


@pytest.fixture
def generated(engine: Engine, settings: Settings) -> int:
    """The whole sample (all four stages, so all five rubrics) answered through the stub."""
    with session_scope(engine) as session:
        import_items(session, SAMPLE, "sample")
    return usecases.generate(engine, settings, usecases.GenerateRequest(dataset="sample")).run_id


def _sweep(run: int, temperatures: tuple[float, ...], variants: tuple[str, ...]) -> SweepRequest:
    return SweepRequest.build(
        generation_run_id=run, temperatures=list(temperatures), prompt_variants=list(variants)
    )


def judgments_per_run(engine: Engine) -> int:
    """Judgments one configuration makes: the rubrics of each item's stage, one sample each
    (derived from the rubric file, not from a judge run)."""
    rubrics = load_rubrics(paths.prompts_dir())
    with Session(engine) as s:
        return sum(len(rubrics.for_stage(i.stage)) for i in s.exec(select(Item)))


def test_sweep_makes_one_judge_run_per_configuration_and_repays_nothing(
    engine: Engine, settings: Settings, generated: int, stub: StubServer
) -> None:
    per_run = judgments_per_run(engine)
    before = stub.state.requests
    first = run_sweep(engine, settings, _sweep(generated, TEMPERATURES, VARIANTS))
    # 2 temperatures x 2 variants; the temperature is part of every call's cache key, so each
    # configuration pays for its own calls even where the messages are the same.
    assert [r.config.label for r in first.runs] == [
        "T=0.1 plain",
        "T=1 plain",
        "T=0.1 cot",
        "T=1 cot",
    ]
    assert len(set(first.judge_run_ids)) == 4
    assert stub.state.requests - before == 4 * per_run
    assert first.model_calls == 4 * per_run
    with Session(engine) as s:
        for run in first.runs:
            jrun = s.get(JudgeRun, run.judge_run_id)
            assert jrun is not None
            assert (jrun.temperature, jrun.prompt_variant) == (
                run.config.temperature,
                run.config.prompt_variant,
            )
            assert jrun.status == "finished"
            assert run.stored == {"scored": per_run}
    line = first.runs[0].line()
    assert line.startswith(f"T=0.1 plain: judge run {first.runs[0].judge_run_id}, ")
    assert f"{per_run} judgments made ({per_run} model calls, 0 from cache" in line
    assert "{" not in line and "finished" in line

    requests = stub.state.requests
    again = run_sweep(engine, settings, _sweep(generated, TEMPERATURES, VARIANTS))
    assert stub.state.requests == requests  # nothing re-paid: every judgment is stored
    assert again.model_calls == 0
    assert again.judge_run_ids == first.judge_run_ids
    assert all(r.summary.tasks == 0 for r in again.runs)
    assert "nothing left to judge" in again.runs[0].line()

    # A wider sweep pays only for its one new configuration.
    wider = run_sweep(engine, settings, _sweep(generated, (0.1, 1.0, 0.5), ("plain",)))
    assert stub.state.requests - requests == per_run
    assert wider.judge_run_ids[:2] == first.judge_run_ids[:2]


def test_invalid_configurations_fail_before_any_call(
    engine: Engine, settings: Settings, generated: int, stub: StubServer
) -> None:
    before = stub.state.requests
    # The bounds are the config's ([judge] temperature: 0 to 2; prompt_variant plain or cot),
    # checked where the request is built, so nothing is sent.
    with pytest.raises(InvalidInputError, match=r"prompt_variants\.1: Input should be 'plain'"):
        SweepRequest.build(generation_run_id=generated, prompt_variants=["plain", "greedy"])
    with pytest.raises(InvalidInputError, match=r"temperatures\.1: .*less than or equal to 2"):
        SweepRequest.build(generation_run_id=generated, temperatures=[0.1, 3.0])
    with pytest.raises(InvalidInputError, match="temperatures: List should have at least 1"):
        SweepRequest.build(generation_run_id=generated, temperatures=[])
    # sweep_configs keeps its own checks for a caller that gives plain sequences
    with pytest.raises(ConfigError, match="'greedy' is not one of plain, cot"):
        sweep_configs((0.1,), ("plain", "greedy"))
    with pytest.raises(ConfigError, match="at least one"):
        sweep_configs((), ("plain",))
    with pytest.raises(NotFoundError, match="no generation run 99"):
        run_sweep(engine, settings, _sweep(99, (0.1,), ("plain",)))
    # an endpoint the config does not define fails in the first configuration's overrides,
    # before its first call
    with pytest.raises(InvalidInputError, match="endpoint = 'nope' is not defined"):
        run_sweep(engine, settings, SweepRequest(generation_run_id=generated, endpoint="nope"))
    assert stub.state.requests == before
    # Repeated values are judged once.
    assert [c.label for c in sweep_configs([0.5, 0.5], ["cot", "cot"])] == ["T=0.5 cot"]


def test_each_configuration_is_a_judge_request_with_the_sweeps_overrides() -> None:
    # Written out by hand: 2 temperatures x 1 variant, the sweep's endpoint and samples on each.
    planned = judge_requests(
        SweepRequest(
            generation_run_id=4, temperatures=[0.1, 1.0], prompt_variants=["cot"],
            samples=3, endpoint="test",
        )
    )  # fmt: skip
    assert [(c.label, r.overrides()) for c, r in planned] == [
        ("T=0.1 cot", {"judge.endpoint": "test", "judge.prompt_variant": "cot",
                       "judge.temperature": 0.1, "judge.samples": 3, "judge.aggregation": None}),
        ("T=1 cot", {"judge.endpoint": "test", "judge.prompt_variant": "cot",
                     "judge.temperature": 1.0, "judge.samples": 3, "judge.aggregation": None}),
    ]  # fmt: skip
    assert {r.generation_run_id for _, r in planned} == {4}


def write_ratings(path: Path, engine: Engine, judge_run_id: int) -> Path:
    """Three raters per judged (item, rubric): the judge's score of ``judge_run_id`` moved by
    -1/0/+1 at random, clipped to 1-5; rater ann3 skips every third item (missing is normal)."""
    rng = np.random.default_rng(7)
    with Session(engine) as s:
        rows = s.exec(
            select(Item.key, Judgment.rubric, Judgment.score)
            .join(Item)
            .where(Judgment.judge_run_id == judge_run_id)
            .order_by(Item.key, Judgment.rubric)
        ).all()
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["item_id", "rubric", "rater", "score"])
        for n, (key, rubric, score) in enumerate(rows):
            assert score is not None
            for rater in ("ann1", "ann2", "ann3"):
                if rater == "ann3" and n % 3 == 0:
                    continue
                writer.writerow(
                    [key, rubric, rater, int(np.clip(score + rng.integers(-1, 2), 1, 5))]
                )
    return path


def test_table3_of_a_sweep_matches_spearman_recomputed_from_the_stored_rows(
    tmp_path: Path, engine: Engine, settings: Settings, generated: int
) -> None:
    # A judge run outside the sweep (T=0): it is in the generation run's reliability, but
    # not in the sweep's table.
    outside = usecases.judge(
        engine, settings, usecases.JudgeRequest(generation_run_id=generated)
    ).run_id
    result = run_sweep(engine, settings, _sweep(generated, TEMPERATURES, VARIANTS))
    with session_scope(engine) as session:
        assert not has_ratings(session, generated)
        with pytest.raises(NotFoundError, match="fairjudge ratings import FILE --run"):
            sweep_table(session, result, options=OPTIONS)
    ratings = write_ratings(tmp_path / "ratings.csv", engine, outside)
    with session_scope(engine) as session:
        import_ratings(session, ratings, generated, load_rubrics(paths.prompts_dir()))

    with Session(engine) as session:
        table = sweep_table(session, result, "spearman", options=OPTIONS)
        # Point estimates do not depend on the bootstrap: skip it for the exact values.
        reliability = sweep_reliability(session, result, options=BootstrapOptions(n_bootstrap=0))
    labels = ["T=0.1 plain", "T=1 plain", "T=0.1 cot", "T=1 cot"]
    assert table.columns == ["rubric", "n items", "human alpha (interval)", *labels]
    assert [row[0] for row in table.rows] == ["ETCS", "ICS", "PCS", "SBAS", "TCS"]
    assert all(r.judge_run_id != outside for r in result.runs)

    # Independent recomputation: the human score is the mean of an item's raters (pandas),
    # the judge score the stored judgment; Spearman from scipy on the items both have.
    human = pd.read_csv(ratings).groupby(["rubric", "item_id"])["score"].mean()
    with Session(engine) as s:
        stored = pd.DataFrame(
            s.exec(
                select(Judgment.judge_run_id, Judgment.rubric, Item.key, Judgment.score)
                .join(Item)
                .where(Judgment.status == "scored")
            ).all(),
            columns=["run", "rubric", "item_id", "judge"],
        )
    for row in table.rows:
        rubric = row[0]
        for label, cell in zip(labels, row[3:], strict=True):
            run = next(r.judge_run_id for r in result.runs if r.config.label == label)
            judged = stored[(stored.run == run) & (stored.rubric == rubric)]
            pairs = judged.join(human.loc[rubric], on="item_id", how="inner")
            rho = stats.spearmanr(pairs.judge, pairs.score).statistic
            entry = reliability.rubrics[rubric].judge(run)
            assert entry is not None and entry.agreement is not None
            assert entry.n == len(pairs)
            assert entry.agreement.coefficients["spearman"].value == pytest.approx(rho)
            assert cell.startswith(f"{rho:.2f} ["), (rubric, label, cell, rho)
    assert any(str(r.judge_run_id) in table.notes[1] for r in result.runs)


def test_unknown_coefficient_is_refused(engine: Engine, settings: Settings, generated: int) -> None:
    result = run_sweep(engine, settings, _sweep(generated, (0.1,), ("plain",)))
    with Session(engine) as session, pytest.raises(ConfigError, match="'tau' is not one of"):
        sweep_table(session, result, "tau")
