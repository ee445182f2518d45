"""The ``fairjudge`` command: a thin layer that parses options, calls one domain function and
prints the result (a readable table, or JSON with ``--json``).

Each command group lives in its own module; this one holds the root group, the ``Context``
the commands share, and ``main``, the only place that knows exit codes. Command modules
import the domain packages inside their functions, so ``fairjudge --help`` stays quick.
"""

from __future__ import annotations

import _thread
import os
import signal
import sys
import time
import traceback
from typing import TYPE_CHECKING, Any

import click

from judge.errors import FairJudgeError, GatesFailedError, IncompleteError, UnqualifiedError
from server.cli import (
    agreement,
    audit,
    campaign,
    compare,
    dashboard,
    dataset,
    db,
    drift,
    estimates,
    export,
    gate,
    jobs,
    judge_pairs,
    judgments,
    jury,
    keys,
    labelstudio,
    model,
    ratings,
    report,
    responses,
    rubrics,
    runs,
    serve,
    sweep,
    trust,
)
from server.cli.output import err

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from judge.config import Settings


class Context:
    """What the root options give every command: the settings and one shared engine."""

    def __init__(
        self, config: str | None = None, database_url: str | None = None, debug: bool = False
    ) -> None:
        self.config_path = config
        self.database_url = database_url
        self.debug = debug
        self._engine: Engine | None = None

    def settings(self, **overrides: object) -> Settings:
        """The config file's settings with ``--db`` and the command's ``overrides`` applied."""
        from judge.config import load_settings

        return load_settings(self.config_path, database_url=self.database_url, **overrides)

    def engine(self, settings: Settings | None = None) -> Engine:
        """The store's engine, opened on first use."""
        if self._engine is None:
            from server.usecases import open_store

            self._engine = open_store(settings or self.settings())
        return self._engine


class _Root(click.Group):
    """The root group, where an old command name (``OLD``) still runs the new command, with
    a line on stderr that gives the new name; old names are not listed in ``--help``."""

    OLD = {"judge-audit": "checks"}

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        new = self.OLD.get(cmd_name)
        if new is not None:
            err().print(
                f"'{cmd_name}' is the old name of '{new}' (deprecated): use `fairjudge {new}`",
                highlight=False,
            )
            cmd_name = new
        return super().get_command(ctx, cmd_name)


@click.group(cls=_Root)
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
@click.option("--debug", is_flag=True, help="Show the traceback of an error.")
@click.pass_context
def cli(ctx: click.Context, config: str | None, database_url: str | None, debug: bool) -> None:
    """FairJudge: LLM-as-judge bias evaluation with human annotation.

    \b
    Exit codes:
      0    success
      1    an error you can fix (bad file, config, option value, unknown run); one line says what
      2    a usage error (unknown option, missing argument)
      3    the run ended with judgments or answers missing (see --allow-failures)
      4    --require-qualified: a rubric used is not validated for the judge (the line names it)
      5    gate: a gate of the gates file failed (the table or JSON and JUnit XML say which)
      70   an unexpected internal error (a bug: rerun with --debug and report the traceback)
      130  interrupted (Ctrl-C or SIGTERM); finished work is stored
    """
    # main() passes in the Context it reads --debug from; tests invoking `cli` directly do not.
    obj = ctx.ensure_object(Context)
    obj.config_path, obj.database_url, obj.debug = config, database_url, debug


cli.add_command(model.model)
cli.add_command(dataset.dataset)
cli.add_command(runs.generate)
cli.add_command(runs.judge)
cli.add_command(runs.runs)
cli.add_command(report.report)
cli.add_command(report.demo)
cli.add_command(compare.compare)
cli.add_command(drift.drift)
cli.add_command(gate.gate)
cli.add_command(jury.jury)
cli.add_command(dashboard.dashboard)
cli.add_command(ratings.ratings)
cli.add_command(agreement.agreement)
cli.add_command(estimates.estimates)
cli.add_command(serve.serve)
cli.add_command(serve.worker)
cli.add_command(jobs.jobs)
cli.add_command(sweep.sweep)
cli.add_command(export.export)
cli.add_command(labelstudio.labelstudio)
cli.add_command(campaign.campaign)
cli.add_command(campaign.annotators)
cli.add_command(responses.responses)
cli.add_command(rubrics.rubrics)
cli.add_command(keys.keys)
cli.add_command(db.db)
cli.add_command(audit.audit)
cli.add_command(trust.checks)
cli.add_command(judgments.judgments)
cli.add_command(judge_pairs.judge_pairs)

