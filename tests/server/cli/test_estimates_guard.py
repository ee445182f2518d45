"""``fairjudge estimates --assume-random`` checks the ratings before trusting them (issue 42),
and marks every row under 30 ratings, on the planted store of tests/annotation/test_estimates.py
(the judge gives the truth + 2 except on race_culture items, people give the truth).

- PLANTED HIT: the 40 items the judge scored highest, imported as ratings, are refused with
  one line that gives the numbers, the bound and the override; with
  --accept-unrepresentative they are used and the design says so.
- NO FALSE ALARM: the rated half (the second item of each stage x factor pair) and a seeded
  random 40 pass, and are used.

The expected numbers come from scipy's Welch test and the standardised difference by hand on
the planted judge scores.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from sqlalchemy.engine import Engine

from tests.annotation.test_estimates import (
    RUBRICS,
    Planted,
    build_planted,
    import_truth,
    judged,
    rated_half,
)
from tests.support import stores
from tests.support.cli import fairjudge
from tests.support.factories import write_config


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory, sample_template: Path) -> Planted:
    return build_planted(tmp_path_factory.mktemp("guard") / "planted.db", sample_template)


def store(engine: Engine, template: Planted, tmp_path: Path, keys: list[str]) -> Path:
    stores.restore(template.path, engine)
    import_truth(engine, template, keys)
    return write_config(tmp_path / "fairjudge.toml", template.base_url, str(engine.url))


def top_scored(planted: Planted, k: int = 40) -> list[str]:
    """The k items the planted judge scores highest (ties: by key)."""
    return sorted(planted.keys(), key=lambda key: (-judged(key), key))[:k]


def by_hand(planted: Planted, rated: list[str], rubric: str) -> tuple[float, float]:
    """(SMD, Welch p) of the judge's scores of the rated vs the unrated items of ``rubric``."""
    keys = planted.keys(rubric=rubric)
    a = [judged(k) for k in keys if k in rated]
    b = [judged(k) for k in keys if k not in rated]
    smd = (np.mean(a) - np.mean(b)) / math.sqrt((np.var(a, ddof=1) + np.var(b, ddof=1)) / 2)
    return float(smd), float(stats.ttest_ind(a, b, equal_var=False).pvalue)


def test_the_top_scored_items_are_refused_unless_accepted(
    engine: Engine, template: Planted, tmp_path: Path
) -> None:
    top = top_scored(template)
    config = store(engine, template, tmp_path, top)
    run = str(template.judge_run)
    refused = fairjudge("--config", config, "estimates", run, "--assume-random")
    assert refused.returncode == 1, (refused.stdout, refused.stderr)
    line = refused.stderr.strip()
    assert "\n" not in line and line.count("--assume-random refused") == 1
    # ICS (S1 and S4 items): the judge's scores of the rated vs the unrated, by hand.
    smd, p = by_hand(template, top, "ICS")
    rubrics = sum(any(k in top for k in template.keys(rubric=r)) for r in ("ICS", "TCS",
                  "PCS", "ETCS", "SBAS"))  # fmt: skip
    assert smd > 0.2 and p * rubrics < 0.01  # the planted hit, past both bounds
    assert f"standardised difference {smd:+.2f}" in line
    assert f"Welch p = {min(1.0, p * rubrics):.2g} corrected" in line
    assert "|difference| <= 0.2, or Welch p >= 0.01" in line
    assert "--accept-unrepresentative" in line
    # Nothing was stored or lost: the same command with the override uses the ratings.
    accepted = fairjudge(
        "--config", config, "estimates", run, "--assume-random", "--accept-unrepresentative",
        "--json",
    )  # fmt: skip
    assert accepted.returncode == 0, accepted.stderr
    data = json.loads(accepted.stdout)
    assert data["design"]["name"] == "assumed random (imported ratings), unrepresentative accepted"
    assert data["design"]["representativeness"]["passed"] is False
    assert data["design"]["representativeness"]["accepted_unrepresentative"] is True
    ics = next(c for c in data["rubrics"] if c["target"] == "ICS" and c["factor"] == "all")
    assert ics["prediction_powered"]["value"] is not None
    # Without --assume-random the override is a usage error.
    alone = fairjudge("--config", config, "estimates", run, "--accept-unrepresentative")
    assert alone.returncode == 2 and "goes with --assume-random" in alone.stderr


@pytest.mark.parametrize("pick", ["rated half", "random 40"])
def test_representative_ratings_pass(
    engine: Engine, template: Planted, tmp_path: Path, pick: str
) -> None:
    keys = (
        rated_half(template)
        if pick == "rated half"
        else random.Random(7).sample(template.keys(), 40)
    )
    config = store(engine, template, tmp_path, keys)
    shown = fairjudge(
        "--config", config, "estimates", str(template.judge_run), "--assume-random", "--json"
    )
    assert shown.returncode == 0, shown.stderr
    design = json.loads(shown.stdout)["design"]
    assert design["name"] == "assumed random (imported ratings)"
    check = design["representativeness"]
    assert check["passed"] is True and not check["accepted_unrepresentative"]
    for entry in check["rubrics"]:
        if entry["comparison"] is None:
            continue
        smd, _ = by_hand(template, keys, entry["rubric"])
        assert entry["comparison"]["smd"] == pytest.approx(smd)


def test_rows_under_30_ratings_are_marked(
    engine: Engine, template: Planted, tmp_path: Path
) -> None:
    # The rated half: every row has fewer than 30 rated items (the largest, a rubric over
    # all its items, has 18), so every row with ratings is marked, in the table and the JSON,
    # and its intervals are t intervals at n - 1 df.
    config = store(engine, template, tmp_path, rated_half(template))
    run = str(template.judge_run)
    table = fairjudge("--config", config, "estimates", run, "--assume-random")
    assert table.returncode == 0, table.stderr
    assert "18 (< 30)" in table.stdout and "t where a row has fewer than 30" in table.stdout
    data = json.loads(
        fairjudge("--config", config, "estimates", run, "--assume-random", "--json").stdout
    )
    ics = next(c for c in data["rubrics"] if c["target"] == "ICS" and c["factor"] == "all")
    assert ics["small_sample"] is True and ics["human_only"]["n"] == 18
    assert ics["human_only"]["interval"] == ics["prediction_powered"]["interval"] == "t, 17 df"
    # 36 ICS items, 18 rated (half of RUBRICS' S1 and S4 items).
    assert len(template.keys(rubric="ICS")) == 36 and "ICS" in RUBRICS["S1"]
