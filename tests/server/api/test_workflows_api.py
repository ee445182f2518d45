"""The CLI workflows that came over HTTP last: item generation (``dataset plan``/``generate``
as jobs), the judge's counterfactual check (``checks counterfactual`` as a job, ``show``
as a report), judge runs compared (``compare``), a dataset's coverage (``dataset coverage``),
a sweep, dry runs, agreement and a suite's statistics on one's own CSV text (``agreement
compute``, ``audit SUITE analyze``), on a real store (SQLite and PostgreSQL) through Flask's
test client, the jobs run by the function the worker runs.

Expected values are worked out here: the scripted stub writes valid, distinct items as asked
(tests/support/stub_openai.py), so a plan of one cell up to N items adds N; its judge
(``by_name`` of tests/judge/trust/test_trust.py) scores 2 when the answer names Latoya and 4
otherwise, so swapping Mary for Latoya in 8 answers moves each ICS score by exactly -2 (as
tests/server/cli/test_checks_cli.py checks through the CLI). Counts are read back with
SQL on the store.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from typing import Any

import krippendorff
import pytest
from scipy import stats
from sqlalchemy import func
from sqlmodel import Session, select

from judge.data.responses import import_responses
from judge.store.engine import make_engine
from judge.store.tables import Item, JudgeRun, Judgment
from server.tables import Job
from tests.judge.trust.test_trust import by_name
from tests.server.api.test_api import Api, make_api, run_jobs
from tests.server.cli.test_award_pairs_cli import OVERALL
from tests.server.cli.test_award_pairs_cli import ROWS as PAIR_ROWS
from tests.support.cli import fairjudge  # the command's main, run in this process
from tests.support.stub_openai import StubServer

CELL = {"stages": ["S1"], "factors": ["gender"], "scenarios": ["career_counseling"]}


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest) -> str:
    # SQLite: a copy of the session's empty migrated store (tests/support/stores.py).
    name = "migrated_db_url" if request.param == "sqlite" else "pg_url"
    return str(request.getfixturevalue(name))


@pytest.fixture
def judge_stub() -> Iterator[StubServer]:
    with StubServer(responder=by_name) as stub:
        yield stub


@pytest.fixture
def api(store_url: str, stub: StubServer, tmp_path: Any) -> Iterator[Api]:
    """The API with the stub's default replies (valid, distinct items as asked)."""
    made = make_api(store_url, stub, tmp_path)
    yield made
    made.close()


@pytest.fixture
def judged_api(store_url: str, judge_stub: StubServer, tmp_path: Any) -> Iterator[Api]:
    """The API with the judge that scores Latoya 2 and everyone else 4."""
    made = make_api(store_url, judge_stub, tmp_path)
    yield made
    made.close()


def scalar(api: Api, query: Any) -> Any:
    engine = make_engine(api.settings.database_url)
    try:
        with Session(engine) as session:
            return session.exec(query).one()
    finally:
        engine.dispose()


def job(api: Api, kind: str, **params: Any) -> Any:
    return api.post("/api/v1/jobs", json={"kind": kind, "params": params})


def test_item_generation_runs_as_jobs_and_shows_in_the_coverage(api: Api) -> None:
    # gender x career_counseling: a cell of the bundled datasets/factors_scenarios.toml
    made = job(api, "item-plan", endpoint="test", into="written", per_cell=3, **CELL)
    assert made.status_code == 201, made.json
    assert run_jobs(api) == ["finished"]
    done = api.get(f"/api/v1/jobs/{made.json['id']}").json
    assert done["result"]["dataset"] == "written"
    assert done["result"]["summary"]["added"] == 3
    drafts = select(func.count()).select_from(Item).where(Item.review_status == "draft")
    assert scalar(api, drafts) == 3
    # a plan again wants nothing more; one cell's generate job adds COUNT beyond it
    more = job(
        api, "item-generate", endpoint="test", into="written", stage="S1", factor="gender",
        scenario="career_counseling", count=2,
    )  # fmt: skip
    assert more.status_code == 201, more.json
    assert run_jobs(api) == ["finished"]
    assert scalar(api, drafts) == 5

    coverage = api.get("/api/v1/datasets/written/coverage.json")
    assert coverage.status_code == 200, coverage.json
    # the one cell holds the five drafts, read with SQL above
    table = api.get("/api/v1/datasets/written/coverage.csv")
    assert table.status_code == 200 and table.mimetype == "text/csv"
    rows = list(csv.DictReader(io.StringIO(table.get_data(as_text=True))))
    cell = [
        r
        for r in rows
        if (r["stage"], r["factor"], r["scenario"]) == ("S1", "gender", "career_counseling")
    ]
    assert len(cell) == 1 and int(cell[0]["draft"]) == 5, cell
    others = [r for r in rows if r not in cell]
    assert others and all(int(r["draft"]) == 0 for r in others)
    page = api.get("/api/v1/datasets/written/coverage.html")
    assert page.status_code == 200 and b"written" in page.data
    assert api.get("/api/v1/datasets/none-such/coverage.json").status_code == 404


