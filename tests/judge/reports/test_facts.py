"""A judge run's facts are read once (a known number of SQL statements) and the sections built
from them say exactly what the sections that read the store themselves say."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlmodel import Session

from annotation.sections import reliability_section
from judge.reports.browser import item_browser_section
from judge.reports.consistency import self_consistency_section
from judge.reports.facts import load_run_facts
from judge.reports.run_report import metrics_section
from judge.reports.sections import Section
from judge.trust.section import diagnostics_section
from server import usecases
from tests.judge.reports.conftest import JudgedRun


@contextmanager
def counted(engine: Engine) -> Iterator[list[str]]:
    """Every SQL statement the engine sends while the block runs."""
    statements: list[str] = []

    def listen(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        statements.append(statement)

    event.listen(engine, "before_cursor_execute", listen)
    try:
        yield statements
    finally:
        event.remove(engine, "before_cursor_execute", listen)


def _same(a: Section | None, b: Section | None) -> None:
    assert a is not None and b is not None
    assert (a.title, a.json_key, a.payload, a.notes, a.csv) == (
        b.title, b.json_key, b.payload, b.notes, b.csv
    )  # fmt: skip
    assert a.tables == b.tables and a.figures == b.figures


def test_one_report_reads_the_run_once(judged_sample: JudgedRun) -> None:
    engine, run_id = judged_sample.engine, judged_sample.judge_run_id
    with Session(engine) as session, counted(engine) as statements:
        facts = load_run_facts(session, run_id)
        # The loader's design: the judge run, its generation run, its dataset, the judgments
        # (with items and finish reasons) and the answers (with items): five statements.
        assert len(statements) == 5
        statements.clear()
        sections = [
            metrics_section(session, run_id, facts=facts),
            self_consistency_section(session, run_id, facts=facts),  # None: one sample
            item_browser_section(session, run_id, facts=facts),
        ]
        # Built from the facts alone: no statement at all.
        assert statements == [] and sections[1] is None
        reliability = reliability_section(session, run_id, facts=facts)
        # Whether the generation run has human ratings: one statement (it has none).
        assert reliability is None and len(statements) == 1
        statements.clear()
        diagnostics_section(session, run_id, facts=facts)
        # The diagnostics' own reads (the run's other rows come from the facts): its
        # counterfactual copies (1), the human ratings the length check compares with
        # (judge.store.rating_scope: the run's rating scopes, their campaigns, the ratings:
        # 3) and the cost per run, rubric and item (judge.costs: 3). No copy was made and
        # the run was judged in one order, so nothing else is read: 7 at most.
        assert len(statements) <= 7
        # A whole report: 5 + 0 + 1 + 7 = 13 at most (the sample's run before the facts:
        # 26 statements through usecases.full_report; see the H4 note on issue 29).


def test_sections_from_facts_equal_sections_read_from_the_store(small_run: JudgedRun) -> None:
    run_id = small_run.judge_run_id
    with Session(small_run.engine) as session:
        facts = load_run_facts(session, run_id)
        _same(metrics_section(session, run_id, facts=facts), metrics_section(session, run_id))
        _same(
            item_browser_section(session, run_id, facts=facts),
            item_browser_section(session, run_id),
        )
        _same(
            diagnostics_section(session, run_id, facts=facts),
            diagnostics_section(session, run_id),
        )
        report = usecases.full_report(session, run_id)
    # The facts hold what the report shows: the small run's six items (4 stages + the
    # hostile and prose S1 copies, tests/judge/reports/conftest.py) each judged once per
    # rubric of their stage: S1 ICS x3, S2 TCS/PCS/ETCS, S3 SBAS, S4 ICS = 8 item scores;
    # one of them (prose) unreadable, so unscored.
    assert len(facts.item_scores) == 8
    assert sum(s.score is None for s in facts.item_scores) == 1
    assert report.to_json()["n_item_scores"] == 8
    # The stub model and judge are the same model (tests/support/factories.make_settings).
    assert facts.self_preference is not None and facts.self_preference in report.intro
