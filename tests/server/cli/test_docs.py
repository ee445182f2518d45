"""Documentation cannot drift from the code: generated references must be current, and every
command and setting must be documented."""

from __future__ import annotations

import tomllib
from pathlib import Path

import click

from judge.paths import checkout_root
from server.cli import cli
from server.cli.docs import COMMAND, render


def repo() -> Path:
    root = checkout_root()
    assert root is not None, "the docs tests run from a checkout"
    return root


def test_generated_docs_are_current() -> None:
    for path, text in render().items():
        assert path.exists(), f"{path} is missing: run {COMMAND}"
        assert path.read_text(encoding="utf-8") == text, f"{path} is stale: run {COMMAND}"


def test_every_command_is_in_the_cli_reference() -> None:
    reference = (repo() / "docs" / "cli.md").read_text()
    ctx = click.Context(cli)
    for name in cli.list_commands(ctx):
        assert f"## `fairjudge {name}`" in reference


def test_every_key_of_the_shipped_config_is_documented() -> None:
    reference = (repo() / "docs" / "configuration.md").read_text()
    data = tomllib.loads((repo() / "fairjudge.toml").read_text())

    def keys(node: dict[str, object], prefix: str) -> list[str]:
        out = []
        for key, value in node.items():
            if prefix == "endpoints.":
                out += keys(value, "endpoints.NAME.")  # type: ignore[arg-type]
            elif isinstance(value, dict):
                out += keys(value, f"{prefix}{key}.")
            else:
                out.append(prefix + key)
        return out

    for key in keys(data, ""):
        assert f"`{key}`" in reference, f"{key} is not documented"


def test_readme_quickstart_has_the_two_commands() -> None:
    readme = (repo() / "README.md").read_text()
    assert "make demo" in readme and "make test" in readme


def commands_without_json() -> list[str]:
    """Every runnable command (leaf, or group that runs itself) lacking a --json option."""
    missing = []

    def walk(command: click.Command, path: list[str]) -> None:
        if isinstance(command, click.Group):
            ctx = click.Context(command)
            for name in command.list_commands(ctx):
                sub = command.get_command(ctx, name)
                assert sub is not None
                walk(sub, [*path, name])
            if not command.invoke_without_command:
                return
        if not any(p.name == "as_json" for p in command.params):
            missing.append(" ".join(path))

    walk(cli, [])
    return sorted(missing)


def test_guide_names_exactly_the_commands_without_json() -> None:
    # The claim moved from the README to docs/guide.md when the README became an on-ramp.
    guide = " ".join((repo() / "docs" / "guide.md").read_text().split())
    claim = guide.split("takes `--json` for machine-readable output (all but ")[1].split(")")[0]
    named = sorted(n.strip("` ") for n in claim.replace(" and ", ", ").split(","))
    assert named == commands_without_json()


def test_guide_and_judging_docs_promise_the_same_after_a_kill() -> None:
    # Both say a SIGKILL costs at most the calls in flight; neither may promise that nothing
    # is ever paid twice after a kill, nor keep the old "last second" wording. (The promise
    # moved from the README to docs/guide.md; the README must not bring the old wording back.)
    readme = " ".join((repo() / "README.md").read_text().split())
    guide = " ".join((repo() / "docs" / "guide.md").read_text().split())
    judging = " ".join((repo() / "docs" / "judging.md").read_text().split())
    for text in (guide, judging):
        assert "SIGKILL" in text and "calls in flight" in text
    for text in (readme, guide, judging):
        assert "last second" not in text
        assert "even after Ctrl-C or a kill" not in text


def test_generated_docs_show_no_python_internals() -> None:
    for path, text in render().items():
        for leak in ("PydanticUndefined", "<function", "object at 0x"):
            assert leak not in text, f"{path.name} shows {leak}"
