"""Ratings in long format (item, rater, score) as a raters x items matrix, missing allowed."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from judge.stats.bootstrap import Array


@dataclass(frozen=True)
class RatingMatrix:
    """Ratings as a raters x items matrix with NaN where a rater did not rate an item."""

    items: list[str]
    raters: list[str]
    values: Array  # (n_raters, n_items)

    @classmethod
    def from_long(
        cls, item_ids: Sequence[Any], raters: Sequence[Any], scores: ArrayLike
    ) -> RatingMatrix:
        item_ids = [str(i) for i in item_ids]
        raters = [str(r) for r in raters]
        values = np.asarray(scores, dtype=float)
        if not (len(item_ids) == len(raters) == values.size):
            raise ValueError("item_ids, raters and scores must have the same length")
        items = sorted(set(item_ids), key=_natural)
        people = sorted(set(raters), key=_natural)
        ii = {k: i for i, k in enumerate(items)}
        ri = {k: i for i, k in enumerate(people)}
        matrix = np.full((len(people), len(items)), np.nan)
        for item, rater, score in zip(item_ids, raters, values, strict=True):
            if not np.isnan(matrix[ri[rater], ii[item]]):
                raise ValueError(f"rater {rater!r} rated item {item!r} more than once")
            matrix[ri[rater], ii[item]] = score
        return cls(items, people, matrix)

    def item_scores(self, how: str = "mean") -> Array:
        """The human score per item: mean (default, as in FairMonitor) or median; NaN for an
        item nobody rated."""
        if how == "mean":
            return column_means(self.values)
        if how == "median":
            out = np.full(self.values.shape[1], np.nan)
            rated = np.any(~np.isnan(self.values), axis=0)
            out[rated] = np.nanmedian(self.values[:, rated], axis=0)
            return out
        raise ValueError(f"how must be 'mean' or 'median', got {how!r}")

    def columns(self, items: Sequence[str]) -> RatingMatrix:
        """The same raters on ``items`` only (in that order)."""
        index = {item: i for i, item in enumerate(self.items)}
        return RatingMatrix(list(items), self.raters, self.values[:, [index[i] for i in items]])


def column_means(values: Array) -> Array:
    """``np.nanmean(values, axis=0)`` (same arithmetic), NaN for an all-NaN column without
    numpy's "mean of empty slice" warning."""
    rated = ~np.isnan(values)
    counts = rated.sum(axis=0)
    totals = np.where(rated, values, 0.0).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):  # 0/0 -> NaN is the answer here
        return np.asarray(totals / counts)


def _natural(key: str) -> tuple[int, Any]:
    return (0, int(key)) if key.isdigit() else (1, key)