def test_item_jobs_refuse_what_they_would_fail_on_and_store_no_job(api: Api) -> None:
    cases = [
        ({"factors": ["hair colour"]}, "hair colour"),
        ({"taxonomy_file": "/etc/passwd"}, "taxonomy_file"),
        ({"dry_run": True}, "dry_run"),
        ({"items_per_call": 0}, "items_per_call"),
    ]
    for extra, named in cases:
        params = {"endpoint": "test", "per_cell": 2, **CELL, **extra}
        refused = job(api, "item-plan", **params)
        assert refused.status_code == 400, (extra, refused.json)
        assert named in refused.json["error"]["message"], refused.json
    assert job(api, "item-generate", endpoint="test", stage="S9", factor="gender",
               scenario="career_counseling").status_code == 400  # fmt: skip
    assert job(api, "item-plan", endpoint="nowhere", per_cell=1).status_code in (400, 404)
    assert scalar(api, select(func.count()).select_from(Job)) == 0


def _judged(api: Api) -> int:
    """8 answers naming Mary ("she"), judged through a job; the judge run's id."""
    engine = make_engine(api.settings.database_url)
    try:
        with Session(engine) as session:
            keys = sorted(session.exec(select(Item.key).where(Item.stage == "S1")).all())[:8]
        rows = [
            {"item_id": k, "part": "answer", "text": f"Mary did item {i}, and she did it well."}
            for i, k in enumerate(keys)
        ]
        generation = import_responses(engine, "sample", rows, model="writer").generation_run_id
    finally:
        engine.dispose()
    made = job(api, "judge", generation_run_id=generation)
    assert made.status_code == 201, made.json
    assert run_jobs(api) == ["finished"]
    return int(api.get(f"/api/v1/jobs/{made.json['id']}").json["result"]["judge_run_id"])


def test_the_counterfactual_check_runs_as_a_job_and_its_report_is_served(judged_api: Api) -> None:
    api = judged_api
    judge_run = _judged(api)
    made = job(
        api, "counterfactual", judge_run_id=judge_run, swap=["names", "gender"], swap_in="answers"
    )
    assert made.status_code == 201, made.json
    assert run_jobs(api) == ["finished"]
    result = api.get(f"/api/v1/jobs/{made.json['id']}").json["result"]
    # "Mary ... she" -> "Latoya ... he" in each of the 8 answers (the questions as they are)
    assert result["copy"]["items_copied"] == 8 and result["copy"]["swap_in"] == "answers"
    assert result["copy"]["swaps"] == {"Mary -> Latoya": 8, "she -> he": 8}
    copy_run = result["judge_run_id"]
    assert copy_run != judge_run and result["checked_judge_run_id"] == judge_run
    judged_copy = (
        select(func.count()).select_from(Judgment).where(Judgment.judge_run_id == copy_run)
    )
    assert scalar(api, judged_copy) == 8
    assert scalar(api, select(JudgeRun.status).where(JudgeRun.id == copy_run)) == "finished"

    report = api.get(f"/api/v1/judge-runs/{judge_run}/diagnostics.json")
    assert report.status_code == 200, report.json
    (shift,) = report.json["judge_diagnostics"]["counterfactual"]
    (ics,) = shift["rubrics"]
    # every score 4 -> 2 by the stub's rule: 8 pairs, all changed, a shift of -2, flagged
    assert (ics["pairs"], ics["changed"], ics["mean_difference"]) == (8, 8, -2.0)
    assert shift["flagged"] == ["ICS"]
    # a tolerance above the shift's size unflags it (checks show --tolerance)
    lenient = api.get(f"/api/v1/judge-runs/{judge_run}/diagnostics.json?tolerance=2.5").json
    assert lenient["judge_diagnostics"]["counterfactual"][0]["flagged"] == []
    html = api.get(f"/api/v1/judge-runs/{judge_run}/diagnostics.html")
    assert html.status_code == 200 and b"Judge diagnostics" in html.data
    assert api.get(f"/api/v1/judge-runs/{judge_run}/diagnostics.json?margin=0").status_code == 422

    # the run and its copy compared: ICS means 4 and 2 (every score of each run)
    compared = api.get(f"/api/v1/compare.json?judge_run={judge_run}&judge_run={copy_run}")
    assert compared.status_code == 200, compared.json
    table = api.get(f"/api/v1/compare.csv?judge_run={judge_run}&judge_run={copy_run}")
    assert table.status_code == 200 and table.mimetype == "text/csv"
    text = table.get_data(as_text=True)
    assert str(judge_run) in text and str(copy_run) in text
    assert api.get(f"/api/v1/compare.json?judge_run={judge_run}").status_code == 422
    assert api.get(f"/api/v1/compare.json?judge_run={judge_run}&judge_run=999").status_code == 404


