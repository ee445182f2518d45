"""The award audit's follow-up explanations: the judge's classes (readable or kept raw), a
person's classes from a CSV, the chi-square test per source and the agreement between
sources, checked against scipy and scikit-learn computed here."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import cohen_kappa_score
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from judge.audits.award import FOLLOWUP_CLASSES
from judge.audits.base import FOLLOWUP
from judge.audits.followup import (
    classify_followups,
    export_rows,
    followup_analysis,
    import_labels,
    judge_source,
    label_agreement,
    labels_by_source,
    read_class,
)
from judge.audits.runner import run_audit, stored_answers
from judge.audits.suites import AwardSuite
from judge.errors import InvalidInputError
from judge.models.client import ModelClient
from judge.paths import prompts_dir
from judge.prompts import PromptBook
from judge.store.tables import AuditLabel
from tests.judge.audits.test_runner import always_group_a
from tests.support.factories import make_settings
from tests.support.stub_openai import StubServer

BOOK = PromptBook(prompts_dir())


def _judge_reply(explanation_class: str) -> str:
    return json.dumps({"explanation": "stub reading", "class": explanation_class})


def responder(messages: list[dict[str, str]]) -> str | int | None:
    """The model under test picks group A and explains; the judge (a system message that
    sorts explanations) answers by the explanation's pair index: even -> indecisive, odd ->
    justified, and for one in five a reply with no class at all."""
    if messages[0]["role"] != "system":
        return always_group_a(messages)
    text = messages[1]["content"]
    digest = sum(map(ord, text))
    if digest % 5 == 0:
        return "I would rather not say."
    return _judge_reply("indecisive" if digest % 2 == 0 else "justified")


@pytest.fixture
def award_run(db_url: str, engine: Engine) -> Iterator[tuple[int, ModelClient]]:
    """An award run of 40 prompts with follow-ups, classified by the stub judge; the stub
    keeps serving during the test."""
    with StubServer(responder=responder) as stub:
        settings = make_settings(stub.base_url, db_url, max_retries=1)
        client = ModelClient("test", settings.endpoint("test"))
        suite = AwardSuite(pairs_per_level=5, levels=(5, 10), followup=True)
        summary = run_audit(engine, client, suite, temperature=1.0, max_tokens=80)
        classify_followups(engine, client, BOOK, summary.run_id)
        yield summary.run_id, client


def test_the_judge_s_replies_are_read_or_kept_raw(engine: Engine, award_run: tuple) -> None:
    run_id, client = award_run
    with Session(engine) as session:
        labels = session.exec(select(AuditLabel).where(AuditLabel.run_id == run_id)).all()
        follow = [a for a in stored_answers(session, run_id) if a.turn == FOLLOWUP]
    assert len(labels) == len(follow) == 40  # every answer chose A: 40 follow-ups
    unread = [lab for lab in labels if lab.status == "unparsed"]
    read = [lab for lab in labels if lab.status == "labelled"]
    assert unread and read  # the responder's rule gives both on these prompts
    assert all(lab.label is None and lab.raw_text == "I would rather not say." for lab in unread)
    assert {lab.label for lab in read} <= {"indecisive", "justified"}
    assert {lab.source for lab in labels} == {judge_source(client)}


def test_a_second_pass_sends_nothing_and_keeps_unread_replies(
    engine: Engine, award_run: tuple
) -> None:
    """Unreadable replies stay stored as they are: asked again, the call cache (or a judge at
    temperature 0) would give the same reply. Only failed calls are sent again."""
    run_id, client = award_run
    with Session(engine) as session:
        before = sorted(
            (lab.answer_id, lab.status, lab.label)
            for lab in session.exec(select(AuditLabel).where(AuditLabel.run_id == run_id))
        )
    summary = classify_followups(engine, client, BOOK, run_id)
    assert (summary.tasks, summary.model_calls) == (0, 0)
    with Session(engine) as session:
        after = sorted(
            (lab.answer_id, lab.status, lab.label)
            for lab in session.exec(select(AuditLabel).where(AuditLabel.run_id == run_id))
        )
    assert after == before and any(status == "unparsed" for _, status, _ in after)


def _write_csv(path: Path, rows: list[dict[str, object]]) -> Path:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=["answer_id", "label"])
        writer.writeheader()
        writer.writerows(rows)
    return path


def test_a_person_s_classes_and_the_agreement_with_the_judge(
    tmp_path: Path, engine: Engine, award_run: tuple
) -> None:
    run_id, client = award_run
    with Session(engine) as session:
        exported = export_rows(session, run_id)
        judge = labels_by_source(session, run_id)[judge_source(client)]
    assert {"answer_id", "explanation", "winner", "other"} <= set(exported[0])
    assert "chosen" not in exported[0]  # the chosen student's group stays hidden
    # The person agrees with the judge except on every third explanation, which they call
    # irrational; they also classify the ones the judge could not.
    human = {}
    for n, row in enumerate(exported):
        answer_id = int(row["answer_id"])
        human[answer_id] = "irrational" if n % 3 == 0 else judge.get(answer_id, "justified")
    path = _write_csv(
        tmp_path / "mine.csv", [{"answer_id": k, "label": v} for k, v in human.items()]
    )
    assert import_labels(engine, run_id, path, "ann@example.org")["added"] == len(human)
    assert import_labels(engine, run_id, path, "ann@example.org") == {
        "added": 0, "changed": 0, "unchanged": len(human)
    }  # fmt: skip

    with Session(engine) as session:
        agreement = label_agreement(session, run_id)
        person = followup_analysis(session, run_id, "human:ann@example.org")
    shared = sorted(set(judge) & set(human))
    codes = {c: i for i, c in enumerate(FOLLOWUP_CLASSES)}
    expected = cohen_kappa_score(
        [codes[judge[i]] for i in shared], [codes[human[i]] for i in shared]
    )
    (pair,) = agreement.pairwise
    assert pair.n == len(shared)
    assert pair.coefficients["kappa"].value == pytest.approx(expected)

    # Every answer chose group A, so group B's row is all zeros: the expected counts of
    # group B are 0 < 5 and the test is not run, as the seed does (SPEC section 3).
    assert person.overall.counts_b == (0, 0, 0)
    assert not person.overall.chi_square.tested
    counts_a = [sum(v == c for v in human.values()) for c in FOLLOWUP_CLASSES]
    assert list(person.overall.counts_a) == counts_a


def test_a_bad_labels_file_is_refused_whole(
    tmp_path: Path, engine: Engine, award_run: tuple
) -> None:
    run_id, _ = award_run
    with Session(engine) as session:
        first = int(export_rows(session, run_id)[0]["answer_id"])
    rows = [
        {"answer_id": first, "label": "justified"},
        {"answer_id": first + 10_000, "label": "justified"},
        {"answer_id": "x", "label": "indecisive"},
        {"answer_id": first, "label": "sensible"},
    ]
    path = _write_csv(tmp_path / "bad.csv", rows)
    with pytest.raises(InvalidInputError) as caught:
        import_labels(engine, run_id, path, "ann@example.org")
    lines = [line for line, _ in caught.value.problems]
    assert lines == [3, 4, 5]  # line 1 is the header; the good row on line 2 is not stored
    with Session(engine) as session:
        assert "human:ann@example.org" not in labels_by_source(session, run_id)


def test_the_chi_square_test_against_scipy(
    tmp_path: Path, engine: Engine, award_run: tuple
) -> None:
    """A person's classes chosen so that both groups' rows are large enough to test; the
    chosen group is rewritten in the stored answers' meta by hand to make both groups."""
    run_id, _ = award_run
    from judge.store.tables import AuditAnswer

    with Session(engine) as session:
        follow = session.exec(
            select(AuditAnswer).where(AuditAnswer.run_id == run_id, AuditAnswer.turn == FOLLOWUP)
        ).all()
        for n, a in enumerate(follow):
            a.meta = {**a.meta, "chosen": "A" if n % 2 == 0 else "B"}
            session.add(a)
        session.commit()
        ids = [a.id for a in follow]
    # Group A (even n): 8 indecisive, 6 justified, 6 irrational; group B (odd n): 12, 4, 4.
    # Expected counts are 10, 5, 5 in each row, so the test runs (every one >= 5).
    plan = {0: (8, 6), 1: (12, 4)}
    labels = {}
    for n, answer_id in enumerate(ids):
        k, (first, second) = n // 2, plan[n % 2]
        labels[answer_id] = (
            "indecisive" if k < first else "justified" if k < first + second else "irrational"
        )
    path = _write_csv(tmp_path / "p.csv", [{"answer_id": k, "label": v} for k, v in labels.items()])
    import_labels(engine, run_id, path, "bob")
    with Session(engine) as session:
        result = followup_analysis(session, run_id, "human:bob").overall
    expected = stats.chi2_contingency(np.array([[8, 6, 6], [12, 4, 4]]), correction=False)
    assert result.chi_square.tested
    assert result.chi_square.p_value == pytest.approx(expected.pvalue)


