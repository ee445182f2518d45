"""The exception family of the ``judge`` package.

Every error a user can cause or fix carries a message that says what to do next; the CLI
prints it and the server maps it to its JSON error shape.
"""

from __future__ import annotations


class FairJudgeError(Exception):
    """Base class: an error with a message meant for the user."""

    status_code = 400


class ConfigError(FairJudgeError):
    """The configuration file or an override is invalid."""


class DatasetError(FairJudgeError):
    """A dataset file is invalid; ``problems`` lists ``(line_number, reason)`` pairs."""

    def __init__(self, message: str, problems: list[tuple[int, str]] | None = None) -> None:
        self.problems = problems or []
        if self.problems:
            shown = "\n".join(f"  line {n}: {why}" for n, why in self.problems[:50])
            more = len(self.problems) - 50
            if more > 0:
                shown += f"\n  ... and {more} more"
            message = f"{message}\n{shown}"
        super().__init__(message)


class NotFoundError(FairJudgeError):
    """A named dataset, run or item does not exist."""

    status_code = 404


class EndpointError(FairJudgeError):
    """A model endpoint cannot be used (unreachable, wrong model, bad key)."""

    status_code = 502


class EmbeddedModelError(FairJudgeError):
    """The embedded model server cannot be installed, started or stopped."""

    status_code = 500
