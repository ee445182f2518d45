"""``fairjudge campaign`` and ``fairjudge annotators``: human annotation in Label Studio."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from server.cli.output import ROW_ID, emit, err, json_option, out, table

if TYPE_CHECKING:
    from server.cli import Context


class SizeType(click.ParamType):
    """``--size``: a whole number of items, or a fraction of the run in (0, 1]."""

    name = "N|FRACTION"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, int | float):
            return value
        text = str(value).strip()
        try:
            number = float(text)
        except ValueError:
            self.fail(f"{value!r} is neither a count nor a fraction", param, ctx)
        if "." in text or "e" in text.lower():
            if not 0 < number <= 1:
                self.fail(f"a fraction must lie in (0, 1], got {value}", param, ctx)
            return number
        if number < 1:
            self.fail(f"a count must be at least 1, got {value}", param, ctx)
        return int(number)


def _progress(line: str) -> None:
    err().print(line, highlight=False)


@click.group()
def campaign() -> None:
    """Annotation campaigns: humans rate a judge run's answers in Label Studio."""


@campaign.command("create")
@click.option("--judge-run", "judge_run", type=ROW_ID, required=True, help="Judge run to sample.")
@click.option(
    "--rubric", "rubrics", multiple=True, help="Rubric to rate (repeatable; default: all)."
)
@click.option(
    "--size",
    type=SizeType(),
    default=None,
    help="Items to sample: a count, or a fraction of the run (default 0.2, FairMonitor's 20 %).",
)
@click.option(
    "--annotators",
    type=click.IntRange(min=1),
    default=3,
    show_default=True,
    help="Distinct annotators each item needs.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the sample.")
@click.option(
    "--strategy",
    type=click.Choice(["random", "stratified", "disagreement"]),
    default="random",
    show_default=True,
    help="How items are drawn (see docs/annotation.md).",
)
@click.option(
    "--target-half-width",
    type=click.FloatRange(min=0, min_open=True, max=1),
    default=None,
    help="Choose the size so that the 95 % CI of Spearman's rho reaches at most this far "
    "from the estimate on each side (instead of --size).",
)
@click.option(
    "--pilot", default=None, help="Campaign whose ratings give rho for --target-half-width."
)
@click.option("--name", default=None, help="Campaign name (default: runN-STRATEGY-seedS).")
@click.option(
    "--gold",
    "gold_file",
    type=click.Path(dir_okay=False),
    default=None,
    help="CSV of gold items (item_id, rubric, score): known scores to measure annotators "
    "with, kept out of the sample and of agreement with the judge.",
)
@json_option
@click.pass_obj
def create(
    ctx: Context,
    judge_run: int,
    rubrics: tuple[str, ...],
    size: float | None,
    annotators: int,
    seed: int,
    strategy: str,
    target_half_width: float | None,
    pilot: str | None,
    name: str | None,
    gold_file: str | None,
    as_json: bool,
) -> None:
    """Sample a judge run's answers and send them to Label Studio as tasks (blind: no judge
    output goes there). Running it again finishes an interrupted creation and adds no task
    twice."""
    from server.usecases import campaigns

    if target_half_width is not None and size is not None:
        raise click.UsageError("give --size or --target-half-width, not both")
    settings = ctx.settings()
    data = campaigns.create_rating_campaign(
        ctx.engine(settings),
        settings,
        gold_file=gold_file,
        target_half_width=target_half_width,
        pilot=pilot,
        judge_run_id=judge_run,
        rubrics=rubrics,
        size=size,
        annotators=annotators,
        seed=seed,
        strategy=strategy,
        name=name,
        progress=_progress,
    )
    emit(data, as_json, _print_created)


@campaign.command("gold")
@click.argument("name")
@click.argument("path", type=click.Path(dir_okay=False))
@json_option
@click.pass_obj
def gold_cmd(ctx: Context, name: str, path: str, as_json: bool) -> None:
    """Add gold items to a rating campaign from a CSV (item_id, rubric, score): items with
    known scores, shown to annotators like any other, to measure each one's accuracy in
    `campaign status`. They must lie outside the campaign's sample; the same file again
    adds nothing."""
    from server.usecases import campaigns

    settings = ctx.settings()
    emit(
        campaigns.add_gold(ctx.engine(settings), settings, name, path, _progress),
        as_json,
        lambda d: out().print(
            f"campaign {d['campaign']}: {d['added']} gold item(s) added "
            f"({d['gold_items']} in all), {d['imported']} task(s) sent to Label Studio",
            highlight=False,
        ),
    )


