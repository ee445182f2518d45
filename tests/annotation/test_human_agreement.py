"""Agreement among humans through the real interfaces: Krippendorff's ratio alpha, Fleiss' kappa
and linear-weighted pairwise kappa in `fairjudge agreement --run` (text and JSON), the report's
reliability section, the API's agreement route and `fairjudge agreement compute`.

Expected values are recomputed here from the ratings written to the CSV, with krippendorff
(alpha), statsmodels (Fleiss' kappa) and scikit-learn (Cohen's kappa)."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import krippendorff
import numpy as np
import pytest
from click.testing import CliRunner
from sklearn.metrics import cohen_kappa_score
from sqlalchemy.engine import Engine
from sqlmodel import Session, select
from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

from judge.store.tables import Item, Judgment
from server import create_app
from server.auth import create_key
from server.cli import cli
from tests.support.factories import make_settings
from tests.support.stub_openai import StubServer

RATERS = ("ann1", "ann2", "ann3")
LABELS = [1, 2, 3, 4, 5]


def ratings_grid(n_items: int) -> np.ndarray:
    """(raters, items) ratings: a seeded true score per item, each rater off by -1, 0 or +1
    now and then, kept on 1-5. Every rater rates every item (Fleiss' own design), so
    statsmodels can compute Fleiss' kappa too."""
    rng = np.random.default_rng(11)
    truth = rng.integers(1, 6, n_items)
    noise = rng.choice([-1, 0, 0, 0, 1], size=(len(RATERS), n_items))
    return np.clip(truth + noise, 1, 5)


def expected(grid: np.ndarray) -> dict[str, Any]:
    table, _ = aggregate_raters(grid.T)  # items x categories counts
    pairs = {
        (RATERS[a], RATERS[b]): cohen_kappa_score(grid[a], grid[b], labels=LABELS, weights="linear")
        for a, b in ((0, 1), (0, 2), (1, 2))
    }
    return {
        "fleiss": fleiss_kappa(table),
        "ratio": krippendorff.alpha(
            reliability_data=grid, level_of_measurement="ratio", value_domain=LABELS
        ),
        "linear": pairs,
    }


def write_ratings(path: Path, keys: list[str], grid: np.ndarray, rubric: str | None) -> Path:
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["item_id", *(["rubric"] if rubric else []), "rater", "score"])
        for r, rater in enumerate(RATERS):
            for i, key in enumerate(keys):
                writer.writerow([key, *([rubric] if rubric else []), rater, int(grid[r, i])])
    return path


def check_humans(hh: dict[str, Any], want: dict[str, Any], n: int) -> None:
    assert hh["fleiss_kappa"]["value"] == pytest.approx(want["fleiss"], abs=1e-12)
    assert hh["fleiss_kappa"]["n"] == n
    assert hh["fleiss_kappa"]["ci_low"] <= want["fleiss"] <= hh["fleiss_kappa"]["ci_high"]
    assert hh["alpha_ratio"]["value"] == pytest.approx(want["ratio"], abs=1e-12)
    assert hh["alpha_ratio"]["ci_low"] <= want["ratio"] <= hh["alpha_ratio"]["ci_high"]
    found = {tuple(p["raters"]): p["kappa_linear"]["value"] for p in hh["pairwise_kappa"]}
    assert found == pytest.approx(want["linear"], abs=1e-12)


def test_run_agreement_cli_report_and_api(
    tmp_path: Path, engine: Engine, db_url: str, stub: StubServer, judged: tuple[int, int]
) -> None:
    run, judge_run = judged
    with Session(engine) as s:
        keys = sorted({item.key for _, item in s.exec(select(Judgment, Item).join(Item))})
    grid = ratings_grid(len(keys))
    want = expected(grid)
    # Not a degenerate example: the raters agree clearly but not perfectly.
    assert 0.3 < want["fleiss"] < 0.9 and want["fleiss"] != pytest.approx(want["ratio"])
    config = tmp_path / "c.toml"
    config.write_text(
        f'database_url = "{db_url}"\n[endpoints.embedded]\n'
        'base_url = "http://127.0.0.1:9/v1"\nmodel = "m"\n'
    )
    runner = CliRunner()
    base = ["--config", str(config)]
    ratings = write_ratings(tmp_path / "r.csv", keys, grid, "ICS")
    imported = runner.invoke(cli, [*base, "ratings", "import", str(ratings), "--run", str(run)])
    assert imported.exit_code == 0, imported.output

    shown = runner.invoke(cli, [*base, "agreement", "--run", str(run), "--bootstrap", "200"])
    assert shown.exit_code == 0, shown.output
    assert "Agreement among humans" in shown.output and "Fleiss kappa" in shown.output
    assert "Pairwise kappa among humans" in shown.output and "kappa (linear)" in shown.output
    assert f"{want['fleiss']:.2f} [" in shown.output
    as_json = runner.invoke(
        cli, [*base, "agreement", "--run", str(run), "--bootstrap", "200", "--json"]
    )
    assert as_json.exit_code == 0, as_json.output
    check_humans(json.loads(as_json.output)["rubrics"]["ICS"]["human_vs_human"], want, len(keys))

    # The API's agreement route gives the CLI's --json shape, scoped to the judge run.
    app = create_app({"SETTINGS": make_settings(stub.base_url, db_url), "TESTING": True})
    _, key = create_key(engine, "member", "member")
    got = app.test_client().get(
        f"/api/v1/judge-runs/{judge_run}/agreement", headers={"Authorization": f"Bearer {key}"}
    )
    assert got.status_code == 200, got.json
    check_humans(got.json["rubrics"]["ICS"]["human_vs_human"], want, len(keys))

    report = runner.invoke(cli, [*base, "report", str(judge_run), "--out", str(tmp_path / "rep")])
    assert report.exit_code == 0, report.output
    saved = json.loads((tmp_path / "rep" / "report.json").read_text())
    check_humans(saved["agreement"]["human_vs_human"]["ICS"], want, len(keys))
    html = (tmp_path / "rep" / "report.html").read_text()
    assert "Agreement among humans" in html and f"{want['ratio']:.2f} [" in html


def test_agreement_compute_on_files(tmp_path: Path) -> None:
    keys = [f"item{i}" for i in range(40)]
    grid = ratings_grid(len(keys))
    want = expected(grid)
    human = write_ratings(tmp_path / "h.csv", keys, grid, None)
    runner = CliRunner()
    args = ["agreement", "compute", "--human", str(human), "--bootstrap", "200"]
    as_json = runner.invoke(cli, [*args, "--json"])
    assert as_json.exit_code == 0, as_json.output
    check_humans(json.loads(as_json.output)["human_vs_human"], want, len(keys))
    shown = runner.invoke(cli, args)
    assert shown.exit_code == 0, shown.output
    assert "fleiss_kappa" in shown.output and "alpha_ratio" in shown.output
    assert "kappa_linear (ann1, ann2)" in shown.output
    assert f"{want['linear'][('ann1', 'ann2')]:.3f} [" in shown.output
