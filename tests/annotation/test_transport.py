"""Does the judge's correction transport across models? (issue 42; annotation/transport.py)

A real SQLite store: the shipped sample answered twice, by two models ("writer" and
"writer-2", imported), both judged by ONE judge configuration through the planted stub of
tests/annotation/test_estimates.py (the truth + 2, except race_culture items); the same
rated half of each run is rated.

- PLANTED HIT: people give the truth on writer's answers and the truth + 1 on writer-2's
  (the judge's bias is one point smaller on writer-2): the relation differs by exactly +1 in
  bias and 0 in slope, the pooled correction is refused, each model keeps its own estimate.
- NO FALSE ALARM: people give the truth on both: the relation is the same (F = 0), and the
  pooled correction equals the line fitted by numpy on the pooled ratings, applied to the
  model's judge mean.

The coverage of the per-model intervals over 1,000 simulated data sets is checked on the
pure functions in tests/judge/stats/test_transport.py.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from annotation.transport import transport_estimates
from judge.data.responses import import_responses
from judge.errors import InvalidInputError
from judge.store.engine import make_engine, session_scope
from judge.store.tables import Item
from judge.vocab import STAGE_PARTS
from server import usecases
from server.usecases.ratings import import_rating_rows
from tests.annotation.test_estimates import (
    RUBRICS,
    answer_and_judge,
    judged,
    planted_judge,
    truth,
)
from tests.support import stores
from tests.support.cli import fairjudge
from tests.support.factories import make_settings, write_config
from tests.support.stub_openai import StubServer


@dataclass(frozen=True)
class TwoModels:
    path: Path
    base_url: str
    generation: tuple[int, int]
    judge: tuple[int, int]
    items: dict[str, tuple[int, str]]

    def keys(self, rubric: str | None = None) -> list[str]:
        found = self.items.items()
        return sorted(k for k, (_, s) in found if rubric is None or rubric in RUBRICS[s])


@pytest.fixture(scope="module")
def two_template(tmp_path_factory: pytest.TempPathFactory, sample_template: Path) -> TwoModels:
    path = tmp_path_factory.mktemp("transport") / "two.db"
    url = stores.copy_store(sample_template, path)
    engine = make_engine(url)
    with StubServer(responder=planted_judge) as stub:
        gen1, run1, items = answer_and_judge(engine, url, stub)
        rows = [
            {"item_id": k, "part": part, "text": f"Another answer to part {part} [[{k}]]"}
            for k, (_, stage) in sorted(items.items())
            for part in STAGE_PARTS[stage]
        ]
        gen2 = import_responses(engine, "sample", rows, model="writer-2").generation_run_id
        run2 = usecases.judge(
            engine, make_settings(stub.base_url, url), usecases.JudgeRequest(generation_run_id=gen2)
        ).run_id
    engine.dispose()
    return TwoModels(path, stub.base_url, (gen1, gen2), (run1, run2), items)


def rate(engine: Engine, world: TwoModels, generation: int, shift: int) -> None:
    """The rated half (keys ending -2) of one run, every rubric of its stage: the truth plus
    ``shift`` from raters r1 and r2, in import batch 'pilot'."""
    rows = [
        {"item_id": k, "rubric": r, "rater": rater, "score": truth(k) + shift}
        for k in world.keys()
        if k.endswith("-2")
        for r in RUBRICS[world.items[k][1]]
        for rater in ("r1", "r2")
    ]
    settings = make_settings(world.base_url, str(engine.url))
    with session_scope(engine) as session:
        import_rating_rows(session, settings, generation, rows, batch="pilot")


def ics(result: object) -> object:
    (found,) = [t for t in result.targets if t.target == "ICS"]  # type: ignore[attr-defined]
    return found


def test_a_judge_biased_on_one_model_is_not_pooled(engine: Engine, two_template: TwoModels) -> None:
    stores.restore(two_template.path, engine)
    rate(engine, two_template, two_template.generation[0], 0)
    rate(engine, two_template, two_template.generation[1], 1)  # people +1 on writer-2
    with Session(engine) as s:
        result = transport_estimates(s, list(two_template.judge), assume_random=True)
    t = ics(result)
    assert t.test is not None and t.transports is False
    (d,) = t.test.differences
    # By construction: the same judge scores, the people's one point higher on writer-2.
    assert d.bias == pytest.approx(1.0, abs=1e-9) and d.slope == pytest.approx(0.0, abs=1e-9)
    assert t.test.p_value < 0.05
    for m in t.models:
        assert m.pooled.value is None and "differs by model" in m.pooled.reason
        assert m.own.value is not None  # each model's own prediction-powered figure
    own = {m.run.model: m.own.value for m in t.models}
    assert own["writer-2"] - own["writer"] == pytest.approx(1.0, abs=1e-9)


def test_one_relation_is_pooled(engine: Engine, two_template: TwoModels, tmp_path: Path) -> None:
    stores.restore(two_template.path, engine)
    for generation in two_template.generation:
        rate(engine, two_template, generation, 0)
    with Session(engine) as s:
        result = transport_estimates(s, list(two_template.judge), assume_random=True)
    t = ics(result)
    assert t.transports is True and t.test is not None
    assert t.test.p_value == pytest.approx(1.0)  # the same data on both models: F = 0
    # Expected: numpy's least-squares line through the pooled ratings (both runs: the truth
    # against the planted judge on the rated half of the ICS items), at the judge's mean over
    # all 36 ICS items of the model.
    rated = [k for k in two_template.keys("ICS") if k.endswith("-2")]
    x = np.array([judged(k) for k in rated] * 2, float)
    y = np.array([truth(k) for k in rated] * 2, float)
    slope, intercept = np.polyfit(x, y, 1)
    judge_mean = np.mean([judged(k) for k in two_template.keys("ICS")])
    for m in t.models:
        assert m.pooled.value == pytest.approx(intercept + slope * judge_mean)
        assert m.pooled.lam == pytest.approx(slope)
    # The CLI gives the same, as JSON; and refuses one run alone.
    config = write_config(tmp_path / "fairjudge.toml", two_template.base_url, str(engine.url))
    first, second = (str(r) for r in two_template.judge)
    shown = fairjudge("--config", config, "estimates", first, "--transport", second,
                      "--assume-random", "--json")  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)
    (entry,) = [e for e in data["targets"] if e["target"] == "ICS"]
    assert entry["transports"] is True
    assert entry["models"][0]["pooled"]["value"] == pytest.approx(intercept + slope * judge_mean)
    table = fairjudge("--config", config, "estimates", first, "--transport", second,
                      "--assume-random")  # fmt: skip
    assert table.returncode == 0 and "Transport of the judge's correction" in table.stdout
    with Session(engine) as s, pytest.raises(InvalidInputError, match="two judge runs or more"):
        transport_estimates(s, [two_template.judge[0]] * 2)
    with Session(engine) as s:
        items = len(s.exec(select(Item)).all())
    assert items == len(two_template.items)  # nothing added or lost
