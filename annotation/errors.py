"""The exception family of the ``annotation`` package (user-fixable, with clear messages)."""

from __future__ import annotations

from judge.errors import FairJudgeError, InvalidInputError


class RatingsError(InvalidInputError):
    """A ratings file is invalid; ``problems`` lists (line_number, reason) pairs."""


class LabelStudioError(FairJudgeError):
    """Label Studio cannot be installed, started, reached or used (a busy port, a wrong token,
    a server that stopped answering); the message says what to fix."""


class LabelStudioTimeoutError(LabelStudioError):
    """Label Studio did not answer one request in time (it may still be at work on it)."""


class CampaignError(InvalidInputError):
    """A campaign request or a pulled annotation is invalid; ``problems`` lists the details."""


class TaskProblemsError(CampaignError):
    """Annotations a pull could not store; ``problems`` lists (Label Studio task id, reason)
    pairs, shown as ``task 123: reason`` (the id Label Studio shows on the task's page)."""

    def __init__(self, message: str, problems: list[tuple[int, str]]) -> None:
        shown = "\n".join(f"  task {n}: {why}" for n, why in problems[:50])
        if len(problems) > 50:
            shown += f"\n  ... and {len(problems) - 50} more"
        super().__init__(f"{message}\n{shown}" if problems else message)
        self.problems = problems
