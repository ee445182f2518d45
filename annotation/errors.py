"""The exception family of the ``annotation`` package (user-fixable, with clear messages)."""

from __future__ import annotations

from judge.errors import DatasetError


class RatingsError(DatasetError):
    """A ratings file is invalid; ``problems`` lists (line_number, reason) pairs."""
