"""``fairjudge estimates``: a judge run's bias figures three ways (judge-only, human-only,
prediction-powered); with ``--transport OTHER`` whether the judge's correction holds on
another model's answers; with ``--plan`` the human ratings a target interval needs. All ask
``server.usecases.estimates``; ``--json`` gives the shape the web API's routes give."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

import click

from server.cli.agreement import campaign_option
from server.cli.output import (
    ROW_ID,
    emit,
    human_option,
    json_option,
    out,
    report_table,
    require_qualified_option,
    requires_qualified,
)

if TYPE_CHECKING:
    from pydantic import BaseModel

    from server.usecases import Section, Table

R = TypeVar("R", bound="BaseModel")

OPTION_OF = {
    "judge_run": "JUDGE_RUN",
    "campaigns": "--campaign",
    "gap_by": "--gap-by",
    "gap_a": "--gap",
    "gap_b": "--gap",
    "gap_metric": "--gap-metric",
    "metric": "--metric",
    "others": "--transport",
}
"""A request field -> the option that sets it (the rest: the field's name as an option)."""


@click.command()
@click.argument("judge_run", type=ROW_ID, metavar="JUDGE_RUN")
@campaign_option
@human_option
@click.option(
    "--assume-random",
    is_flag=True,
    help="Treat imported ratings (or those of several campaigns) as a simple random sample "
    "of the run's items. Without it they give no human-only or prediction-powered estimate. "
    "Refused (exit 1) when the judge scores the rated items unlike the rest ([estimates] "
    "max_smd, smd_alpha).",
)
@click.option(
    "--accept-unrepresentative",
    is_flag=True,
    help="With --assume-random: use the ratings even when they fail that check; the output's "
    "design then says so.",
)
@click.option(
    "--alpha",
    type=float,
    default=0.05,
    show_default=True,
    help="1 - the intervals' coverage (0.05: 95 % intervals).",
)
@click.option(
    "--gap-by",
    metavar="FIELD",
    help="Also estimate a gap between two groups of items: factor, scenario, stage or "
    "fields.NAME (needs --gap and --gap-metric).",
)
@click.option("--gap", nargs=2, metavar="A B", help="The two groups: the gap is A minus B.")
@click.option(
    "--gap-metric",
    metavar="NAME",
    help="The gap's target: a stage metric's name or label (e.g. 'S2 TCS mean') or a rubric.",
)
@click.option(
    "--transport",
    "others",
    type=ROW_ID,
    multiple=True,
    metavar="JUDGE_RUN",
    help="Instead: test whether the judge's correction transports to this judge run's model "
    "(the same judge configuration on another model's answers; repeat for several), with "
    "each model's own and pooled estimates.",
)
@click.option(
    "--plan",
    is_flag=True,
    help="Instead: how many human ratings an interval of --target-half-width needs, with the "
    "judge (PPI++) and without.",
)
@click.option(
    "--target-half-width",
    type=float,
    help="With --plan: half the interval's width, in percentage points for a stage metric "
    "(scale points for a rubric).",
)
@click.option(
    "--rho",
    type=float,
    help="With --plan: the judge-human correlation to plan with (default: the stored "
    "ratings' own, a pilot).",
)
@click.option(
    "--metric",
    metavar="NAME",
    help="With --plan: this stage metric or rubric only (default: every stage metric).",
)
@require_qualified_option
@json_option
@click.pass_context
def estimates(
    click_ctx: click.Context,
    judge_run: int,
    campaigns: tuple[str, ...],
    human_score: str,
    assume_random: bool,
    accept_unrepresentative: bool,
    alpha: float,
    gap_by: str | None,
    gap: tuple[str, str] | None,
    gap_metric: str | None,
    others: tuple[int, ...],
    plan: bool,
    target_half_width: float | None,
    rho: float | None,
    metric: str | None,
    require_qualified: bool | None,
    as_json: bool,
) -> None:
    """Bias figures of JUDGE_RUN corrected by human ratings: each stage metric and rubric
    mean, per factor and overall, as the judge says it, as the rated items say it, and
    prediction-powered (the judge's scores of every item, corrected by the rated ones).

    The output names the sampling design it assumed: a campaign's (random, stratified or
    disagreement), or none for imported ratings unless --assume-random. Rows with fewer than
    30 rated items are marked and get t intervals."""
    from server.usecases.estimates import (
        EstimatesRequest,
        RatingPlanRequest,
        TransportRequest,
        estimates_in,
        estimates_section,
        plan_ratings_in,
        transport_in,
    )
    from server.usecases.standing import (
        estimates_with_standing_in,
        require_in,
        transport_with_standing_in,
    )

    engine = click_ctx.obj.engine()
    if requires_qualified(click_ctx.obj.settings(), require_qualified):
        for run in (judge_run, *others):  # --transport: every run's judge, as the API checks
            require_in(engine, run)
    common = {"judge_run": judge_run, "campaigns": list(campaigns), "human_score": human_score,
              "alpha": alpha}  # fmt: skip
    if accept_unrepresentative and not assume_random:
        raise click.UsageError("--accept-unrepresentative goes with --assume-random")
    if plan:
        if gap_by or gap or gap_metric or assume_random or others:
            raise click.UsageError(
                "--plan takes no --gap, --gap-by, --gap-metric, --assume-random or --transport"
            )
        if target_half_width is None:
            raise click.UsageError("--plan needs --target-half-width")
        plans = plan_ratings_in(
            engine,
            _request(
                RatingPlanRequest, **common, target_half_width=target_half_width, rho=rho,
                metric=metric,
            ),
        )  # fmt: skip
        emit(plans.to_dict(), as_json, lambda _: report_table(plans.table()))
        return
    if target_half_width is not None or rho is not None or metric is not None:
        raise click.UsageError("--target-half-width, --rho and --metric go with --plan")
    rules = click_ctx.obj.settings().estimates
    flags = {"assume_random": assume_random, "accept_unrepresentative": accept_unrepresentative}
    if others:
        if gap_by or gap or gap_metric or campaigns:
            raise click.UsageError(
                "--transport takes no --gap, --gap-by, --gap-metric or --campaign (every "
                "run's own ratings count)"
            )
        found = transport_in(
            engine,
            _request(
                TransportRequest, judge_run=judge_run, others=list(others),
                human_score=human_score, alpha=alpha, **flags,
            ),
            rules,
        )  # fmt: skip
        shown = transport_with_standing_in(engine, found)
        emit(shown, as_json, lambda d: _print_tables(found.tables(), _standing_lines(d)))
        return
    request = _request(
        EstimatesRequest, **common, **flags, gap_by=gap_by,
        gap_a=gap[0] if gap else None, gap_b=gap[1] if gap else None, gap_metric=gap_metric,
    )  # fmt: skip
    if problem := request.gap_problem():
        raise click.UsageError(
            problem.replace(
                "gap_by, gap_a, gap_b and gap_metric", "--gap-by, --gap and --gap-metric"
            )
        )
    result = estimates_in(engine, request, rules)
    shown = estimates_with_standing_in(engine, result)
    emit(shown, as_json, lambda d: _print(estimates_section(result), _standing_lines(d)))


def _standing_lines(payload: dict[str, Any]) -> list[str]:
    """The judge's standing per rubric, one line each (of every run, for --transport)."""
    standing = payload["standing"]
    if "targets" not in payload:
        return [f"judge standing, {r}: {s['says']}" for r, s in standing.items()]
    return [
        f"judge standing, judge run {run}, {r}: {s['says']}"
        for run, rubrics in standing.items()
        for r, s in rubrics.items()
    ]


def _print(section: Section, standing: list[str]) -> None:
    """The judge's standing first, the section's tables, then its notes, one per line."""
    from rich.text import Text

    for line in standing:
        out().print(Text(line))
    for t in section.tables:
        report_table(t)
    for note in section.notes:
        out().print(Text(note))


def _print_tables(tables: list[Table], standing: list[str]) -> None:
    from rich.text import Text

    for line in standing:
        out().print(Text(line))
    for t in tables:
        report_table(t)


def _request(model: type[R], **fields: Any) -> R:
    """``model`` from the options; a value it refuses is a usage error naming the option."""
    from pydantic import ValidationError

    try:
        return model.model_validate(fields)
    except ValidationError as exc:
        problems = []
        for e in exc.errors():
            name = str(e["loc"][0]) if e["loc"] else ""
            option = OPTION_OF.get(name, "--" + name.replace("_", "-")) if name else "options"
            problems.append(f"{option}: {e['msg']}")
        raise click.UsageError("; ".join(problems)) from None
