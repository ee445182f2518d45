"""``fairjudge audit award campaign`` and ``pull``: people classify an award run's follow-up
explanations in Label Studio (``server.usecases.campaigns``). The commands are
attached to the ``award`` group at the end of ``server/cli/audit.py``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from server.cli.output import ROW_ID, emit, err, json_option, out

if TYPE_CHECKING:
    from server.cli import Context


@click.command("campaign")
@click.argument("run_id", type=ROW_ID, metavar="RUN")
@click.option(
    "--annotators",
    type=click.IntRange(min=1),
    default=2,
    show_default=True,
    help="People each explanation is asked of.",
)
@click.option("--title", default=None, help="Project title (default: FairJudge award run RUN "
              "follow-ups).")  # fmt: skip
@click.option(
    "--project",
    "project_id",
    type=int,
    default=None,
    help="Add only the missing follow-ups to this existing project instead of creating one.",
)
@json_option
@click.pass_obj
def award_campaign(
    ctx: Context,
    run_id: int,
    annotators: int,
    title: str | None,
    project_id: int | None,
    as_json: bool,
) -> None:
    """Send RUN's follow-up explanations to Label Studio, one task each, for people to
    classify as indecisive, justified or irrational (the chosen student's group is not
    shown). Prints the project id that `audit award pull` needs."""
    from server.usecases import campaigns

    settings = ctx.settings()
    made = campaigns.create_followup_campaign(
        ctx.engine(settings),
        settings,
        run_id,
        title=title,
        annotators=annotators,
        project_id=project_id,
    )
    emit(made, as_json, _print_created)


def _print_created(d: dict[str, Any]) -> None:
    verb = "created" if d["created"] else "updated"
    out().print(
        f"project {d['project']} {verb} for audit run {d['run_id']}: {d['imported']} tasks "
        f"imported, {d['already_there']} already there ({d['tasks']} follow-ups)",
        highlight=False,
    )
    out().print(f"project: {d['url']}", highlight=False)
    out().print(
        f"pull the classes with: fairjudge audit award pull {d['run_id']} --project {d['project']}",
        highlight=False,
    )


@click.command("pull")
@click.argument("run_id", type=ROW_ID, metavar="RUN")
@click.option(
    "--project",
    "project_id",
    type=int,
    required=True,
    help="The Label Studio project `audit award campaign` created.",
)
@json_option
@click.pass_obj
def award_pull(ctx: Context, run_id: int, project_id: int, as_json: bool) -> None:
    """Store each person's class of RUN's follow-ups from the Label Studio project (source
    human:<e-mail>); pulling again adds nothing, a changed choice replaces the stored one."""
    from server.usecases import campaigns

    settings = ctx.settings()
    result = campaigns.pull_followup_labels(ctx.engine(settings), settings, run_id, project_id)
    emit(
        result.to_dict(),
        as_json,
        lambda d: out().print(
            f"audit run {d['run_id']}, project {d['project']}: {d['added']} added, "
            f"{d['changed']} changed, {d['unchanged']} unchanged, {d['skipped']} skipped in "
            "Label Studio",
            highlight=False,
        ),
    )
    for person, answer in result.classified_twice:
        err().print(
            f"warning: {person} classified answer {answer} more than once (the latest is kept)",
            highlight=False,
        )
    if result.problems:
        raise campaigns.task_problems(
            f"{len(result.problems)} annotation(s) of project {project_id} could not be stored "
            "(the rest were); fix them in Label Studio and pull again:",
            result.problems,
        )


def register(award: click.Group) -> None:
    """Attach the commands to ``fairjudge audit award``."""
    award.add_command(award_campaign)
    award.add_command(award_pull)