INTERRUPTED = "interrupted: finished work is stored; run the same command again to resume"

EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INCOMPLETE = 3
EXIT_UNQUALIFIED = 4
EXIT_GATES_FAILED = 5
EXIT_UNEXPECTED = 70  # EX_SOFTWARE in sysexits.h
EXIT_INTERRUPTED = 130


INTERRUPT_BACKSTOP_S = 20.0
"""After Ctrl-C or SIGTERM, how long the command may take to store the results that have
arrived and release its lease (normally well under a second) before it is ended anyway,
still with exit 130: no stuck thread, lock or database can keep it open for good. Longer
than ``demo`` may take to stop its model server (15 s)."""

_interrupted: list[int] = []  # the signals received so far


def _raise_interrupt(signum: int, frame: Any) -> None:
    """SIGINT and SIGTERM alike. The first raises KeyboardInterrupt in the main thread, so
    the command's cleanup runs (results stored, lease released; judge.runs) and ``main``
    exits 130, and arms the backstop; a second one ends the process at once (a lease left
    behind by a dead process on this host is taken over by the next run at once).

    The handler is installed here rather than in judge/runs.py: only the process's entry
    point owns its signals (a library cannot, off the main thread, and gunicorn installs
    its own), and this module owns the exit codes."""
    if _interrupted:
        os._exit(EXIT_INTERRUPTED)
    _interrupted.append(signum)
    # A raw thread, not threading.Thread: starting one of those takes a lock of the
    # threading module that the interrupted main thread may be holding at this instant.
    _thread.start_new_thread(_exit_later, (INTERRUPT_BACKSTOP_S,))
    raise KeyboardInterrupt


def _exit_later(seconds: float) -> None:
    time.sleep(seconds)
    os.write(2, b"interrupted: cleanup took too long; stopping now\n")
    os._exit(EXIT_INTERRUPTED)


def _fail(state: Context, message: str, code: int) -> None:
    """Print ``message`` (after the traceback with ``--debug``) and exit with ``code``."""
    if state.debug:
        traceback.print_exc()
    click.echo(message, err=True)
    sys.exit(code)


def main() -> None:
    """Console entry point, the one place that knows exit codes (see the root help): an
    error the user can fix is one line and exit 1, a run with results missing exits 3, a
    judge not qualified under ``--require-qualified`` exits 4, a failed gate exits 5, an
    interrupt (Ctrl-C or SIGTERM) says that finished work is kept and exits 130, and
    anything else is one line and exit 70. Tracebacks are shown only with ``--debug``."""
    signal.signal(signal.SIGINT, _raise_interrupt)
    signal.signal(signal.SIGTERM, _raise_interrupt)
    state = Context()
    try:
        cli.main(standalone_mode=False, obj=state)
    except IncompleteError as exc:
        _fail(state, str(exc), EXIT_INCOMPLETE)
    except UnqualifiedError as exc:
        _fail(state, f"error: {exc}", EXIT_UNQUALIFIED)
    except GatesFailedError as exc:
        _fail(state, str(exc), EXIT_GATES_FAILED)
    except FairJudgeError as exc:
        _fail(state, f"error: {exc}", EXIT_ERROR)
    except (click.exceptions.Abort, KeyboardInterrupt):
        if state.debug:
            traceback.print_exc()
        err().print(INTERRUPTED)
        sys.exit(EXIT_INTERRUPTED)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except Exception as exc:  # a bug, or bad input that a check above should have caught
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        _fail(
            state,
            f"error: unexpected {type(exc).__name__}: {message} "
            "(run with --debug for the traceback)",
            EXIT_UNEXPECTED,
        )