def _print_created(d: dict[str, Any]) -> None:
    verb = "created" if d["created"] else "already exists;"
    out().print(
        f"campaign {d['campaign']} {verb} {d['size']} of {d['population']} items "
        f"({d['strategy']}), {d['annotators']} annotators each; "
        f"{d['imported']} tasks imported, {d['already_there']} already in Label Studio",
        highlight=False,
    )
    out().print(f"project: {d['url']}", highlight=False)
    for note in d["notes"]:
        out().print(f"note: {note}", highlight=False)


@campaign.command("review")
@click.option("--dataset", required=True, help="Dataset whose items experts review.")
@click.option("--items", "item_keys", multiple=True, help="Only these item ids (repeatable).")
@click.option(
    "--drafts",
    is_flag=True,
    help="Only generated items waiting for review (the same as --status draft).",
)
@click.option(
    "--status",
    "statuses",
    multiple=True,
    type=click.Choice(["draft", "unreviewed", "accepted", "edited", "rejected"]),
    help="Only items with this review status (repeatable); unreviewed: never reviewed.",
)
@click.option(
    "--reviewers",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Reviewers each item needs.",
)
@click.option(
    "--name",
    default=None,
    help="Campaign name (default: review-DATASET, then each --status, e.g. review-DATASET-draft).",
)
@json_option
@click.pass_obj
def review(
    ctx: Context,
    dataset: str,
    item_keys: tuple[str, ...],
    drafts: bool,
    statuses: tuple[str, ...],
    reviewers: int,
    name: str | None,
    as_json: bool,
) -> None:
    """Put dataset items before experts, who accept, edit or reject each with a reason.
    Running it again with the same options adds the items that match now (drafts generated
    since) and no task twice."""
    from server.usecases import campaigns

    settings = ctx.settings()
    data = campaigns.create_review(
        ctx.engine(settings),
        settings,
        dataset=dataset,
        item_keys=item_keys,
        statuses=(*statuses, "draft") if drafts else statuses,
        reviewers=reviewers,
        name=name,
        progress=_progress,
    )
    emit(data, as_json, _print_created)


@campaign.command("pull")
@click.argument("name")
@json_option
@click.pass_obj
def pull(ctx: Context, name: str, as_json: bool) -> None:
    """Store the campaign's ratings (or reviews) from Label Studio; pulling again adds
    nothing, keeps edits' old values and marks deleted annotations withdrawn."""
    from server.usecases import campaigns

    settings = ctx.settings()
    result = campaigns.pull_campaign(ctx.engine(settings), settings, name, _progress)
    data = result.to_dict()
    emit(
        data,
        as_json,
        lambda d: out().print(
            f"campaign {d['campaign']}: {d['added']} added, {d['updated']} updated, "
            f"{d['unchanged']} unchanged, {d['withdrawn']} withdrawn, {d['skipped']} skipped "
            "in Label Studio",
            highlight=False,
        ),
    )
    for rater, item in result.rated_twice:
        err().print(f"warning: {rater} rated item {item} more than once (the latest is kept)")
    for task, reason in result.incomplete:
        err().print(f"warning: task {task}: {reason}", highlight=False)
    if result.problems:
        raise campaigns.task_problems(
            f"{len(result.problems)} annotation(s) of campaign {name!r} could not be stored "
            "(the rest were); fix them in Label Studio and pull again:",
            result.problems,
        )


@campaign.command("status")
@click.argument("name")
@click.option(
    "--offset-margin",
    type=click.FloatRange(min=0),
    default=0.5,
    show_default=True,
    help="Flag an annotator whose mean offset from each other annotator has its 95 % CI "
    "beyond this many levels (on the same side).",
)
@click.option(
    "--min-kappa",
    type=click.FloatRange(min=-1, max=1),
    default=0.4,
    show_default=True,
    help="Flag an annotator whose quadratic-weighted kappa with every other annotator is "
    "below this.",
)
@json_option
@click.pass_obj
def status(ctx: Context, name: str, offset_margin: float, min_kappa: float, as_json: bool) -> None:
    """Progress read live from Label Studio: per annotator, complete and incomplete
    annotations, offset from and agreement with the others, accuracy on gold items, items
    short of ratings, skips, and annotators worth a look."""
    from server.usecases import campaigns

    settings = ctx.settings()
    with campaigns.labelstudio_session(ctx.engine(settings), settings) as (session, client, _):
        data = campaigns.campaign_status(
            session, client, name, offset_margin=offset_margin, min_kappa=min_kappa
        )
    emit(data, as_json, _print_status)


