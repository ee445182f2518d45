"""``fairjudge labelstudio``: start, stop and inspect the Label Studio that annotation
campaigns use (FairJudge's own, or the one at ``[labelstudio] url``).

These print plain lines with click (not rich), so ``labelstudio status`` starts quickly."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import click

from server.cli.output import emit, json_option

if TYPE_CHECKING:
    from judge.config import Settings
    from server.cli import Context
    from server.usecases.servers import LabelStudioService


@click.group()
def labelstudio() -> None:
    """Manage the Label Studio server that annotation campaigns use."""


def _service(ctx: Context) -> tuple[Settings, LabelStudioService]:
    from server.usecases.servers import labelstudio_service

    settings = ctx.settings()
    return settings, labelstudio_service(settings)


def _not_managed(settings: Settings, action: str, as_json: bool) -> None:
    """Say that an external server is not FairJudge's to start or stop."""
    url = settings.labelstudio.url
    emit(
        {"managed": False, "url": url},
        as_json,
        lambda _: click.echo(
            f"Label Studio at {url} is not managed by FairJudge ([labelstudio] url is "
            f"set): {action} it yourself"
        ),
    )


def _progress(line: str) -> None:
    click.echo(line, err=True)


@labelstudio.command("start")
@json_option
@click.pass_obj
def labelstudio_start(ctx: Context, as_json: bool) -> None:
    """Install Label Studio on first use (seconds with uv, into its own virtual environment)
    and start it; a no-op when it already runs."""
    settings, service = _service(ctx)
    if settings.labelstudio.url:
        _not_managed(settings, "start", as_json)
        return
    status = service.start(_progress)
    emit(
        asdict(status),
        as_json,
        lambda s: click.echo(
            f"Label Studio {s['version'] or ''} answers at {s['url']} (pid {s['pid']}); "
            f"admin login in {service.admin_file}"
        ),
    )


@labelstudio.command("stop")
@json_option
@click.pass_obj
def labelstudio_stop(ctx: Context, as_json: bool) -> None:
    """Stop FairJudge's Label Studio (its data is kept)."""
    settings, service = _service(ctx)
    if settings.labelstudio.url:
        _not_managed(settings, "stop", as_json)
        return
    stopped = service.stop()
    emit(
        {"stopped": stopped, "url": service.url},
        as_json,
        lambda s: click.echo(
            "stopped" if s["stopped"] else "FairJudge's Label Studio was not running"
        ),
    )


@labelstudio.command("status")
@json_option
@click.pass_obj
def labelstudio_status(ctx: Context, as_json: bool) -> None:
    """Say where Label Studio runs, which version, and whether FairJudge's token works."""
    from server.usecases.servers import labelstudio_status

    status = labelstudio_status(ctx.settings())

    def render(s: dict[str, Any]) -> None:
        owner = "FairJudge's own" if s["managed"] else "external"
        state = "answers" if s["answers"] else "does not answer"
        token = {True: "works", False: "is refused", None: "not checked"}[s["token_works"]]
        click.echo(
            f"{owner} Label Studio {s['version'] or '(version unknown)'} at {s['url']} "
            f"{state}; token {token}"
        )
        if s["managed"] and not s["answers"]:
            click.echo("start it with `fairjudge labelstudio start`")
        if s["managed"]:
            click.echo(
                f"pid: {s['pid'] or '-'}; installed: {'yes' if s['installed'] else 'no'} "
                f"({s['venv']}); data: {s['data_dir']}; log: {s['log']}"
            )

    emit(asdict(status), as_json, render)
