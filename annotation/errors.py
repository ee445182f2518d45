"""The exception family of the ``annotation`` package (user-fixable, with clear messages)."""

from __future__ import annotations

from judge.errors import FairJudgeError, InvalidInputError


class RatingsError(InvalidInputError):
    """A ratings file is invalid; ``problems`` lists (line_number, reason) pairs."""


class LabelStudioError(FairJudgeError):
    """Label Studio cannot be installed, started, reached or used (a busy port, a wrong token,
    a server that stopped answering); the message says what to fix."""


class CampaignError(InvalidInputError):
    """A campaign request or a pulled annotation is invalid; ``problems`` lists the details."""