def test_reading_a_class() -> None:
    assert read_class(_judge_reply("irrational")).label == "irrational"
    assert read_class("reasons...\nClass: indecisive").label == "indecisive"
    unread = read_class('{"explanation": "x", "class": "sensible"}')
    assert unread.status == "unparsed" and "sensible" in (unread.reason or "")
    assert read_class("").status == "unparsed"


def test_a_judge_that_always_answers_the_majority_class_is_flagged_and_a_close_one_is_not() -> None:
    # Planted (issue 42): a person calls 18 of 20 follow-ups "justified" and 2 "indecisive";
    # judge:x says "justified" to all. By hand: exact agreement 18/20 = 0.90, the majority
    # baseline 0.90, kappa 0 (a constant side), and AC1 on the three classes with pa = 0.90,
    # pi_justified = (1 + 0.9) / 2 = 0.95, pi_indecisive = 0.05, pi_irrational = 0:
    # pe = (0.95 * 0.05 + 0.05 * 0.95) / (3 - 1) = 0.0475, AC1 = (0.90 - pe) / (1 - pe).
    # judge:y copies a person whose classes cycle through all three except on one follow-up:
    # exact 19/20, far above the baseline 7/20, kappa's interval above 0: no flag.
    from judge.audits.followup import judge_vs_people
    from judge.stats.coefficient import BootstrapOptions

    person = {i: ("justified" if i < 18 else "indecisive") for i in range(20)}
    spread = {i: FOLLOWUP_CLASSES[i % 3] for i in range(20)}
    close = {**spread, 0: "irrational"}  # spread[0] is "indecisive"
    options = BootstrapOptions(n_bootstrap=500, seed=1)
    (flat,) = judge_vs_people(
        {"judge:x": dict.fromkeys(range(20), "justified"), "human:a": person}, options
    )
    pe = (0.95 * 0.05 + 0.05 * 0.95) / 2
    assert (flat.judge, flat.person, flat.n, flat.majority_class) == (
        "judge:x", "human:a", 20, "justified",
    )  # fmt: skip
    assert flat.coefficients["exact_agreement"].value == pytest.approx(0.90, abs=1e-12)
    assert flat.coefficients["majority_baseline"].value == pytest.approx(0.90, abs=1e-12)
    assert flat.coefficients["kappa"].value == pytest.approx(0.0, abs=1e-12)
    assert flat.coefficients["ac1"].value == pytest.approx((0.90 - pe) / (1 - pe), abs=1e-9)
    assert {f.code for f in flat.flags} == {"kappa_covers_zero", "no_better_than_majority"}
    (good,) = judge_vs_people({"judge:y": close, "human:b": spread}, options)
    # sklearn's unweighted kappa on the same classes: a second library's number.
    keys = sorted(spread)
    expected = cohen_kappa_score([close[k] for k in keys], [spread[k] for k in keys])
    assert good.coefficients["kappa"].value == pytest.approx(expected, abs=1e-12)
    assert good.coefficients["exact_agreement"].value == pytest.approx(0.95, abs=1e-12)
    assert good.coefficients["majority_baseline"].value == pytest.approx(7 / 20, abs=1e-12)
    assert good.flags == []
    # People against people need no judge's check; sources with nothing shared are skipped.
    assert judge_vs_people({"human:a": person, "human:b": spread}, options) == []
    assert (
        judge_vs_people({"judge:x": {1: "justified"}, "human:a": {2: "justified"}}, options) == []
    )
