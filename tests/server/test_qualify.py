"""Qualified judges (issue 42) on planted stores (tests/support/planted_judge.py): a
constant judge on a 90 %-pass rubric is flagged and not qualified, a good judge is
qualified and its report says so next to the figures, a run on another model is not covered,
new ratings make a record stale, bad input stores nothing, and ``--require-qualified``
refuses with exit code 4 (409 over HTTP) only where the judge is not validated."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, func, select

from judge.config_qualify import QualifyConfig
from judge.errors import InvalidInputError
from judge.store.tables import JudgeQualification
from server.usecases.qualify import QualifyRequest, qualify
from server.usecases.standing import run_standing
from tests.support.cli import fairjudge
from tests.support.planted_judge import (
    add_answers,
    add_judge_run,
    add_ratings,
    good_judge,
    plant,
)

RULE = QualifyConfig(n_bootstrap=200)  # fewer resamples than the default: a quicker test


def _request(run: int, rubric: str = "ICS") -> QualifyRequest:
    return QualifyRequest(judge_run=run, rubric=rubric)


def _stored(session: Session) -> int:
    return int(session.exec(select(func.count()).select_from(JudgeQualification)).one())


def test_constant_judge_on_a_90_percent_pass_rubric_is_flagged_and_not_qualified(
    engine: Engine,
) -> None:
    # 100 items: the three raters give 90 of them 5 ("pass") and 10 of them 1; the judge
    # says 5 to all.
    humans = [5.0] * 90 + [1.0] * 10
    with Session(engine) as session:
        p = plant(session, [5] * 100, {r: humans for r in ("a", "b", "c")})
        done = qualify(session, _request(p.judge_run_id), RULE)
        ev = done.record.evidence
        assert ev["exact_agreement"]["value"] == pytest.approx(0.90, abs=1e-12)
        assert ev["kappa"]["value"] == pytest.approx(0.0, abs=1e-12)
        assert ev["majority_baseline"]["value"] == pytest.approx(0.90, abs=1e-12)
        # AC1 by hand on the five categories of 1-5: pa = 0.90; the margins' means are
        # pi_5 = (1.00 + 0.90) / 2 = 0.95 and pi_1 = 0.05, the rest 0; pe = sum pi (1 - pi) /
        # (q - 1) = 2 * 0.95 * 0.05 / 4 = 0.02375; AC1 = (0.90 - pe) / (1 - pe).
        pe = 2 * 0.95 * 0.05 / 4
        assert ev["ac1"]["value"] == pytest.approx((0.90 - pe) / (1 - pe), abs=1e-9)
        assert {f["code"] for f in ev["flags"]} == {"kappa_covers_zero", "no_better_than_majority"}
        assert done.record.outcome == "failed" and not done.outcome.qualified
        assert done.record.line.startswith("not qualified for ICS")
        assert "no better than always answering the majority class" in done.record.line
        standing = run_standing(session, p.judge_run_id)["ICS"]
        assert standing.state == "failed validation"


def test_good_judge_is_qualified_and_its_report_says_so_first(engine: Engine) -> None:
    from server.usecases.reports import full_report

    judge, raters = good_judge(150, seed=2)
    with Session(engine) as session:
        p = plant(session, judge, raters)
        assert run_standing(session, p.judge_run_id)["ICS"].state == "not validated"
        done = qualify(session, _request(p.judge_run_id), RULE)
        assert done.outcome.qualified, done.record.line
        ev = done.record.evidence
        assert ev["flags"] == []  # no false alarm on a judge that tracks the people
        assert ev["alt_test"]["passed"] is True
        assert ev["human_ceiling_alpha_interval"]["value"] > 0.5
        standing = run_standing(session, p.judge_run_id)["ICS"]
        assert standing.state == "validated"
        assert f"on {done.record.n_ratings} ratings" in standing.says
        report = full_report(session, p.judge_run_id)
    first = report.sections[0]
    assert first.title == "Judge standing"  # before every figure
    assert report.to_json()["standing"]["rubrics"]["ICS"]["state"] == "validated"
    rows = [
        row
        for section in report.sections
        for table in section.csv.values()
        for row in table
        if row.get("rubric") == "ICS"
    ]
    assert rows and {row["judge_standing"] for row in rows} == {"validated"}
    metrics = next(s.csv["metrics.csv"] for s in report.sections if "metrics.csv" in s.csv)
    assert {r["judge_standing"] for r in metrics if r["rubric"] == "ICS"} == {"validated"}


def test_a_run_on_another_model_or_temperature_is_not_covered(engine: Engine) -> None:
    judge, raters = good_judge(120, seed=4)
    with Session(engine) as session:
        p = plant(session, judge, raters)
        qualify(session, _request(p.judge_run_id), RULE)
        other = add_judge_run(session, p.generation_run_id, p.item_ids, judge, model="other")
        warmer = add_judge_run(session, p.generation_run_id, p.item_ids, judge, temperature=0.7)
        assert run_standing(session, p.judge_run_id)["ICS"].state == "validated"
        for run, differs in ((other, "model differs"), (warmer, "temperature differs")):
            found = run_standing(session, run.judge_run_id)["ICS"]
            assert found.state == "not validated" and differs in found.says


def test_a_run_on_another_models_answers_is_validated_only_where_the_relation_transports(
    engine: Engine,
) -> None:
    # The judge (same configuration throughout) is qualified on model-under-test's answers.
    # On model-B's answers, unrated, nothing says it holds there: not validated, naming both
    # models and the transport command, and --require-qualified refuses. Rated on B's answers
    # by people to whom the judge relates as on A's (good_judge again, another seed), the
    # transport F-test does not reject (p 0.68) and the standing is validated through it. On
    # model-C's answers the judge scores 2 points low (clipped at 1): the relation differs,
    # the F-test rejects, and it stays not validated.
    from judge.errors import UnqualifiedError
    from server.usecases.standing import require_qualified

    judge, raters = good_judge(120, seed=4)
    with Session(engine) as session:
        p = plant(session, judge, raters)
        qualify(session, _request(p.judge_run_id), RULE)
        own = run_standing(session, p.judge_run_id)["ICS"]
        assert own.state == "validated" and own.answers_model == "model-under-test"
        assert "on model-under-test's answers" in own.says
        unrated = add_judge_run(session, add_answers(session, p, "model-B"), p.item_ids, judge)
        b = run_standing(session, unrated.judge_run_id)["ICS"]
        assert b.state == "not validated" and b.answers_model == "model-under-test"
        assert b.says.startswith(
            "not validated: validated on model-under-test's answers, not on model-B's (check "
            f"transport: `fairjudge estimates {unrated.judge_run_id} --transport "
            f"{p.judge_run_id}`; not tested: "
        ), b.says
        with pytest.raises(UnqualifiedError, match="not on model-B's"):
            require_qualified(session, unrated.judge_run_id)
        judge_b, raters_b = good_judge(120, seed=12)
        rated = add_judge_run(
            session, add_answers(session, p, "model-B2"), p.item_ids, judge_b, raters_b
        )
        b2 = run_standing(session, rated.judge_run_id)["ICS"]
        assert b2.state == "validated", b2.says
        assert "on model-B2's answers through the transport check" in b2.says
        assert "relation transports (F p = " in b2.says
        require_qualified(session, rated.judge_run_id)  # no error
        judge_c, raters_c = good_judge(120, seed=13)
        low = [max(1.0, float(j or 0) - 2) for j in judge_c]
        biased = add_judge_run(
            session, add_answers(session, p, "model-C"), p.item_ids, low, raters_c
        )
        c = run_standing(session, biased.judge_run_id)["ICS"]
        assert c.state == "not validated", c.says
        assert "not on model-C's" in c.says and "does not transport (F p = " in c.says


def test_a_weighted_campaign_s_agreement_is_said_to_be_unweighted(engine: Engine) -> None:
    # Planted: a stratified campaign drew the first 30 of 60 items with probability 1/2 and
    # the other 30 with 1/4, and three people rated them. The agreement counts each rated
    # item once (unweighted), and the record says so with the design; the planted import
    # batch (no design, every item once) says only that every item counts once.
    from judge.store.tables import Campaign, CampaignTask, HumanRating

    judge, raters = good_judge(60, seed=14)
    with Session(engine) as session:
        p = plant(session, judge, {})
        campaign = Campaign(
            name="strata", kind="rating", dataset_id=p.dataset_id,
            generation_run_id=p.generation_run_id, judge_run_id=p.judge_run_id,
            rubrics=["ICS"], strategy="stratified", population=180, size=60, annotators=3,
            ls_url="http://ls.example",
        )  # fmt: skip
        session.add(campaign)
        session.flush()
        for k, item in enumerate(p.item_ids):
            low = k >= 30
            session.add(CampaignTask(campaign_id=campaign.id, item_id=item,
                                     task_key=f"strata:{item}", stratum="low" if low else "high",
                                     inclusion_probability=0.25 if low else 0.5))  # fmt: skip
            for rater, scores in raters.items():
                session.add(HumanRating(generation_run_id=p.generation_run_id, item_id=item,
                                        rubric="ICS", rater=rater, score=scores[k],
                                        source="labelstudio", scope=f"campaign:{campaign.id}",
                                        campaign_id=campaign.id))  # fmt: skip
        session.commit()
        weighted = qualify(session, _request(p.judge_run_id), RULE).record.evidence["weighting"]
        judge2, raters2 = good_judge(60, seed=15)
        plain = plant(session, judge2, raters2, name="plain")
        flat = qualify(session, _request(plain.judge_run_id), RULE).record.evidence["weighting"]
    assert weighted["design"] == "stratified" and weighted["unequal_weights"] is True
    assert weighted["note"].startswith("unweighted: every rated item counts once, although ")
    assert (
        "campaign strata's stratified design drew them with unequal probabilities"
        in (weighted["note"])
    )
    assert flat["unequal_weights"] is False
    assert flat["note"] == "unweighted: every rated item counts once"


def test_ratings_stored_after_the_record_make_it_stale(engine: Engine) -> None:
    from server.usecases.reports import full_report

    judge, raters = good_judge(120, seed=5)
    with Session(engine) as session:
        p = plant(session, judge, raters)
        qualify(session, _request(p.judge_run_id), RULE)
        assert run_standing(session, p.judge_run_id)["ICS"].state == "validated"
        add_ratings(session, p.generation_run_id, p.item_ids[:5], "late", [3.0] * 5)
        session.commit()
        stale = run_standing(session, p.judge_run_id)["ICS"]
        assert stale.state == "stale" and "checks qualify" in stale.says
        report = full_report(session, p.judge_run_id)
    # The report says so where a reader looks first, in report.json and beside the figures.
    first = report.sections[0]
    assert first.title == "Judge standing"
    assert report.to_json()["standing"]["rubrics"]["ICS"]["state"] == "stale"
    metrics = next(s.csv["metrics.csv"] for s in report.sections if "metrics.csv" in s.csv)
    assert {r["judge_standing"] for r in metrics if r["rubric"] == "ICS"} == {"stale"}


@pytest.mark.parametrize(
    ("case", "says"),
    [
        ("few", "only 20 rated items of 'ICS' have a judge score; the rule needs 30"),
        ("scale", "lie outside its 1-5 scale (e.g. 7): they were made on another scale"),
        ("rubric", "has no judgments of rubric 'TCS'; it judged ICS"),
        ("one", "come from one rater only (a)"),
    ],
)
def test_bad_input_is_one_line_and_stores_nothing(engine: Engine, case: str, says: str) -> None:
    judge, raters = good_judge(20 if case == "few" else 60, seed=6)
    if case == "scale":
        raters["r0"][0] = 7.0
    if case == "one":
        raters = {"a": raters["r0"]}
    with Session(engine) as session:
        p = plant(session, judge, raters)
        rubric = "TCS" if case == "rubric" else "ICS"
        with pytest.raises(InvalidInputError) as raised:
            qualify(session, _request(p.judge_run_id, rubric), RULE)
        assert says in str(raised.value) and "\n" not in str(raised.value)
        assert _stored(session) == 0


def test_require_qualified_exits_4_naming_the_rubric_and_0_once_qualified(
    engine: Engine, db_url: str, tmp_path: Path
) -> None:
    judge, raters = good_judge(120, seed=7)
    with Session(engine) as session:
        p = plant(session, judge, raters)
    run = str(p.judge_run_id)
    out = tmp_path / "report"
    refused = fairjudge("--db", db_url, "report", run, "--out", out, "--require-qualified")
    assert refused.returncode == 4, refused.stderr
    assert refused.stderr.strip().splitlines() == [
        f"error: judge run {run} is not qualified for ICS: not validated: no qualification "
        "for ICS (--require-qualified)"
    ]
    assert not out.exists()  # refused before anything was written
    # Without the option the report is written, and opens with the standing.
    assert fairjudge("--db", db_url, "report", run, "--out", out).returncode == 0
    assert fairjudge("--db", db_url, "checks", "qualify", run, "--rubric", "ICS").returncode == 0
    done = fairjudge("--db", db_url, "report", run, "--out", out, "--require-qualified")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ICS: validated (")
    shown = fairjudge("--db", db_url, "checks", "standing", run)
    assert shown.stdout.startswith("ICS: validated (checks qualify on judge run")


def _one_line(done: object, run: int, why: str) -> None:
    """Exit code 4 and one line on stderr naming the run, the rubric and why."""
    assert done.returncode == 4, (done.stdout, done.stderr)  # type: ignore[attr-defined]
    lines = done.stderr.strip().splitlines()  # type: ignore[attr-defined]
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"error: judge run {run} is not qualified for ICS: {why}"), lines
    assert lines[0].endswith("(--require-qualified)")


def test_estimates_checks_and_transport_refuse_an_unqualified_judge_with_one_line(
    engine: Engine, db_url: str
) -> None:
    # Planted: judge run P, then a run of the same judge on model-B's answers nobody rated
    # (not validated there), and one on model-B2's answers rated like P's (validated through
    # the transport check, as in the test above).
    judge, raters = good_judge(120, seed=4)
    with Session(engine) as session:
        p = plant(session, judge, raters)
        b = add_judge_run(session, add_answers(session, p, "model-B"), p.item_ids, judge)
        judge_b2, raters_b2 = good_judge(120, seed=12)
        b2 = add_judge_run(
            session, add_answers(session, p, "model-B2"), p.item_ids, judge_b2, raters_b2
        )
    run, db = str(p.judge_run_id), ("--db", db_url)
    never = "not validated: no qualification for ICS"
    _one_line(fairjudge(*db, "estimates", run, "--require-qualified"), p.judge_run_id, never)
    shown = fairjudge(*db, "checks", "show", "--judge-run", run, "--require-qualified")
    _one_line(shown, p.judge_run_id, never)
    qualified = fairjudge(*db, "checks", "qualify", run, "--rubric", "ICS")
    assert qualified.returncode == 0
    assert "agreement is unweighted: every rated item counts once" in qualified.stdout
    assert fairjudge(*db, "estimates", run, "--require-qualified").returncode == 0
    assert (
        fairjudge(*db, "checks", "show", "--judge-run", run, "--require-qualified").returncode == 0
    )
    # --transport: every compared run's judge is checked, the other run's too (the API does).
    moved = fairjudge(*db, "estimates", run, "--transport", str(b.judge_run_id),
                      "--require-qualified")  # fmt: skip
    _one_line(moved, b.judge_run_id, "not validated: validated on model-under-test's answers")
    fine = fairjudge(*db, "estimates", run, "--transport", str(b2.judge_run_id),
                     "--require-qualified", "--assume-random", "--json")  # fmt: skip
    assert fine.returncode == 0, fine.stderr
    assert json.loads(fine.stdout)["standing"][str(b2.judge_run_id)]["ICS"]["state"] == (
        "validated"
    )


def test_the_config_default_require_qualified_refuses_unless_the_option_allows(
    engine: Engine, db_url: str, tmp_path: Path
) -> None:
    # [qualify] require_qualified = true: report, estimates and checks show refuse the
    # unqualified judge without the option (exit 4, one line); --allow-unqualified lets
    # them run. Without the config line the same commands run (the default is off).
    from tests.support.factories import write_config

    judge, raters = good_judge(60, seed=13)
    with Session(engine) as session:
        p = plant(session, judge, raters)
    plain = write_config(tmp_path / "plain.toml", "http://127.0.0.1:9/v1", db_url)
    strict = tmp_path / "strict.toml"
    strict.write_text(plain.read_text() + "[qualify]\nrequire_qualified = true\n")
    run = str(p.judge_run_id)
    never = "not validated: no qualification for ICS"
    commands = {
        "report": ("report", run, "--out", str(tmp_path / "report")),
        "estimates": ("estimates", run),
        "checks show": ("checks", "show", "--judge-run", run),
    }
    for name, args in commands.items():
        _one_line(fairjudge("--config", strict, *args), p.judge_run_id, never)
        allowed = fairjudge("--config", strict, *args, "--allow-unqualified")
        assert allowed.returncode == 0, (name, allowed.stderr)
        assert fairjudge("--config", plain, *args).returncode == 0, name


def test_report_routes_answer_409_when_asked_and_the_run_route_carries_the_standing(
    migrated_db_url: str, tmp_path: Path
) -> None:
    from judge.store.engine import make_engine
    from tests.server.api.test_api import make_api

    engine = make_engine(migrated_db_url)
    judge, raters = good_judge(60, seed=8)
    with Session(engine) as session:
        p = plant(session, judge, raters)
    engine.dispose()
    api = make_api(migrated_db_url, SimpleNamespace(base_url="http://127.0.0.1:9/v1"), tmp_path)
    try:
        run = p.judge_run_id
        info = api.get(f"/api/v1/judge-runs/{run}")
        assert info.status_code == 200
        assert info.json["standing"]["ICS"]["state"] == "not validated"
        routes = ("report.json", "report.html", "report.csv", "diagnostics.json", "estimates?",
                  f"transport?others={run}&")  # fmt: skip
        for route in routes:
            ask = route if route.endswith(("?", "&")) else f"{route}?"
            refused = api.get(f"/api/v1/judge-runs/{run}/{ask}require_qualified=true")
            assert refused.status_code == 409, (route, refused.data[:200])
            assert refused.json["error"]["message"] == (
                f"judge run {run} is not qualified for ICS: not validated: no qualification "
                "for ICS (--require-qualified)"
            )
        plain = api.get(f"/api/v1/judge-runs/{run}/report.json")
        assert plain.status_code == 200
        assert plain.json["standing"]["rubrics"]["ICS"]["state"] == "not validated"
    finally:
        api.close()


def test_position_consistency_is_recorded_where_the_pair_was_judged_in_both_orders(
    engine: Engine,
) -> None:
    # TCS compares two texts. One run scores them the same in both orders (consistency 1:
    # every pair's verdict is "consistent"); another gives 5 as given and 1 swapped on the
    # first 30 of 60 items and the same score on the rest (consistency 30 / 60 = 0.5).
    judge, raters = good_judge(60, seed=10)
    with Session(engine) as session:
        p = plant(session, judge, raters, rubric="TCS")
        steady = add_judge_run(
            session, p.generation_run_id, p.item_ids, judge, rubric="TCS", model="both",
            swapped=judge,
        )  # fmt: skip
        given = [5] * 30 + judge[30:]
        swapped = [1] * 30 + judge[30:]
        shaky = add_judge_run(
            session, p.generation_run_id, p.item_ids, given, rubric="TCS", model="shaky",
            swapped=swapped,
        )  # fmt: skip
        lenient = QualifyConfig(n_bootstrap=200, require_alt_test=False)
        one = qualify(session, _request(p.judge_run_id, "TCS"), lenient).record.evidence
        both = qualify(session, _request(steady.judge_run_id, "TCS"), lenient).record.evidence
        flip = qualify(session, _request(shaky.judge_run_id, "TCS"), lenient).record.evidence
    assert one["position"] is None  # judged in one order only: nothing to say
    assert both["position"]["position_consistency"] == 1.0
    assert both["position"]["pairs"] == 60 and not both["position"]["flagged"]
    assert flip["position"]["position_consistency"] == 0.5
    # TCS is a similarity score: no side is preferred, so no primacy/recency count is given
    # (docs/judging.md); the flip is flagged as inconsistent (consistency 0.5, its interval
    # under the 0.8 bound).
    assert flip["position"]["recency_preferring"] is None and flip["position"]["flagged"]
