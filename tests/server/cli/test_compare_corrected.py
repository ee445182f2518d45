"""``fairjudge compare A B --paired [--assume-random]`` on the planted pairs of
tests/support/planted_pairs.py: the corrected section is in the JSON and the printed tables,
and ``--assume-random`` alone is refused with one line.

Derived by hand from the plant: the judge puts B one point (20 % of 5) above A on every item,
people put B at A's level, so on the S1 ICS mean the judge-only B - A is +20 and the
prediction-powered one people's 0.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner
from sqlalchemy.engine import Engine

from server.cli import Context
from server.cli.compare import compare
from tests.support.planted_pairs import plant_pairs


def test_the_corrected_differences_come_with_paired(engine: Engine, db_url: str) -> None:
    truth = np.random.default_rng(7).integers(1, 4, 40).astype(float).tolist()
    runs = plant_pairs(engine, truth, [*truth[:30], *[float("nan")] * 10])
    obj = Context(None, db_url)
    pair = [str(runs.a), str(runs.b)]
    alone = CliRunner().invoke(compare, [*pair, "--assume-random"], obj=obj)
    assert alone.exit_code != 0 and "--paired" in str(alone.exception)
    got = CliRunner().invoke(compare, [*pair, "--paired", "--assume-random", "--json"], obj=obj)
    assert got.exit_code == 0, got.output
    corrected = json.loads(got.output)["paired_corrected"]
    assert corrected["usable"] is True
    (row,) = [
        r for r in corrected["rows"]
        if r["factor"] == "all" and r["metric"] == "S1 ICS mean (% of max)"
    ]  # fmt: skip
    assert row["judge_only"]["value"] == pytest.approx(20.0)
    assert row["prediction_powered"]["value"] == pytest.approx(0.0)
    printed = CliRunner().invoke(compare, [*pair, "--paired"], obj=obj)
    assert printed.exit_code == 0, printed.output
    # Imported ratings without --assume-random: the section says why, in one line.
    words = " ".join(printed.output.split())
    assert "run A: no human-only or prediction-powered estimate: ratings from import" in words
    assert "Corrected differences" not in words  # no table without a usable design