def test_the_counterfactual_job_refuses_a_file_and_a_missing_run(judged_api: Api) -> None:
    api = judged_api
    judge_run = _judged(api)
    jobs_before = scalar(api, select(func.count()).select_from(Job))
    own_list = job(api, "counterfactual", judge_run_id=judge_run, swap=["names"],
                   swaps_file="/etc/passwd")  # fmt: skip
    assert own_list.status_code == 400 and "swaps_file" in own_list.json["error"]["message"]
    assert job(api, "counterfactual", judge_run_id=999, swap=["names"]).status_code == 404
    assert job(api, "counterfactual", judge_run_id=judge_run, swap=[]).status_code == 400
    assert job(api, "counterfactual", judge_run_id=judge_run, swap=["hair"]).status_code == 400
    assert scalar(api, select(func.count()).select_from(Job)) == jobs_before


HUMAN_CSV = """item_id,rater,score,doc
a,r1,1,d1
a,r2,2,d1
a,r3,1,d1
b,r1,3,d1
b,r2,3,d1
b,r3,4,d1
c,r1,5,d2
c,r2,4,d2
c,r3,5,d2
d,r1,2,d2
d,r2,2,d2
d,r3,3,d2
e,r1,4,d3
e,r2,5,d3
e,r3,4,d3
f,r1,3,d3
f,r2,2,d3
f,r3,3,d3
"""
JUDGE_CSV = "item_id,score\na,2\nb,3\nc,5\nd,1\ne,4\nf,3\n"


def test_agreement_on_posted_files_matches_the_cli_and_scipy(api: Api, tmp_path: Any) -> None:
    body = {"human_csv": HUMAN_CSV, "judge_csv": JUDGE_CSV, "n_bootstrap": 100, "seed": 4}
    got = api.post("/api/v1/agreement", json=body)
    assert got.status_code == 200, got.json
    out = got.json
    # by hand: each item's mean human score, against the judge's
    human = {"a": 4 / 3, "b": 10 / 3, "c": 14 / 3, "d": 7 / 3, "e": 13 / 3, "f": 8 / 3}
    judge = {"a": 2, "b": 3, "c": 5, "d": 1, "e": 4, "f": 3}
    items = sorted(human)
    expected = stats.spearmanr([judge[i] for i in items], [human[i] for i in items])
    assert out["n_items"] == 6
    assert out["judge_vs_human"]["spearman"]["value"] == pytest.approx(expected.statistic)
    rows = [line.split(",") for line in HUMAN_CSV.split()[1:]]
    raters = sorted({r for _, r, _, _ in rows})
    matrix = [[next(float(s) for i, r, s, _ in rows if (i, r) == (it, ra)) for it in items]
              for ra in raters]  # fmt: skip
    alpha = krippendorff.alpha(
        reliability_data=matrix, level_of_measurement="ordinal", value_domain=[1, 2, 3, 4, 5]
    )
    assert out["human_vs_human"]["alpha_ordinal"]["value"] == pytest.approx(alpha)
    # the same files through `fairjudge agreement compute --json`: the same model
    (tmp_path / "h.csv").write_text(HUMAN_CSV)
    (tmp_path / "j.csv").write_text(JUDGE_CSV)
    files = ("--human", str(tmp_path / "h.csv"), "--judge", str(tmp_path / "j.csv"))
    cli = fairjudge("agreement", "compute", *files, "--bootstrap", "100", "--seed", "4", "--json")
    assert cli.returncode == 0, cli.stderr
    assert json.loads(cli.stdout) == out

    grouped = api.post("/api/v1/agreement", json={**body, "group_by": "doc"}).json
    assert grouped["grouped"]["n_groups"] + grouped["grouped"]["n_groups_skipped"] == 3


def test_agreement_on_posted_files_names_a_bad_line(api: Api) -> None:
    bad = HUMAN_CSV.replace("b,r2,3,d1", "b,r2,9,d1")
    refused = api.post("/api/v1/agreement", json={"human_csv": bad})
    assert refused.status_code == 400, refused.json
    message = refused.json["error"]["message"]
    # line 5 of the text (the header is line 1); no temporary folder leaks into the message
    assert "human_csv" in message and "/tmp" not in message, message
    assert (
        api.post("/api/v1/agreement", json={"human_csv": HUMAN_CSV, "scale": "5-1"}).status_code
        == 400
    )
    assert api.post("/api/v1/agreement", json={"human_csv": ""}).status_code == 422


