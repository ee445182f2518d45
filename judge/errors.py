"""The exception family of the ``judge`` package.

Every error a user can cause or fix carries a message that says what to do next. The CLI
prints it (its root alone knows exit codes) and the server maps the class to its JSON error
shape and HTTP status (``server/errors.py`` alone knows HTTP codes).
"""

from __future__ import annotations


class FairJudgeError(Exception):
    """Base class: an error with a message meant for the user."""


class ConfigError(FairJudgeError):
    """The configuration file or an override is invalid."""


class InvalidInputError(FairJudgeError):
    """A file or request is invalid; ``problems`` lists ``(number, reason)`` pairs, the number
    being a file's line or, as ``unit`` says, a row's position in a batch (from 1)."""

    def __init__(
        self, message: str, problems: list[tuple[int, str]] | None = None, *, unit: str = "line"
    ) -> None:
        self.problems = problems or []
        if self.problems:
            shown = "\n".join(f"  {unit} {n}: {why}" for n, why in self.problems[:50])
            more = len(self.problems) - 50
            if more > 0:
                shown += f"\n  ... and {more} more"
            message = f"{message}\n{shown}"
        super().__init__(message)


class DatasetError(InvalidInputError):
    """A dataset file is invalid."""


class NotFoundError(FairJudgeError):
    """A named dataset, run or item does not exist."""


class EndpointError(FairJudgeError):
    """A model endpoint cannot be used (unreachable, wrong model, bad key)."""


class EmbeddedModelError(FairJudgeError):
    """The embedded model server cannot be installed, started or stopped."""


class SchemaError(FairJudgeError):
    """The database's schema is not one this version of FairJudge can upgrade."""


class IncompleteError(FairJudgeError):
    """A run finished with judgments or answers missing (calls that failed for good). The CLI
    exits with its own code (see docs/cli.md) unless ``--allow-failures`` is given."""


class OutputError(FairJudgeError):
    """A file or folder the user asked for cannot be written (no such folder, no permission,
    a disk full)."""


class StoreError(FairJudgeError):
    """The database cannot be opened: a malformed URL, a missing driver, or a server that
    cannot be reached. The message names the URL with any password masked."""


class UnqualifiedError(FairJudgeError):
    """Figures were asked for with ``--require-qualified`` (``require_qualified=true`` over
    HTTP) and a rubric used is not validated for the judge (``fairjudge checks
    qualify``). The CLI exits with its own code (see docs/cli.md); the API answers 409."""
