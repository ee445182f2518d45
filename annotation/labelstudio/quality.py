"""How each annotator of a campaign compares with the others and with gold ratings.

Pure statistics over ``{annotator: {(item key, rubric): score}}``; ``campaign status`` reads
the scores live from Label Studio and shows what these functions return.

- **Offset**: against each other annotator, per item both rated, the annotator's score minus
  the other's, averaged over the item's rubrics (the rubrics of one item are not
  independent, so the item is the unit); then the mean over the shared items with a 95 %
  Student t interval. An annotator is flagged when, against *every* other annotator it shares
  at least ``MIN_OFFSET_ITEMS`` items with, the whole interval lies beyond the margin
  (default 0.5 levels) on the same side: harsher (or more lenient) than each of them by more
  than the margin, with 95 % confidence. Comparing pairwise, not with the others' mean, keeps
  a harsh annotator from making the fair ones look lenient (with three annotators, the mean
  of "the others" of a fair one includes the harsh one). With only two annotators, both are
  flagged when they differ: the data cannot tell which one is off.
- **Agreement**: Cohen's quadratic-weighted kappa of the annotator with each other annotator
  on the ratings they share (at least ``MIN_PAIR_RATINGS`` of them); the best of these is
  kept, so an annotator is flagged only when it agrees poorly with *every* other one (a mean
  would let one careless annotator drag the careful ones below the threshold). The weights
  use the score values, ``1 - mean((x - y)^2) / (var x + var y + (mean x - mean y)^2)``
  (population variances), which is Cohen's quadratic kappa for integer levels and needs no
  list of labels. Flagged below a threshold (default 0.4).
- **Gold**: on items whose correct scores are known, the share of exact matches and the mean
  absolute error of each annotator.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

Key = tuple[str, str]  # (item key, rubric)
Scores = Mapping[str, Mapping[Key, float]]  # annotator -> ratings

OFFSET_MARGIN = 0.5  # levels: an offset confidently beyond this is flagged
MIN_KAPPA = 0.4  # quadratic-weighted kappa with the others below this is flagged
MIN_OFFSET_ITEMS = 5  # shared items before an offset is estimated
MIN_PAIR_RATINGS = 10  # shared ratings before a kappa with one other annotator counts
CONFIDENCE = 0.95


@dataclass(frozen=True)
class Offset:
    """Mean of the annotator's per-item differences from one other annotator, with its t
    interval."""

    other: str
    mean: float
    ci_low: float
    ci_high: float
    n_items: int

    def side(self, margin: float) -> int:
        """+1 (-1) when the whole interval lies above ``margin`` (below ``-margin``), else 0."""
        return 1 if self.ci_low > margin else -1 if self.ci_high < -margin else 0

    def to_dict(self) -> dict[str, float | int | str]:
        return {
            "other": self.other,
            "mean": self.mean,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "n_items": self.n_items,
        }


@dataclass(frozen=True)
class Offsets:
    """An annotator's offsets from each other annotator it shares enough items with."""

    pairs: tuple[Offset, ...]

    @property
    def closest(self) -> Offset:
        """The offset from the annotator it differs least from (on average)."""
        return min(self.pairs, key=lambda o: (abs(o.mean), o.other))

    def side(self, margin: float) -> int:
        """+1 (-1) when the offset from every other annotator lies confidently above
        ``margin`` (below ``-margin``), else 0."""
        sides = {o.side(margin) for o in self.pairs}
        return sides.pop() if len(sides) == 1 else 0

    def to_dict(self) -> dict[str, Any]:
        return {**self.closest.to_dict(), "pairs": [o.to_dict() for o in self.pairs]}


@dataclass(frozen=True)
class Agreement:
    """The best quadratic-weighted kappa of the annotator with another annotator it shares
    enough ratings with."""

    kappa: float
    other: str  # the annotator it agrees with best
    n_ratings: int  # ratings shared with that one
    n_annotators: int  # others with at least MIN_PAIR_RATINGS shared ratings

    def to_dict(self) -> dict[str, float | int | str]:
        return {
            "kappa": self.kappa,
            "other": self.other,
            "n_ratings": self.n_ratings,
            "n_annotators": self.n_annotators,
        }


