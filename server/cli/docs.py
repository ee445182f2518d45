"""Generate docs/configuration.md and docs/cli.md from the code, so they cannot drift.

Run ``python -m server.cli.docs`` after changing a setting or a command; a test fails when the
committed files differ from what this module produces.
"""

from __future__ import annotations

from pathlib import Path

import click
from pydantic import BaseModel

from judge import paths
from judge.config import EndpointConfig, Settings
from server import openapi_document
from server.cli import cli

COMMAND = "python -m server.cli.docs"


def docs_dir() -> Path:
    """The checkout's docs/ folder (the references are generated in a checkout only)."""
    root = paths.checkout_root()
    if root is None:
        raise RuntimeError("docs are generated from a checkout of the repository")
    return root / "docs"


def _rows(model: type[BaseModel], prefix: str) -> list[str]:
    rows = []
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            rows += _rows(annotation, f"{prefix}{name}.")
            continue
        if field.is_required():
            shown = "(required)"
        else:
            default = field.get_default(call_default_factory=True)
            shown = "" if default in ({}, None) else f"`{default!r}`"
        description = (field.description or "").replace("|", "\\|")
        rows.append(f"| `{prefix}{name}` | {shown} | {description} |")
    return rows


def configuration_markdown() -> str:
    lines = [
        "# Configuration (`fairjudge.toml`)",
        "",
        f"Generated from `judge/config.py` by `{COMMAND}`; do not edit by hand.",
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
        f"Generated from `server/cli/` by `{COMMAND}`; do not edit by hand.",
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


def api_markdown() -> str:
    document = openapi_document()
    lines = [
        "# Web API (`/api/v1`)",
        "",
        f"Generated from the OpenAPI document by `{COMMAND}`; do not edit by hand. The server",
        "serves the full document (request and response schemas included) at",
        "`/api/v1/openapi.json` and browsable docs at `/api/v1/docs/swagger`; docs/server.md",
        "explains keys, jobs, errors and pagination.",
        "",
    ]
    by_tag: dict[str, list[str]] = {}
    for path, operations in document["paths"].items():
        for method, op in operations.items():
            tag = (op.get("tags") or ["other"])[0]
            key = "a key" if op.get("security") else "nothing"
            summary = (op.get("summary") or "").replace("|", "\\|")
            by_tag.setdefault(tag, []).append(
                f"| `{method.upper()}` | `{path}` | {key} | {summary} |"
            )
    for tag, rows in by_tag.items():
        lines += [
            f"## {tag}",
            "",
            "| method | path | needs | what it does |",
            "| --- | --- | --- | --- |",
        ]
        lines += [*rows, ""]
    lines += _cli_and_http()
    return "\n".join(lines)


HTTP_SECTION = "## What is over HTTP, and what is not"


def _cli_and_http() -> list[str]:
    """docs/server.md's table of each CLI workflow and its route or job (and why some are
    CLI-only), copied here so that the API's reference says it too."""
    text = (docs_dir() / "server.md").read_text(encoding="utf-8")
    start = text.index(HTTP_SECTION)
    end = text.find("\n## ", start + len(HTTP_SECTION))
    section = text[start : end if end >= 0 else len(text)].strip()
    return [section.replace(HTTP_SECTION, HTTP_SECTION + " (from docs/server.md)", 1), ""]


def render() -> dict[Path, str]:
    """Each generated file's path and its text."""
    docs = docs_dir()
    return {
        docs / "configuration.md": configuration_markdown(),
        docs / "cli.md": cli_markdown(),
        docs / "api.md": api_markdown(),
    }


if __name__ == "__main__":
    docs_dir().mkdir(exist_ok=True)
    for path, text in render().items():
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path}")
