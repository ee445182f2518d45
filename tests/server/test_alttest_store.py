"""The alt-test of a stored judge run (issue 27): ``fairjudge agreement alt-test --judge-run``
and ``server.usecases.alttest.alt_test_run`` on a real SQLite store.

The sample dataset's 36 S1 and S4 items (rubric ICS) and five S2 items (rubric TCS) are
answered (imported answers) and judged through the scripted stub, whose judge gives each ICS
answer a score planted here and leaves S2 unscored; three annotators rate both rubrics,
imported through the ratings use case: A and B in one import batch, C in another. The
expected numbers are ``judge.stats.alttest.alt_test`` called directly on the planted arrays
(items x annotators in item-key order), not on anything read back from the store.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from judge.config import Settings
from judge.data.datasets import import_items
from judge.data.responses import import_responses
from judge.errors import InvalidInputError
from judge.stats.alttest import alt_test
from judge.store.engine import session_scope
from judge.store.tables import Item
from server import usecases
from server.usecases.alttest import AltTestRequest, alt_test_in
from server.usecases.ratings import import_rating_rows
from tests.support.cli import fairjudge  # the command's main, run in this process
from tests.support.factories import SAMPLE, make_settings, write_config
from tests.support.stub_openai import StubServer

ANNOTATORS = ("A", "B", "C")
MARK = re.compile(r"Reply for item ([\w-]+)\.")


@dataclass(frozen=True)
class Planted:
    ics_items: list[str]  # the 36 S1 and S4 keys, sorted
    tcs_items: list[str]  # five S2 keys
    ratings: np.ndarray  # ICS: items x (A, B, C)
    judge: np.ndarray  # ICS: the judge's score of each item


def plant(ics_items: list[str], tcs_items: list[str]) -> Planted:
    """Seeded ratings: each item has a true level 1-5; every annotator says it, moved by -1 or
    +1 with probability 0.15 each (kept on 1-5); the judge says it, moved with probability
    0.1 each way. A judge closer to the truth than the annotators: it should pass."""
    rng = np.random.default_rng(27)
    truth = rng.integers(1, 6, len(ics_items))

    def noisy(p: float) -> np.ndarray:
        moves = rng.choice([-1, 0, 1], size=len(ics_items), p=[p, 1 - 2 * p, p])
        return np.clip(truth + moves, 1, 5).astype(float)

    ratings = np.column_stack([noisy(0.15) for _ in ANNOTATORS])
    return Planted(ics_items, tcs_items, ratings, noisy(0.1))


def responder(planted: Planted) -> Any:
    """A judge request (one with a system message) gets the planted ICS score of the item
    its answer names; S2's rubrics, whose prompts show the stories, get prose with no
    verdict (unscored), so TCS's ratings have no judge score to meet."""
    scores = dict(zip(planted.ics_items, planted.judge, strict=True))

    def respond(messages: list[dict[str, str]]) -> str | None:
        if not any(m["role"] == "system" for m in messages):
            return None
        key = MARK.search(messages[-1]["content"])
        if key is None:
            return "I would rather not grade these stories."
        return json.dumps({"explanation": "planted", "score": int(scores[key.group(1)])})

    return respond


@dataclass(frozen=True)
class Store:
    config: Path
    engine: Engine
    judge_run: int
    planted: Planted


def prepare(engine: Engine, settings: Settings) -> tuple[int, Planted]:
    """The sample dataset's answers judged through the stub that ``settings`` names (its
    responder: ``responder(plant(...))`` of the same keys) and rated: (judge run, planted).
    The dataset must be imported as "sample" first."""
    with session_scope(engine) as session:
        stages = dict(session.exec(select(Item.key, Item.stage)).all())
    ics, tcs = sample_keys(stages)
    planted = plant(ics, tcs)
    answers = [{"item_id": k, "part": "answer", "text": f"Reply for item {k}."} for k in ics]
    answers += [
        {"item_id": k, "part": part, "text": f"Reply for item {k}. Part {part}."}
        for k in tcs
        for part in ("A", "B")
    ]
    generation = import_responses(engine, "sample", answers, model="writer").generation_run_id
    judge_run = usecases.judge(
        engine, settings, usecases.JudgeRequest(generation_run_id=generation)
    ).run_id
    # A and B in one import batch, C in another: naming the first leaves two annotators.
    for batch, people in (("pair", "AB"), ("third", "C")):
        rows = [
            {"item_id": k, "rubric": "ICS", "rater": a, "score": int(planted.ratings[i, j])}
            for i, k in enumerate(ics)
            for j, a in enumerate(ANNOTATORS)
            if a in people
        ]
        rows += [
            {"item_id": k, "rubric": "TCS", "rater": a, "score": 3} for k in tcs for a in people
        ]
        with session_scope(engine) as session:
            import_rating_rows(session, settings, generation, rows, batch=batch)
    return judge_run, planted


def sample_keys(stages: dict[str, str]) -> tuple[list[str], list[str]]:
    """The sample's S1 and S4 keys (rubric ICS), sorted, and its first five S2 keys (TCS)."""
    ics = sorted(k for k, s in stages.items() if s in ("S1", "S4"))
    return ics, sorted(k for k, s in stages.items() if s == "S2")[:5]


def sample_responder() -> Any:
    """``responder`` for the sample dataset's items, read from its file."""
    stages = {
        row["id"]: row["stage"]
        for row in (json.loads(line) for line in SAMPLE.read_text().splitlines() if line.strip())
    }
    return responder(plant(*sample_keys(stages)))