@dataclass(frozen=True)
class GoldAccuracy:
    """An annotator's ratings of gold items against their known scores."""

    n: int
    exact: float  # share of ratings equal to the gold score
    mae: float  # mean absolute error, in levels

    def to_dict(self) -> dict[str, float | int]:
        return {"n": self.n, "exact": self.exact, "mae": self.mae}


def offset(
    scores: Scores,
    who: str,
    *,
    confidence: float = CONFIDENCE,
    min_items: int = MIN_OFFSET_ITEMS,
) -> Offsets | None:
    """``who``'s offsets from each other annotator (see the module), those sharing at least
    ``min_items`` items with it; None when there is none."""
    pairs = []
    for other in sorted(scores):
        if other != who:
            found = pair_offset(scores[who], scores[other], other, confidence=confidence)
            if found is not None and found.n_items >= max(2, min_items):
                pairs.append(found)
    return Offsets(tuple(pairs)) if pairs else None


def pair_offset(
    mine: Mapping[Key, float],
    theirs: Mapping[Key, float],
    other: str,
    *,
    confidence: float = CONFIDENCE,
) -> Offset | None:
    """Mean per-item difference ``mine - theirs`` over the items both rated (each item's
    difference averaged over its shared rubrics), with a Student t interval; None with fewer
    than two shared items."""
    from scipy.stats import t

    per_item: dict[str, list[float]] = defaultdict(list)
    for key in sorted(set(mine) & set(theirs)):
        per_item[key[0]].append(mine[key] - theirs[key])
    diffs = [statistics.fmean(v) for v in per_item.values()]
    n = len(diffs)
    if n < 2:
        return None
    mean = statistics.fmean(diffs)
    half = float(t.ppf((1 + confidence) / 2, n - 1)) * statistics.stdev(diffs) / math.sqrt(n)
    return Offset(other, mean, mean - half, mean + half, n)


def quadratic_kappa(x: list[float], y: list[float]) -> float:
    """Cohen's quadratic-weighted kappa of two raters' paired scores; NaN when undefined (both
    raters give one and the same score throughout).

    >>> quadratic_kappa([1, 2, 3], [1, 2, 3])
    1.0
    """
    if len(x) != len(y) or not x:
        raise ValueError("x and y must be non-empty and of the same length")
    mx, my = statistics.fmean(x), statistics.fmean(y)
    expected = statistics.pvariance(x) + statistics.pvariance(y) + (mx - my) ** 2
    if expected == 0:
        return math.nan
    observed = statistics.fmean((a - b) ** 2 for a, b in zip(x, y, strict=True))
    return 1 - observed / expected


def agreement(
    scores: Scores, who: str, *, min_pair_ratings: int = MIN_PAIR_RATINGS
) -> Agreement | None:
    """``who``'s best quadratic-weighted kappa with another annotator (see the module); None
    when no other annotator shares ``min_pair_ratings`` ratings with it (or every such kappa
    is undefined)."""
    mine = scores.get(who, {})
    found: list[tuple[float, str, int]] = []
    for other in sorted(scores):
        shared = sorted(set(mine) & set(scores[other])) if other != who else []
        if len(shared) < min_pair_ratings:
            continue
        kappa = quadratic_kappa([mine[k] for k in shared], [scores[other][k] for k in shared])
        if not math.isnan(kappa):
            found.append((kappa, other, len(shared)))
    if not found:
        return None
    kappa, other, n = max(found, key=lambda f: f[0])
    return Agreement(kappa, other, n, len(found))


def gold_accuracy(
    mine: Mapping[Key, float], gold: Mapping[str, Mapping[str, float]]
) -> GoldAccuracy | None:
    """Exact-match share and mean absolute error of one annotator's ratings on gold items
    (``gold``: item key -> rubric -> known score); None when it rated no gold rating."""
    errors = [
        abs(value - gold[item][rubric])
        for (item, rubric), value in mine.items()
        if rubric in gold.get(item, {})
    ]
    if not errors:
        return None
    return GoldAccuracy(
        len(errors), sum(e == 0 for e in errors) / len(errors), statistics.fmean(errors)
    )
