"""Read-only views the dashboard needs beyond the other use cases: a judge run's opening
sections composed from facts loaded once, and a fingerprint of the store that says when a
figure computed earlier no longer holds.

Nothing here computes a figure of its own. ``judge_run_view`` calls the section builders
``full_report`` calls (the answer, the stage metrics, the item browser) with the same facts,
so the dashboard's numbers are the report's and the API's; it only leaves out what other
pages show (agreement with people, the judge's own checks), which would cost seconds the run
page does not need.

``run_version`` is what a judge run's pages are kept by: a fingerprint of the rows those
pages read (the run and the other judge runs of its answers, their judgments, the answers and
their counterfactual copies, the items, the ratings and their history, the campaigns over
them) and of the small tables every page may read. A rating for run 1 changes run 1's
version and leaves run 2's as it was. ``store_version`` (the whole store) keys the pages
that are not a judge run's (see server/kept/cache.py).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import astuple, dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from judge.errors import InvalidInputError, NotFoundError

# The report's figure types are plain dataclasses (no heavy import): the dashboard draws them.
from judge.reports.sections import (
    AgreementPlot,
    BarChart,
    BoxPlot,
    BrowsedItem,
    BrowsedJudgment,
    ItemBrowser,
)
from server.usecases.agreement import AgreementRequest
from server.usecases.context import run_prices
from server.usecases.rendering import html
from server.usecases.reports import diagnostics_report, opening_of
from server.usecases.requests import DiagnosticsRequest, problems_of
from server.usecases.runs import judge_run_info

__all__ = [
    "AgreementPageFigures",
    "AgreementPageOptions",
    "AgreementPlot",
    "BarChart",
    "BoxPlot",
    "BrowsedItem",
    "BrowsedJudgment",
    "ChecksPageOptions",
    "ItemBrowser",
    "JudgeRunView",
    "PageKey",
    "agreement_figures",
    "agreement_options",
    "checks_figures",
    "checks_options",
    "judge_run_view",
    "page_key",
    "run_version",
    "store_version",
]

if TYPE_CHECKING:
    from sqlmodel import Session

    from judge.config import Settings
    from judge.reports.sections import Section
    from judge.store.queries import JudgeRunInfo
    from server.usecases.reports import Report

BOOKKEEPING = frozenset(
    {
        "apikey",
        "websession",
        "workerbeat",
        "runlease",
        "job",
        "jobpart",
        "batchjob",
        "callcache",
        "dashboardfigure",
    }
)
"""Tables no figure reads: keys, sign-ins, workers' heartbeats, leases, the job queue, the
call cache and the kept figures themselves. Writes to them (a heartbeat every two seconds)
do not make a figure stale."""
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
class PageKey:
    """Which page's figures: the page's name, its judge run and the options it was asked
    with (a frozen dataclass or tuple of plain values). The dashboard keeps figures by it in
    memory and in the store (server.usecases.figures), and a job that computes a run's pages
    ahead uses the same keys (``default_pages``)."""

    page: str
    judge_run_id: int
    options: Any

    def text(self) -> str:
        """The key as stored: readable, and the same in every process."""
        return f"{self.page}/{self.judge_run_id}/{self.options!r}"


def page_key(page: str, judge_run_id: int, options: Any) -> PageKey:
    return PageKey(page, judge_run_id, options)


@dataclass(frozen=True)
class JudgeRunView:
    """What a judge run's dashboard page shows: the run, "The answer" section, the stage
    metrics section (numbers, tables, score distributions) and every judged item."""

    info: JudgeRunInfo
    answer: Section
    metrics: Section
    browser: ItemBrowser
    # The judge's standing per rubric (server.usecases.qualify) and its one-line summary,
    # shown above every figure of the page.
    standing: dict[str, Any] = field(default_factory=dict)
    standing_line: str = ""


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
    from server.usecases.standing import run_standing, standing_note

    jrun = get_judge_run(session, judge_run_id)
    facts = load_run_facts(session, judge_run_id, prices=run_prices(settings, jrun.endpoint_name))
    _, opening = opening_of(session, facts, campaigns)
    standing = run_standing(session, judge_run_id)
    return JudgeRunView(
        judge_run_info(session, judge_run_id),
        opening,
        metrics_section(session, judge_run_id, facts=facts),
        item_browser(session, judge_run_id, facts=facts),
        standing,
        standing_note(standing),
    )


PRESETS = ("expert", "skilled", "crowd")


@dataclass(frozen=True)
class AgreementPageOptions:
    """The page's query: whose ratings, the intervals' resamples, how raters combine, the
    design to assume for ratings without one, and the alt-test's margin."""

    campaigns: tuple[str, ...] = ()
    n_bootstrap: int = 1000
    seed: int = 0
    human_score: str = "mean"
    assume_random: bool = False
    epsilon: str = "expert"

    def key(self) -> tuple[Any, ...]:
        return astuple(self)

    def agreement_query(self) -> dict[str, Any]:
        return {
            "campaign": list(self.campaigns),
            "n_bootstrap": self.n_bootstrap,
            "seed": self.seed,
            "human_score": self.human_score,
        }

    def estimates_query(self) -> dict[str, Any]:
        return {
            "campaign": list(self.campaigns),
            "human_score": self.human_score,
            "assume_random": "true" if self.assume_random else None,
        }

    def alttest_query(self) -> dict[str, Any]:
        return {"campaign": list(self.campaigns), "epsilon": self.epsilon}


