"""Read-only views the dashboard needs beyond the other use cases: a judge run's opening
sections composed from facts loaded once, and a fingerprint of the store that says when a
figure computed earlier no longer holds.

Nothing here computes a figure of its own. ``judge_run_view`` calls the section builders
``full_report`` calls (the answer, the stage metrics, the item browser) with the same facts,
so the dashboard's numbers are the report's and the API's; it only leaves out what other
pages show (agreement with people, the judge's own checks), which would cost seconds the run
page does not need.

``store_version`` is what the dashboard keys its figures on: a figure is reused while the
store's version is the one it was computed at (see server/dashboard/cache.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

# The report's figure types are plain dataclasses (no heavy import): the dashboard draws them.
from judge.reports.sections import (
    AgreementPlot,
    BarChart,
    BoxPlot,
    BrowsedItem,
    BrowsedJudgment,
    ItemBrowser,
)

__all__ = [
    "AgreementPlot",
    "BarChart",
    "BoxPlot",
    "BrowsedItem",
    "BrowsedJudgment",
    "ItemBrowser",
    "JudgeRunView",
    "judge_run_view",
    "store_version",
]

if TYPE_CHECKING:
    from sqlmodel import Session

    from judge.config import Settings
    from judge.reports.sections import Section
    from judge.store.queries import JudgeRunInfo

BOOKKEEPING = frozenset(
    {"apikey", "websession", "workerbeat", "runlease", "job", "jobpart", "batchjob", "callcache"}
)
"""Tables no figure reads: keys, sign-ins, workers' heartbeats, leases, the job queue and the
call cache. Writes to them (a heartbeat every two seconds) do not make a figure stale."""
MUTABLE = {
    "item": "review_status",
    "auditlabel": "label",
    "judgerun": "status",
    "generationrun": "status",
    "auditrun": "status",
}
"""Columns updated in place without a timestamp of their own: counted by value, so that a
review pulled or a class relabelled changes the version as a new row would."""


@dataclass(frozen=True)
class JudgeRunView:
    """What a judge run's dashboard page shows: the run, "The answer" section, the stage
    metrics section (numbers, tables, score distributions) and every judged item."""

    info: JudgeRunInfo
    answer: Section
    metrics: Section
    browser: ItemBrowser


def judge_run_view(
    session: Session,
    judge_run_id: int,
    *,
    settings: Settings | None = None,
    campaigns: Sequence[str] = (),
) -> JudgeRunView:
    """The run's opening sections, as ``full_report`` builds them from the same facts (read
    once): NotFoundError for an unknown run."""
    from judge.reports.browser import item_browser
    from judge.reports.facts import load_run_facts
    from judge.reports.run_report import metrics_section
    from judge.store.queries import get_judge_run
    from server.usecases.context import run_prices
    from server.usecases.reports import opening_of
    from server.usecases.runs import judge_run_info

    jrun = get_judge_run(session, judge_run_id)
    facts = load_run_facts(session, judge_run_id, prices=run_prices(settings, jrun.endpoint_name))
    _, opening = opening_of(session, facts, campaigns)
    return JudgeRunView(
        judge_run_info(session, judge_run_id),
        opening,
        metrics_section(session, judge_run_id, facts=facts),
        item_browser(session, judge_run_id, facts=facts),
    )


def store_version(session: Session) -> tuple[Any, ...]:
    """A fingerprint of everything a figure may read, in a handful of statements: per table
    (bookkeeping ones left out) its rows, highest id and latest time in each time column,
    and the values of ``MUTABLE`` columns. Equal versions: no row a figure reads was added,
    removed or stamped since."""
    from sqlalchemy import DateTime, func, select
    from sqlmodel import SQLModel

    import judge.store.tables  # noqa: F401  (registers every table on the metadata)

    columns: list[Any] = []
    grouped = []
    for table in SQLModel.metadata.sorted_tables:
        if table.name in BOOKKEEPING:
            continue
        aggregates: list[Any] = [func.count()]
        if "id" in table.c:
            aggregates.append(func.max(table.c.id))
        aggregates += [func.max(c) for c in table.c if isinstance(c.type, DateTime)]
        columns += [select(a).select_from(table).scalar_subquery() for a in aggregates]
        if table.name in MUTABLE:
            grouped.append(table.c[MUTABLE[table.name]])
    version: list[Any] = list(session.execute(select(*columns)).one())
    for column in grouped:
        rows = session.execute(select(column, func.count()).group_by(column).order_by(column))
        version.append(tuple((str(value), int(n)) for value, n in rows))
    return tuple(str(v) for v in version)
