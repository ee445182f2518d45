"""The exception family of the ``annotation`` package (user-fixable, with clear messages)."""

from __future__ import annotations

from judge.errors import InvalidInputError


class RatingsError(InvalidInputError):
    """A ratings file is invalid; ``problems`` lists (line_number, reason) pairs."""