def _offset_text(a: dict[str, Any]) -> str:
    o = a.get("offset")
    if not o:
        return ""
    return (
        f"{o['mean']:+.2f} [{o['ci_low']:+.2f}, {o['ci_high']:+.2f}] vs {o['other']}, "
        f"n={o['n_items']}"
    )


def _kappa_text(a: dict[str, Any]) -> str:
    k = a.get("agreement")
    return "" if not k else f"{k['kappa']:.2f} with {k['other']}, n={k['n_ratings']}"


def _gold_text(a: dict[str, Any]) -> str:
    g = a.get("gold")
    return "" if not g else f"{g['exact']:.0%} exact, MAE {g['mae']:.2f}, n={g['n']}"


def _print_status(d: dict[str, Any]) -> None:
    table(
        f"campaign {d['campaign']} ({d['strategy']}): {d['tasks']} items, "
        f"{d['needed_per_item']} ratings each",
        [
            {
                "annotator": a["email"],
                "done": a["done"],
                "incomplete": a["incomplete"],
                "skipped": a["skipped"],
                "median s/task": (
                    "" if a["median_lead_time_s"] is None else f"{a['median_lead_time_s']:.1f}"
                ),
                "offset [95 % CI] (closest)": _offset_text(a),
                "kappa (best)": _kappa_text(a),
                "gold": _gold_text(a),
                "worth a look": "; ".join(a["flags"]),
            }
            for a in d["annotators"]
        ],
    )
    short = d["items_short"]
    out().print(f"items short of {d['needed_per_item']} ratings: {len(short)}", highlight=False)
    for pair in d["rated_twice"]:
        out().print(f"rated twice: {pair[0]} on item {pair[1]}", highlight=False)
    for a in d["annotators"]:
        if a.get("held_out"):
            out().print(
                f"held out: {a['held_out']} annotation(s) by {a['email']} last changed by "
                "someone else; the pulled rating counts until they submit again",
                highlight=False,
            )
    for item, notes in d["items_incomplete"].items():
        for note in notes:
            out().print(f"incomplete: item {item}: {note}", highlight=False)
    if d["gold_items"]:
        out().print(
            f"gold items: {d['gold_items']} (accuracy per annotator above; kept out of "
            "agreement with the judge)",
            highlight=False,
        )
    if d["skipped_items"]:
        out().print(f"items skipped: {len(d['skipped_items'])}", highlight=False)


@campaign.command("list")
@json_option
@click.pass_obj
def list_(ctx: Context, as_json: bool) -> None:
    """Every campaign with its size and stored ratings (no Label Studio needed)."""
    from server.usecases import campaigns

    rows = campaigns.list_campaigns_in(ctx.engine())
    emit(rows, as_json, lambda r: table("campaigns", r))


@campaign.command("export")
@click.argument("name")
@click.option(
    "--out",
    "path",
    required=True,
    type=click.Path(dir_okay=False),
    help="File to write: .csv, or .jsonl (the long format `ratings import` reads).",
)
@click.pass_obj
def export(ctx: Context, name: str, path: str) -> None:
    """Write the campaign's ratings in the long format `ratings import` reads."""
    from server.usecases import campaigns

    n = campaigns.export_campaign(ctx.engine(), name, path)
    out().print(f"{n} ratings written to {path}", highlight=False)


@click.group()
def annotators() -> None:
    """People who rate in Label Studio."""


@annotators.command("add")
@click.argument("email")
@click.option("--name", default="", help="The person's name.")
@json_option
@click.pass_obj
def add(ctx: Context, email: str, name: str, as_json: bool) -> None:
    """Create a Label Studio user for EMAIL and say how the person logs in."""
    from server.usecases import campaigns

    settings = ctx.settings()
    person = campaigns.add_annotator(ctx.engine(settings), settings, email, name)
    emit(
        {
            "email": person.email,
            "user_id": person.user_id,
            "url": person.url,
            "created": person.created,
            "password": person.password,
        },
        as_json,
        lambda _: out().print(person.login_text(), highlight=False),
    )


@annotators.command("list")
@json_option
@click.pass_obj
def list_annotators_cmd(ctx: Context, as_json: bool) -> None:
    """Each annotator with their campaigns and progress as of the last pull."""
    from server.usecases import campaigns

    rows = campaigns.list_annotators(ctx.engine())
    emit(
        rows,
        as_json,
        lambda r: table(
            "annotators",
            [
                {
                    "email": a["email"],
                    "name": a["name"],
                    "campaigns (items rated/items)": ", ".join(
                        f"{k} {v}" for k, v in a["campaigns"].items()
                    ),
                }
                for a in r
            ],
        ),
    )
