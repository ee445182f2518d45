"""The ``fairjudge`` command run inside the test process: the same ``main`` as the console
script (its exit codes, its one ``error:`` line, no traceback without ``--debug``), without
the second or so a fresh interpreter takes to start and import the CLI.

Only what the command itself must do in a process of its own stays a subprocess (signals,
kills, two processes at once, which modules a command imports, the real console script);
the cases that keep a true process say why.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from server import cli as cli_module


@dataclass(frozen=True)
class Done:
    """How a command ended, named as in ``subprocess.CompletedProcess`` so that one check
    reads both: the exit code and what it printed on stdout and stderr."""

    returncode: int
    stdout: str
    stderr: str


def exit_code(code: object) -> int:
    """The process exit code that ``sys.exit(code)`` gives: None is 0, an int is itself,
    anything else is printed and gives 1 (as the interpreter does)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    return 1


def fairjudge(
    *args: str | Path, cwd: Path | None = None, env: Mapping[str, str | None] | None = None
) -> Done:
    """Run ``fairjudge ARGS`` through ``server.cli.main`` in this process and return its exit
    code, stdout and stderr.

    What the run changes is put back afterwards: stdin/stdout/stderr, ``os.environ`` (with
    ``env`` applied during the run) and click's terminal helpers (by click's own
    ``CliRunner.isolation``), ``sys.argv``, the working directory (``cwd`` during the run) and
    the SIGINT and SIGTERM handlers that ``main`` installs for the process it thinks it owns;
    the store's engine that the command opened is closed.
    """
    argv = ["fairjudge", *map(str, args)]
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    old_argv, old_cwd, context = sys.argv, os.getcwd(), cli_module.Context
    made: list[cli_module.Context] = []

    class Recorded(context):  # type: ignore[valid-type,misc]
        """main's Context, remembered so that its engine can be closed after the run."""

        def __init__(self, *a: Any, **kw: Any) -> None:
            super().__init__(*a, **kw)
            made.append(self)

    code = 0
    with CliRunner().isolation(env=env) as (stdout, stderr, _):
        sys.argv = argv
        cli_module.Context = Recorded  # type: ignore[misc]
        try:
            if cwd is not None:
                os.chdir(cwd)
            cli_module.main()
        except SystemExit as exc:
            code = exit_code(exc.code)
        finally:
            cli_module.Context = context  # type: ignore[misc]
            # The console script's connections close when its process ends; here the
            # store's engine must be closed, or its connections outlive the run.
            for state in made:
                if state._engine is not None:
                    state._engine.dispose()
            sys.argv = old_argv
            os.chdir(old_cwd)
            for sig, handler in handlers.items():
                if handler is not None:  # None: set outside Python, cannot be put back
                    signal.signal(sig, handler)
            sys.stdout.flush()
            sys.stderr.flush()
        out, err = stdout.getvalue(), stderr.getvalue()
    return Done(code, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"))