def agreement_options(args: Mapping[str, Any]) -> AgreementPageOptions:
    """The options from the query string; InvalidInputError names each bad one."""
    problems, out = [], {}
    for name in ("n_bootstrap", "seed"):
        text = str(args.get(name, "")).strip()
        if text:
            try:
                out[name] = int(text)
            except ValueError:
                problems.append(f"{name}: {text!r} is not an integer")
    human = args.get("human_score") or "mean"
    epsilon = args.get("epsilon") or "expert"
    if epsilon not in PRESETS:
        problems.append(f"epsilon: use one of {', '.join(PRESETS)}")
    if problems:
        raise InvalidInputError("; ".join(problems))
    getlist = getattr(args, "getlist", None)
    campaigns = tuple(getlist("campaign")) if getlist else ()
    chosen = AgreementPageOptions(
        campaigns,
        human_score=human,
        epsilon=epsilon,
        assume_random=args.get("assume_random") in ("1", "true", "on"),
        **out,
    )
    _requests(1, chosen)  # refused here, before any work, with the request's own messages
    return chosen


def _requests(run_id: int, o: AgreementPageOptions) -> tuple[Any, Any, Any]:
    from server.usecases.alttest import AltTestRequest
    from server.usecases.estimates import EstimatesRequest

    scope = {"judge_run": run_id, "campaigns": list(o.campaigns)}
    try:
        return (
            AgreementRequest.model_validate(
                {
                    **scope,
                    "n_bootstrap": o.n_bootstrap,
                    "seed": o.seed,
                    "human_score": o.human_score,
                }
            ),
            EstimatesRequest.model_validate(
                {**scope, "human_score": o.human_score, "assume_random": o.assume_random}
            ),
            AltTestRequest.model_validate({**scope, "epsilon": o.epsilon}),
        )
    except ValidationError as exc:
        raise InvalidInputError("; ".join(problems_of(exc))) from None


@dataclass(frozen=True)
class AgreementPageFigures:
    """What the use cases answered (None where there is nothing, with the reason)."""

    agreement: dict[str, Any] | None
    plots: list[tuple[str, int, AgreementPlot]]
    estimates: dict[str, Any]
    alttest: dict[str, Any] | None
    alttest_refused: str | None
    no_ratings: str | None
    standing: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Rubric -> the judge run's standing (state, says), computed with the figures."""
    standing_line: str = ""


def agreement_figures(
    session: Session, run_id: int, o: AgreementPageOptions
) -> AgreementPageFigures:
    """Agreement, estimates and alt-test of the run (NotFoundError for an unknown run; a run
    nobody rated gets the reason instead of numbers)."""
    from server.usecases.alttest import alt_test_run
    from server.usecases.estimates import estimates, rated_read
    from server.usecases.standing import (
        agreement_with_standing,
        run_standing,
        standing_json,
        standing_note,
    )

    judge_run_info(session, run_id)  # an unknown run is a 404, not "no ratings"
    standing = run_standing(session, run_id)
    said = (standing_json(standing), standing_note(standing))
    agree_rq, estimates_rq, alt_rq = _requests(run_id, o)
    read = rated_read(session, run_id, o.campaigns)  # for the estimates and the alt-test
    # Ratings that fail the assume_random check: the page's other figures all the same,
    # the refusal (its numbers and the override) said beside the estimates, not a 400 page.
    found = estimates(session, estimates_rq, read, refuse_unrepresentative=False).to_dict()
    try:
        result = agreement_with_standing(session, agree_rq)
    except NotFoundError as exc:
        return AgreementPageFigures(None, [], found, None, None, str(exc), *said)
    try:
        alt: dict[str, Any] | None = alt_test_run(session, alt_rq, read).to_dict()
        refused = None
    except (InvalidInputError, NotFoundError) as exc:
        alt, refused = None, str(exc)
    return AgreementPageFigures(
        result.to_dict(), list(result.plots()), found, alt, refused, None, *said
    )


