"""``fairjudge estimates`` on a real SQLite store judged by the planted judge of
tests/annotation/test_estimates.py (2 points above the truth except on race_culture items),
with the truth of half the items imported as ratings: the tables, --json, --plan, and one
usage line for options that do not go together."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from sqlalchemy.engine import Engine

from server.cli import Context
from server.cli.estimates import estimates
from tests.annotation.test_estimates import Planted, build_planted, import_truth, rated_half
from tests.support import stores
from tests.support.factories import write_config


@pytest.fixture
def config(engine: Engine, sample_template: Path, tmp_path: Path) -> tuple[Path, Planted]:
    planted = build_planted(tmp_path / "planted.db", sample_template)
    stores.restore(planted.path, engine)
    import_truth(engine, planted, rated_half(planted))
    return write_config(tmp_path / "fairjudge.toml", planted.base_url, str(engine.url)), planted


def run(config: Path, *args: str) -> Result:
    # The command is invoked directly (it is registered on the root group in server.cli).
    context = Context(config=str(config))
    try:
        return CliRunner().invoke(estimates, list(args), obj=context)
    finally:
        if context._engine is not None:
            context._engine.dispose()


def test_estimates_tables_json_and_plan(config: tuple[Path, Planted]) -> None:
    path, planted = config
    run_id = str(planted.judge_run)
    shown = run(path, run_id)
    assert shown.exit_code == 0, shown.output
    assert "Stage metrics (%), three ways" in shown.output
    assert "design assumed: refused" in shown.output and "--assume-random" in shown.output

    data = json.loads(run(path, run_id, "--assume-random", "--json").output)
    assert data["design"]["name"] == "assumed random (imported ratings)"
    ics = next(c for c in data["rubrics"] if c["target"] == "ICS" and c["factor"] == "all")
    assert ics["best"]["method"] == "prediction-powered"

    gap = json.loads(
        run(
            path, run_id, "--assume-random", "--gap-by", "factor", "--gap", "gender",
            "race_culture", "--gap-metric", "ICS", "--json",
        ).output
    )  # fmt: skip
    # The planted judge's gap is the people's plus 2 (it adds 2 to gender items only).
    assert gap["gap"]["judge_only"]["value"] - gap["gap"]["human_only"]["value"] == pytest.approx(
        2.0
    )

    plan = run(path, run_id, "--plan", "--target-half-width", "0.25", "--metric", "ICS")
    assert plan.exit_code == 0, plan.output
    assert "Human ratings for a 95 % interval" in plan.output

    wrong = run(path, run_id, "--plan")
    assert wrong.exit_code == 2 and "--plan needs --target-half-width" in wrong.output
    partial = run(path, run_id, "--gap-by", "factor")
    assert partial.exit_code == 2 and "--gap-by, --gap and --gap-metric" in partial.output