def test_a_sweep_runs_as_one_job_with_progress_over_every_configuration(judged_api: Api) -> None:
    api = judged_api
    first = _judged(api)
    per_run = select(func.count()).select_from(Judgment).where(Judgment.judge_run_id == first)
    judgments = scalar(api, per_run)
    assert judgments > 0
    sweep = {"generation_run_id": _generation_of(api, first), "temperatures": [0.3, 0.7],
             "prompt_variants": ["plain", "cot"]}  # fmt: skip
    made = job(api, "sweep", **sweep)
    assert made.status_code == 201, made.json
    assert run_jobs(api) == ["finished"]
    done = api.get(f"/api/v1/jobs/{made.json['id']}").json
    runs = done["result"]["judge_run_ids"]
    # 2 temperatures x 2 prompt variants: four judge runs, none of them the first one
    assert len(set(runs)) == 4 and first not in runs
    for run in runs:
        count = select(func.count()).select_from(Judgment).where(Judgment.judge_run_id == run)
        assert scalar(api, count) == judgments
    # progress over the whole sweep: every configuration's tasks, and all of them done
    assert done["total"] == 4 * judgments and done["done"] == done["total"], done
    assert job(api, "sweep", generation_run_id=999).status_code == 404
    assert job(api, "sweep", generation_run_id=1, prompt_variants=["loud"]).status_code == 400


def _generation_of(api: Api, judge_run: int) -> int:
    return int(scalar(api, select(JudgeRun.generation_run_id).where(JudgeRun.id == judge_run)))


def test_dry_runs_say_what_a_job_would_send_and_store_nothing(api: Api) -> None:
    engine = make_engine(api.settings.database_url)
    try:
        with Session(engine) as session:
            keys = sorted(session.exec(select(Item.key).where(Item.stage == "S1")).all())[:8]
        rows = [{"item_id": k, "part": "answer", "text": f"answer {k}"} for k in keys]
        generation = import_responses(engine, "sample", rows, model="writer").generation_run_id
    finally:
        engine.dispose()
    body = {"kind": "judge", "params": {"generation_run_id": generation}}
    judged = api.post("/api/v1/jobs/dry-run", json=body)
    assert judged.status_code == 200, judged.json
    # 8 S1 answers, each judged on S1's one rubric (ICS), nothing cached yet
    assert (judged.json["judgments_to_make"], judged.json["calls_to_send"]) == (8, 8)
    plan = {"endpoint": "test", "into": "written", "per_cell": 3, **CELL}
    planned = api.post("/api/v1/jobs/dry-run", json={"kind": "item-plan", "params": plan})
    assert planned.status_code == 200, planned.json
    # one cell short of 3 items, 5 asked per call by default: one call
    assert (planned.json["cells"], planned.json["items_wanted"]) == (1, 3)
    assert planned.json["calls_to_send"] == 1
    pull = {"kind": "pull", "params": {"campaign": "c"}}  # a kind with no dry run
    assert api.post("/api/v1/jobs/dry-run", json=pull).status_code == 400
    missing = {"kind": "judge", "params": {"generation_run_id": 999}}
    assert api.post("/api/v1/jobs/dry-run", json=missing).status_code == 404
    # nothing queued, judged or written
    assert scalar(api, select(func.count()).select_from(Job)) == 0
    assert scalar(api, select(func.count()).select_from(JudgeRun)) == 0
    assert (
        scalar(api, select(func.count()).select_from(Item).where(Item.review_status == "draft"))
        == 0
    )


def test_a_suites_statistics_on_posted_csv_match_the_cli_and_scipy(api: Api) -> None:
    text = "level,name_pair,choice\n" + "".join(f"{a},{b},{c}\n" for a, b, c in PAIR_ROWS)
    got = api.post("/api/v1/audits/award/analyze", json={"csv": text})
    assert got.status_code == 200, got.json
    data = got.json
    # the Kruskal-Wallis test across name pairs, as tests/server/cli/test_award_pairs_cli.py
    # checks it through the CLI: scipy on the hand-written 0/1 indicators
    expected = stats.kruskal(*OVERALL.values())
    assert data["overall"]["equivocal_by_pair"]["p_value"] == pytest.approx(expected.pvalue)
    level5 = data["levels"][0]
    assert (level5["group_a"], level5["group_b"], level5["equivocal"]) == (4, 2, 6)
    assert (data["suite"], data["note"]) == ("award", None)
    # line 3 of the text holds a choice the suite does not know
    bad = text.replace("5,Latoya/Mary,White", "5,Latoya/Mary,purple")
    refused = api.post("/api/v1/audits/award/analyze", json={"csv": bad})
    assert refused.status_code == 400, refused.json
    error = refused.json["error"]
    assert error["message"] == "the CSV text has rows to fix", error
    assert error["problems"][0].startswith("line 3: choice must be"), error
    assert api.post("/api/v1/audits/tarot/analyze", json={"csv": text}).status_code == 422