@dataclass(frozen=True)
class ChecksPageOptions:
    """``DiagnosticsRequest``'s values (``options`` reads them with its bounds and defaults)."""

    tolerance: float
    margin: float


def checks_options(args: Mapping[str, Any]) -> ChecksPageOptions:
    """The checks' options (``DiagnosticsRequest``: its bounds and defaults, which the API's
    query shares) from the query string."""

    given = {k: args[k] for k in ("tolerance", "margin") if args.get(k, "") != ""}
    try:
        query = DiagnosticsRequest.model_validate(given)
    except ValidationError as exc:
        raise InvalidInputError("; ".join(problems_of(exc))) from None
    return ChecksPageOptions(query.tolerance, query.margin)


def checks_figures(
    session: Session, run_id: int, o: ChecksPageOptions, settings: Settings
) -> Report:
    """The judge's own checks on the run: the diagnostics report the API returns."""

    return diagnostics_report(
        session, run_id, tolerance=o.tolerance, margin=o.margin, settings=settings
    )


def agreement_json_options(request: Any) -> tuple[tuple[str, Any], ...]:
    """An ``AgreementRequest`` as a page's options (the run left out): hashable, readable."""
    dumped = request.model_dump(mode="json", exclude={"judge_run"})
    return tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in sorted(dumped.items()))


def default_pages(settings: Settings | None) -> list[tuple[str, Any]]:
    """The pages (name, options) a run's link opens with no query: its report, agreement
    with everyone's ratings, and the judge's own checks at the API's defaults; then what the
    API serves with no query (report.json's text and report.html, both drawn from the report,
    the agreement JSON; its diagnostics are the checks page's)."""

    del settings  # the defaults do not depend on the settings today
    return [
        ("judge-run", ()),
        ("agreement", AgreementPageOptions()),
        ("checks", checks_options({})),
        ("report", ()),
        ("report.html", ()),
        ("report.json", ()),
        ("agreement-json", agreement_json_options(AgreementRequest(judge_run=1))),
    ]


DERIVED = {"report.html": "report", "checks.html": "checks", "report.json": "report"}
"""Pages drawn from another page's figures (HTML, or JSON text, from a report): name -> the
page drawn."""


def derived_figures(key: PageKey, base: Any) -> Any:
    """The figures of a ``DERIVED`` page from those of the page it draws: the report as one
    HTML page, or (``report.json``) its data as JSON text, kept so that serving it is a read
    (a 10,000-judgment run's report is about 14 MB of JSON: unpickling the report and
    serialising it again took most of a second on every load)."""

    if key.page == "report.json":
        return json_text(base.to_json())
    return html(base)


def json_text(value: dict[str, Any]) -> str:
    """A JSON object as the API writes it (compact; non-ASCII escaped, as Flask does)."""
    return json.dumps(value, separators=(",", ":"))


def page_figures(session: Session, key: PageKey, settings: Settings | None) -> Any:
    """The figures of the page ``key`` names, computed now (what the dashboard keeps)."""
    if key.page in DERIVED:
        drawn = PageKey(DERIVED[key.page], key.judge_run_id, key.options)
        return derived_figures(key, page_figures(session, drawn, settings))
    if key.page == "judge-run":
        return judge_run_view(session, key.judge_run_id, settings=settings, campaigns=key.options)
    if key.page == "agreement":
        return agreement_figures(session, key.judge_run_id, key.options)
    if key.page == "agreement-json":
        from server.usecases.agreement import AgreementRequest
        from server.usecases.standing import agreement_with_standing

        given = {k: list(v) if isinstance(v, tuple) else v for k, v in key.options}
        request = AgreementRequest.model_validate({**given, "judge_run": key.judge_run_id})
        return agreement_with_standing(session, request).to_dict()
    if key.page == "report":
        from server.usecases.reports import full_report

        return full_report(
            session, key.judge_run_id, settings=settings, campaigns=list(key.options)
        )
    if key.page == "checks":
        if settings is None:
            raise ValueError("the checks page needs the settings")
        return checks_figures(session, key.judge_run_id, key.options, settings)
    raise ValueError(f"no page {key.page!r}")


