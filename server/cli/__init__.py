"""The ``fairjudge`` command: a thin layer that parses options, calls one domain function and
prints the result (a readable table, or JSON with ``--json``).

Each command group lives in its own module; this one holds the root group, the ``Context``
the commands share, and ``main``, the only place that knows exit codes. Command modules
import the domain packages inside their functions, so ``fairjudge --help`` stays quick.
"""

from __future__ import annotations

import signal
import sys
from typing import TYPE_CHECKING, Any

import click

from judge.errors import FairJudgeError
from server.cli import (
    agreement,
    compare,
    dataset,
    export,
    model,
    ratings,
    report,
    runs,
    serve,
    sweep,
)
from server.cli.output import err

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from judge.config import Settings


class Context:
    """What the root options give every command: the settings and one shared engine."""

    def __init__(self, config: str | None, database_url: str | None) -> None:
        self.config_path = config
        self.database_url = database_url
        self._engine: Engine | None = None

    def settings(self, **overrides: object) -> Settings:
        """The config file's settings with ``--db`` and the command's ``overrides`` applied."""
        from judge.config import load_settings

        return load_settings(self.config_path, database_url=self.database_url, **overrides)

    def engine(self, settings: Settings | None = None) -> Engine:
        """The store's engine, opened on first use."""
        if self._engine is None:
            from server.services import open_store

            self._engine = open_store(settings or self.settings())
        return self._engine


@click.group()
@click.option(
    "--config",
    type=click.Path(dir_okay=False),
    envvar="FAIRJUDGE_CONFIG",
    help="Config file (default: ./fairjudge.toml, else the checkout's, else built-in defaults).",
)
@click.option(
    "--db",
    "database_url",
    envvar="FAIRJUDGE_DATABASE_URL",
    help="Database URL; overrides database_url in the config.",
)
@click.pass_context
def cli(ctx: click.Context, config: str | None, database_url: str | None) -> None:
    """FairJudge: LLM-as-judge bias evaluation with human annotation."""
    ctx.obj = Context(config, database_url)


cli.add_command(model.model)
cli.add_command(dataset.dataset)
cli.add_command(runs.generate)
cli.add_command(runs.judge)
cli.add_command(runs.runs)
cli.add_command(report.report)
cli.add_command(report.demo)
cli.add_command(compare.compare)
cli.add_command(ratings.ratings)
cli.add_command(agreement.agreement)
cli.add_command(serve.serve)
cli.add_command(sweep.sweep)
cli.add_command(export.export)

INTERRUPTED = "interrupted: finished work is stored; run the same command again to resume"


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def main() -> None:
    """Console entry point: user errors become one clear line and exit code 1; an interrupt
    (Ctrl-C or SIGTERM) says that finished work is kept and exits 130."""
    signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        cli.main(standalone_mode=False)
    except FairJudgeError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    except (click.exceptions.Abort, KeyboardInterrupt):
        err.print(INTERRUPTED)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