@pytest.fixture
def store(engine: Engine, db_url: str, tmp_path: Path) -> Iterator[Store]:
    with session_scope(engine) as session:
        import_items(session, SAMPLE, "sample")
    with StubServer(responder=sample_responder()) as stub:
        judge_run, planted = prepare(engine, make_settings(stub.base_url, db_url))
        config = write_config(tmp_path / "f.toml", stub.base_url, db_url)
        yield Store(config, engine, judge_run, planted)


def test_per_annotator_numbers_match_alt_test_on_the_planted_arrays(store: Store) -> None:
    p = store.planted
    expected = alt_test(p.ratings, p.judge, epsilon=0.15, annotators=ANNOTATORS)
    args = ("--config", store.config, "agreement", "alt-test", "--judge-run", str(store.judge_run))
    done = fairjudge(*args, "--epsilon", "skilled", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["ratings_used"]["scopes"] == ["import:pair", "import:third"]
    ics, tcs = report["rubrics"]  # every rubric with ratings, by name
    assert ics["rubric"] == "ICS" and (ics["n_items"], ics["n_annotators"]) == (36, 3)
    assert ics["judge_unscored"] == 0
    print(f"\nstored run, ICS, 36 items, epsilon 0.15: omega={ics['omega']:.3f} "
          f"rho={ics['rho']:.3f} (expected {expected.omega:.3f}, {expected.rho:.3f})")  # fmt: skip
    assert ics["omega"] == expected.omega and ics["passed"] is expected.passed is True
    assert ics["rho"] == pytest.approx(expected.rho, abs=1e-12)
    for row, want in zip(ics["annotators"], expected.annotators, strict=True):
        assert row["annotator"] == want.annotator
        assert row["n_items"] == want.n_items == 36
        assert row["test"] == want.test == "t-test"  # 36 items: the t-test branch
        for key in ("rho_f", "rho_h", "statistic", "p_value", "p_corrected"):
            assert row[key] == pytest.approx(getattr(want, key), rel=1e-9, abs=1e-15), key
        assert row["rejected"] is want.rejected
    # TCS: rated, never scored by the judge: refused with the reason, no verdict, no numbers.
    assert tcs["rubric"] == "TCS" and tcs["passed"] is None and tcs["annotators"] == []
    assert (tcs["n_items"], tcs["judge_unscored"], tcs["omega"]) == (0, 5, None)
    assert tcs["refused"] == f"judge run {store.judge_run} scored none of the 5 rated items"
    shown = fairjudge(*args, "--epsilon", "skilled")
    assert shown.returncode == 0, shown.stderr
    assert "ICS: passes: omega = 1.00 >= 0.5 (epsilon 0.15, skilled)" in shown.stdout
    assert "TCS: refused: judge run" in shown.stdout


def test_two_annotators_are_refused(store: Store) -> None:
    args = ("--config", store.config, "agreement", "alt-test", "--judge-run",
            str(store.judge_run), "--epsilon", "expert", "--campaign", "import:pair")  # fmt: skip
    done = fairjudge(*args, "--rubric", "ICS")
    assert done.returncode == 1, done.stdout
    assert done.stderr.count("\n") == 1  # one line, no traceback
    assert "ICS: the alt-test needs at least 3 annotators, got 2" in done.stderr
    # The use case says the same, for every rubric it was asked about.
    request = AltTestRequest(judge_run=store.judge_run, epsilon="expert", campaigns=["import:pair"])
    with pytest.raises(
        InvalidInputError, match=r"ICS: .* got 2: .*; TCS: judge run \d+ scored none"
    ):
        alt_test_in(store.engine, request)


def test_unknown_rubric_run_or_campaign(store: Store) -> None:
    run = store.judge_run
    with pytest.raises(InvalidInputError, match="rubric 'PCS' has no ratings.*rated: ICS, TCS"):
        alt_test_in(store.engine, AltTestRequest(judge_run=run, epsilon=0.1, rubric="PCS"))
    base = ("--config", store.config, "agreement", "alt-test", "--epsilon", "0.1")
    missing = fairjudge(*base, "--judge-run", str(run + 100))
    assert missing.returncode == 1 and f"no judge run {run + 100}" in missing.stderr
    nope = fairjudge(*base, "--judge-run", str(run), "--campaign", "nope")
    assert nope.returncode == 1 and "nope" in nope.stderr


def test_every_preset_from_one_read_matches_alt_test_at_each_margin(store: Store) -> None:
    # alt_test_margins reads the store once and tests at each margin (a report's opening
    # verdicts): each result must be alt_test's on the planted arrays at that preset's epsilon.
    from judge.stats.alttest import EPSILON
    from server.usecases.alttest import alt_test_margins

    p = store.planted
    request = AltTestRequest(judge_run=store.judge_run, epsilon="expert")
    with Session(store.engine) as session:
        reports = alt_test_margins(session, request, list(EPSILON))
    assert len(reports) == len(EPSILON)
    for preset, report in zip(EPSILON, reports, strict=True):
        expected = alt_test(p.ratings, p.judge, epsilon=EPSILON[preset], annotators=ANNOTATORS)
        ics = next(r for r in report.rubrics if r.rubric == "ICS")
        assert ics.result is not None
        assert ics.result.epsilon == EPSILON[preset]
        assert ics.result.omega == expected.omega and ics.result.passed is expected.passed
        got = [(a.annotator, a.p_value) for a in ics.result.annotators]
        want = [(a.annotator, a.p_value) for a in expected.annotators]
        assert [g[0] for g in got] == [w[0] for w in want]
        assert [g[1] for g in got] == pytest.approx([w[1] for w in want], rel=1e-9, abs=1e-15)
        assert ics.verdict(preset) is not None and f"{preset})" in (ics.verdict(preset) or "")