def store_version(session: Session) -> tuple[Any, ...]:
    """A fingerprint of everything a figure may read, in a handful of statements: per table
    (bookkeeping ones left out) its rows, highest id and latest time in each time column,
    and the values of ``MUTABLE`` columns. Equal versions: no row a figure reads was added,
    removed or stamped since."""
    from sqlalchemy import DateTime, func, select
    from sqlmodel import SQLModel

    import judge.store.tables  # noqa: F401  (registers every table on the metadata)
    import server.tables  # noqa: F401  (and the server's own)

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


NOT_READ_BY_RUNS = frozenset(
    {"auditrun", "auditanswer", "auditlabel", "itemgenerationcall", "pairwiseimport",
     "pairwiseverdict", "gateverdict"}
)  # fmt: skip
"""Tables no judge run's page reads (audits, item writing, imported pairwise judgments and
the release gates' verdicts have pages of their own)."""


def _fingerprint(session: Session, table: Any, where: Any) -> list[Any]:
    """Rows, highest id, latest time per time column of ``table``'s rows matching ``where``,
    and the counts of its ``MUTABLE`` column's values, in two statements at most."""
    from sqlalchemy import DateTime, func, select

    aggregates: list[Any] = [func.count()]
    if "id" in table.c:
        aggregates.append(func.max(table.c.id))
    aggregates += [func.max(c) for c in table.c if isinstance(c.type, DateTime)]
    out: list[Any] = list(session.execute(select(*aggregates).where(where)).one())
    if table.name in MUTABLE:
        column = table.c[MUTABLE[table.name]]
        rows = session.execute(
            select(column, func.count()).where(where).group_by(column).order_by(column)
        )
        out.append(tuple((str(value), int(n)) for value, n in rows))
    return out


def run_version(session: Session, judge_run_id: int) -> tuple[Any, ...]:
    """A fingerprint of the rows a judge run's pages read, scoped to the run: its generation
    run and that run's counterfactual copies, the judge runs of those answers, their
    judgments, the answers, the dataset's items, the ratings of those answers and their
    changes, the campaigns over them and their tasks; plus every other table a figure may
    read (``store_version``'s rule, audits and item writing left out). Writes to another
    run's rows leave it unchanged. An unknown run has a version of its own (no rows)."""
    from sqlalchemy import or_, select, true
    from sqlmodel import SQLModel, col

    import judge.store.tables as t
    import server.tables  # noqa: F401  (every table on the metadata, whatever ran before)

    jrun = session.get(t.JudgeRun, judge_run_id)
    if jrun is None:
        return ("no judge run", str(judge_run_id))
    gen = session.get(t.GenerationRun, jrun.generation_run_id)
    dataset = gen.dataset_id if gen is not None else -1
    gens = [jrun.generation_run_id] + list(
        session.execute(
            select(col(t.GenerationRun.id)).where(
                col(t.GenerationRun.derived_from) == jrun.generation_run_id
            )
        ).scalars()
    )
    judges = select(col(t.JudgeRun.id)).where(col(t.JudgeRun.generation_run_id).in_(gens))
    ratings = select(col(t.HumanRating.id)).where(col(t.HumanRating.generation_run_id).in_(gens))
    campaigns = select(col(t.Campaign.id)).where(
        or_(
            col(t.Campaign.generation_run_id).in_(gens),
            col(t.Campaign.judge_run_id).in_(judges),
        )
    )
    scoped: dict[str, Any] = {
        "judgerun": col(t.JudgeRun.id).in_(judges),
        "generationrun": col(t.GenerationRun.id).in_(gens),
        "judgment": col(t.Judgment.judge_run_id).in_(judges),
        "response": col(t.Response.run_id).in_(gens),
        "humanrating": col(t.HumanRating.generation_run_id).in_(gens),
        "ratingchange": col(t.RatingChange.rating_id).in_(ratings),
        "item": col(t.Item.dataset_id) == dataset,
        "campaign": col(t.Campaign.id).in_(campaigns),
        "campaigntask": col(t.CampaignTask.campaign_id).in_(campaigns),
    }
    version: list[Any] = [judge_run_id]
    for table in SQLModel.metadata.sorted_tables:
        if table.name in BOOKKEEPING or table.name in NOT_READ_BY_RUNS:
            continue
        where = scoped.get(table.name, true())
        version.append((table.name, *_fingerprint(session, table, where)))
    return tuple(str(v) for v in version)
