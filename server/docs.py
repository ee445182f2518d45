"""Generate docs/configuration.md and docs/cli.md from the code, so they cannot drift.

Run ``python -m server.docs`` after changing a setting or a command; a test fails when the
committed files differ from what this module produces.
"""

from __future__ import annotations

from pathlib import Path

import click
from pydantic import BaseModel

from judge.config import ROOT, Settings
from server.cli import cli

DOCS = ROOT / "docs"


def _rows(model: type[BaseModel], prefix: str) -> list[str]:
    rows = []
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            rows += _rows(annotation, f"{prefix}{name}.")
            continue
        default = field.get_default(call_default_factory=True)
        if name == "prompts_dir":
            default = "<repository>/prompts"
        shown = "" if default in ({}, None) else f"`{default!r}`"
        description = (field.description or "").replace("|", "\\|")
        rows.append(f"| `{prefix}{name}` | {shown} | {description} |")
    return rows


def configuration_markdown() -> str:
    from judge.config import EndpointConfig

    lines = [
        "# Configuration (`fairjudge.toml`)",
        "",
        "Generated from `judge/config.py` by `python -m server.docs`; do not edit by hand.",
        "",
        "| setting | default | meaning |",
        "| --- | --- | --- |",
        *_rows(Settings, ""),
        "",
        "## Endpoints (`[endpoints.NAME]`)",
        "",
        "| setting | default | meaning |",
        "| --- | --- | --- |",
        *_rows(EndpointConfig, "endpoints.NAME."),
        "",
    ]
    return "\n".join(lines)


def cli_markdown() -> str:
    lines = [
        "# Command line (`fairjudge`)",
        "",
        "Generated from `server/cli.py` by `python -m server.docs`; do not edit by hand.",
        "",
    ]

    def walk(command: click.Command, path: list[str]) -> None:
        ctx = click.Context(command, info_name=" ".join(path), terminal_width=100)
        lines.extend([f"## `{' '.join(path)}`", "", "```text", command.get_help(ctx), "```", ""])
        if isinstance(command, click.Group):
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                if sub is not None:
                    walk(sub, [*path, name])

    walk(cli, ["fairjudge"])
    return "\n".join(lines)


def render() -> dict[Path, str]:
    return {DOCS / "configuration.md": configuration_markdown(), DOCS / "cli.md": cli_markdown()}


if __name__ == "__main__":
    DOCS.mkdir(exist_ok=True)
    for path, text in render().items():
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path}")
