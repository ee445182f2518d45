"""Which items of a judge run people rate: sampling designs with known inclusion probabilities
(how many items a target precision needs is in ``annotation.sample_size``).

Every design is a simple random sample without replacement inside strata whose sizes are
fixed before the items are drawn, so each item's first-order inclusion probability is
``n_h / N_h`` (drawn / population of its stratum), with ``n_h`` the stratum's expected count
when a tie made it random (see below). Agreement computed on the sample is then
weighted back to the whole run with ``judge.stats.weighted`` (weights ``1 / probability``).

Strategies (``STRATEGIES``):

- ``random``: FairMonitor's design, a simple random sample of ``size`` items (default 20 %);
  one stratum, ``all``, and every item has probability ``n / N``.
- ``stratified``: strata are judge score level x stage x sensitive factor, so rare score levels
  and small factor x stage cells are represented. Every non-empty stratum first gets
  ``min_per_stratum`` items (default 1, or all of it if smaller); the rest of the sample is
  shared in proportion to the strata's sizes by largest remainder, never more than a stratum
  holds. If the sample is too small to give every stratum its minimum, each stratum gets one
  item fewer than the minimum and the items left go, one each, to strata drawn at random
  (every stratum short of its minimum has the same chance): the *shortfall*, which strata got
  less than the minimum, is in the notes and in ``Sample.shortfall``.
- ``disagreement``: over-samples items whose judge samples disagree. An item's disagreement is
  the largest range (max - min) over its rubrics of its scored samples; it is *disagreeing*
  when that is at least ``min_range`` (default 1: any two samples differ), *agreeing*
  otherwise, and *unmeasured* when no rubric has two scored samples. The sample is shared
  among those three strata in proportion to size x rate, where the disagreeing rate is
  ``oversample`` (default 3) times the others': disagreeing items are drawn with about three
  times the probability of the rest, up to rounding and up to probability 1. A run whose
  judge drew one sample per item has no disagreement to measure: a simple random sample is
  drawn instead, ``strategy`` is ``random`` and a note says why.

An item's *judge score level* (for ``stratified``): the mean of each rubric's scored samples,
averaged over its rubrics, then put on the nearest whole score with halves going up (ICS
samples 3 and 4 -> 3.5 -> level 4; TCS 4, PCS 3, ETCS 3 -> 3.33 -> level 3). An item with
no scored sample at all is at level ``unscored``.

Ties are broken at random with the seed, never by stratum name: when the last items of an
allocation could go to several strata with exactly the same claim (equal remainders, or the
strata short of their minimum), they go to strata drawn at random. A stratum's *expected*
count is then fractional (3 items for 4 tied strata: 3/4 each), and every item's inclusion
probability is its stratum's expected count over its size: the probability of being drawn
over the seeds, which is what 1 / weight must be for the weighted estimates. A stratum that
got no item in this sample (``Sample.empty_strata``) is not represented in it, whatever its
chance was: the notes name such strata and the share of the run they hold. The tie-break
draws use their own stream, seeded with ``(seed, 1)``, so the items drawn inside a stratum
depend only on the seed and the counts (breaking a tie takes nothing from the items' stream).

Sizes: an ``int`` is a count of items, a ``float`` in (0, 1] a fraction of the run, rounded to
the nearest count with halves going up (0.2 of 72 items = 14.4 -> 14). The same units, size,
options and seed always give the same sample, whatever the order of ``units``.

>>> units = [Unit(i, "S1", "gender", {"ICS": [1 + i % 5]}) for i in range(10)]
>>> sample = draw(units, "random", 0.2, seed=0)
>>> len(sample.drawn), sample.drawn[0].inclusion_probability
(2, 0.2)
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any

import numpy as np

from annotation.errors import CampaignError

STRATEGIES = ("random", "stratified", "disagreement")
DEFAULT_SIZE = 0.2  # FairMonitor rated a 20 % random sample of its items
UNSCORED = "unscored"  # the score level of an item the judge never scored
ALL = "all"  # the one stratum of a simple random sample
DISAGREEING, AGREEING, UNMEASURED = "disagreeing", "agreeing", "unmeasured"


@dataclass(frozen=True)
class Unit:
    """One item of a judge run as the sampler sees it: ``scores`` maps each rubric to the
    judge's samples for it (None = an unscored sample)."""

    item_id: int
    stage: str
    factor: str
    scores: Mapping[str, Sequence[int | None]] = field(default_factory=dict)


@dataclass(frozen=True)
class Drawn:
    """An item in the sample, its probability of having been drawn, and its stratum."""

    item_id: int
    inclusion_probability: float
    stratum: str

    @property
    def weight(self) -> float:
        """``1 / inclusion_probability``: how many items of the run this one stands for."""
        return 1 / self.inclusion_probability


@dataclass(frozen=True)
class Sample:
    """The drawn items (sorted by id), the design that drew them, and each stratum's
    (population, drawn) counts. ``strategy`` is the design actually used (``random`` after a
    fallback); ``notes`` say in words what the user should know about it.

    ``expected`` is each stratum's expected count over the seeds (equal to the drawn count
    unless a tie was broken at random); ``shortfall`` maps each stratum that got fewer items
    than ``min_per_stratum`` asked for to (wanted, drawn)."""

    strategy: str
    drawn: list[Drawn]
    population: int
    strata: dict[str, tuple[int, int]]
    notes: list[str] = field(default_factory=list)
    expected: dict[str, float] = field(default_factory=dict)
    shortfall: dict[str, tuple[int, int]] = field(default_factory=dict)

    @property
    def empty_strata(self) -> list[str]:
        """The strata no item was drawn from, in stratum order."""
        return [k for k, (_, d) in self.strata.items() if d == 0]

    def to_dict(self) -> dict[str, Any]:
        return {
            "strategy": self.strategy,
            "population": self.population,
            "size": len(self.drawn),
            "strata": {
                k: {"population": p, "drawn": d, "expected": self.expected.get(k, float(d))}
                for k, (p, d) in self.strata.items()
            },
            "shortfall": {k: {"wanted": w, "drawn": d} for k, (w, d) in self.shortfall.items()},
            "drawn": [
                {
                    "item_id": d.item_id,
                    "inclusion_probability": d.inclusion_probability,
                    "stratum": d.stratum,
                }
                for d in self.drawn
            ],
            "notes": list(self.notes),
        }


def resolve_size(size: int | float, population: int) -> int:
    """The number of items ``size`` asks for out of ``population``: an int is a count, a float
    in (0, 1] a fraction (nearest count, halves up). CampaignError when it is not 1..population.

    >>> resolve_size(0.2, 72), resolve_size(0.25, 10), resolve_size(5, 72)
    (14, 3, 5)
    """
    if population < 1:
        raise CampaignError("the judge run has no items to sample")
    if isinstance(size, bool) or not isinstance(size, numbers.Real):
        raise CampaignError(f"size must be a count or a fraction in (0, 1], got {size!r}")
    if isinstance(size, numbers.Integral):
        n = int(size)
        if n < 1:
            raise CampaignError(f"size must be at least 1 item, got {n}")
        what = f"size {n}"
    else:
        fraction = float(size)
        if not 0 < fraction <= 1:
            raise CampaignError(
                f"a fractional size must lie in (0, 1], got {size!r} "
                "(give a whole number to ask for a count of items)"
            )
        # round() to 9 places first: 0.1 * 25 is 2.5000000000000004 in floating point.
        n = math.floor(round(fraction * population, 9) + 0.5)
        if n < 1:
            raise CampaignError(
                f"size {fraction:g} of {population} items rounds to 0 items; ask for more"
            )
        what = f"size {fraction:g}"
    if n > population:
        raise CampaignError(f"{what} is larger than the judge run, which has {population} items")
    return n


def score_level(unit: Unit) -> str:
    """The item's judge score level as text: ``"4"``, or ``"unscored"`` (see the module
    docstring)."""
    # Exact fractions: a mean of exactly x.5 must round up, whatever floating point makes of it.
    means = [
        Fraction(int(sum(scored)), len(scored))
        for samples in unit.scores.values()
        if (scored := [s for s in samples if s is not None])
    ]
    if not means:
        return UNSCORED
    return str(math.floor(sum(means) / len(means) + Fraction(1, 2)))


def disagreement(unit: Unit) -> int | None:
    """The largest range of the item's scored samples over its rubrics; None when no rubric
    has two scored samples."""
    ranges = [
        max(scored) - min(scored)
        for samples in unit.scores.values()
        if len(scored := [s for s in samples if s is not None]) >= 2
    ]
    return max(ranges) if ranges else None


def draw(
    units: Sequence[Unit], strategy: str, size: int | float, seed: int, **options: Any
) -> Sample:
    """Draw a sample of ``units`` with ``strategy`` (``STRATEGIES``); ``size`` as in
    ``resolve_size``; ``seed`` (an integer >= 0) seeds numpy's default generator (and, as
    ``(seed, 1)``, the one that breaks ties).

    Options: ``min_per_stratum`` (int >= 0, default 1) for ``stratified``; ``oversample``
    (>= 1, default 3) and ``min_range`` (int >= 1, default 1) for ``disagreement``.
    """
    if strategy not in STRATEGIES:
        raise CampaignError(
            f"unknown sampling strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}"
        )
    allowed = _OPTIONS[strategy]
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        said = ", ".join(allowed) if allowed else "none"
        raise CampaignError(
            f"option {', '.join(unknown)} does not apply to the {strategy} strategy "
            f"(its options: {said})"
        )
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise CampaignError(f"seed must be an integer >= 0, got {seed!r}")
    ordered = sorted(units, key=lambda u: u.item_id)
    ids = [u.item_id for u in ordered]
    repeated = sorted({a for a, b in zip(ids, ids[1:], strict=False) if a == b})
    if repeated:
        raise CampaignError(f"items appear more than once: {repeated[:10]}")
    n = resolve_size(size, len(ordered))
    rngs = _Rngs(np.random.default_rng(int(seed)), np.random.default_rng([int(seed), 1]))
    return _DESIGNS[strategy](ordered, n, rngs, options)


@dataclass(frozen=True)
class _Rngs:
    """The generator that draws items inside strata, and a separate one for tie-breaks (so
    breaking a tie does not change which items a stratum's draw picks)."""

    items: np.random.Generator
    ties: np.random.Generator


@dataclass
class _Allocation:
    """Items per stratum: ``counts`` in this sample, ``expected`` over the seeds (they differ
    only where a tie was broken at random)."""

    counts: list[int]
    expected: list[Fraction]

    @classmethod
    def start(cls, base: list[int]) -> _Allocation:
        return cls(list(base), [Fraction(b) for b in base])

    def add(self, h: int, k: int) -> None:
        self.counts[h] += k
        self.expected[h] += k

    def share(self, tied: list[int], k: int, rng: np.random.Generator) -> None:
        """One more item to each of ``k`` strata drawn at random among ``tied``: each of them
        gets it with probability k / len(tied)."""
        if k <= 0:
            return
        for h in tied:
            self.expected[h] += Fraction(k, len(tied))
        chosen = tied if k >= len(tied) else [tied[i] for i in rng.choice(len(tied), k, False)]
        for h in chosen:
            self.counts[h] += 1


def _random(units: list[Unit], n: int, rngs: _Rngs, _: Mapping[str, Any]) -> Sample:
    return _stratified_draw("random", {ALL: units}, _Allocation.start([n]), rngs.items, [])


def _stratified(units: list[Unit], n: int, rngs: _Rngs, options: Mapping[str, Any]) -> Sample:
    minimum = _whole(options, "min_per_stratum", default=1, lowest=0)
    strata = _group(units, lambda u: stratum_name(score_level(u), u.stage, u.factor))
    names, sizes = list(strata), [len(m) for m in strata.values()]
    wanted = [min(minimum, s) for s in sizes]
    floor = minimum
    while sum(min(floor, s) for s in sizes) > n:
        floor -= 1
    allocation = _Allocation.start([min(floor, s) for s in sizes])
    notes: list[str] = []
    if floor < minimum:
        # The minimum does not fit: every stratum gets one fewer, and the items left go one
        # each to strata short of the minimum, all with the same chance (never by name).
        short = [h for h, s in enumerate(sizes) if s > floor]
        allocation.share(short, n - sum(allocation.counts), rngs.ties)
    else:
        _proportional(allocation, sizes, [Fraction(s) for s in sizes], n, rngs.ties)
    shortfall = {
        names[h]: (w, c)
        for h, (w, c) in enumerate(zip(wanted, allocation.counts, strict=True))
        if c < w
    }
    if shortfall:
        # Strata left with no item are named in the empty-strata note below; name here only
        # those that got some items but fewer than the minimum.
        partly = [f"{k} ({d} of {w})" for k, (w, d) in shortfall.items() if d > 0]
        listed = f": {', '.join(partly[:10])}" if partly else ""
        more = f" and {len(partly) - 10} more" if len(partly) > 10 else ""
        notes.append(
            f"{n} items cannot give {minimum} to each of the {len(sizes)} strata: "
            f"{len(shortfall)} got fewer, drawn at random with the seed (each stratum short "
            f"of the minimum had the same chance){listed}{more}"
        )
    empty = [names[h] for h, c in enumerate(allocation.counts) if c == 0]
    if empty:
        table = {k: (s,) for k, s in zip(names, sizes, strict=True)}
        notes.append(empty_strata_note(table, empty, drawn=True))
    sample = _stratified_draw("stratified", strata, allocation, rngs.items, notes)
    return replace(sample, shortfall=shortfall)


def _disagreement(units: list[Unit], n: int, rngs: _Rngs, options: Mapping[str, Any]) -> Sample:
    oversample = options.get("oversample", 3)
    if (
        isinstance(oversample, bool)
        or not isinstance(oversample, numbers.Real)
        or not 1 <= float(oversample) < math.inf
    ):
        raise CampaignError(f"oversample must be a number >= 1, got {oversample!r}")
    min_range = _whole(options, "min_range", default=1, lowest=1)
    found = {u.item_id: disagreement(u) for u in units}
    if all(d is None for d in found.values()):
        note = (
            "disagreement sampling needs several judge samples per item, and no item of this "
            "run has two scored samples of one rubric: a simple random sample was drawn instead"
        )
        return _stratified_draw("random", {ALL: units}, _Allocation.start([n]), rngs.items, [note])

    def kind(u: Unit) -> str:
        d = found[u.item_id]
        return UNMEASURED if d is None else DISAGREEING if d >= min_range else AGREEING

    strata = _group(units, kind)
    sizes = [len(m) for m in strata.values()]
    rate = Fraction(float(oversample))  # exact: a float's Fraction is its binary value
    weights = [
        Fraction(s) * (rate if k == DISAGREEING else 1) for k, s in zip(strata, sizes, strict=True)
    ]
    allocation = _Allocation.start([0] * len(sizes))
    _proportional(allocation, sizes, weights, n, rngs.ties)
    said = ", ".join(
        f"{k} {c} of {s} ({c / s:.2f})"
        for k, s, c in zip(strata, sizes, allocation.counts, strict=True)
    )
    notes = [f"disagreeing items drawn at {oversample:g} times the others' rate: {said}"]
    if DISAGREEING not in strata:
        notes.append(f"no item's judge samples differ by {min_range} or more")
    return _stratified_draw("disagreement", strata, allocation, rngs.items, notes)


def _whole(options: Mapping[str, Any], name: str, *, default: int, lowest: int) -> int:
    value = options.get(name, default)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or int(value) < lowest:
        raise CampaignError(f"{name} must be an integer >= {lowest}, got {value!r}")
    return int(value)


_Design = Callable[[list[Unit], int, _Rngs, Mapping[str, Any]], Sample]
_DESIGNS: dict[str, _Design] = {
    "random": _random,
    "stratified": _stratified,
    "disagreement": _disagreement,
}
_OPTIONS: dict[str, tuple[str, ...]] = {
    "random": (),
    "stratified": ("min_per_stratum",),
    "disagreement": ("oversample", "min_range"),
}


def _group(units: list[Unit], key: Callable[[Unit], str]) -> dict[str, list[Unit]]:
    """Units by stratum, strata in sorted order, members in item order."""
    groups: dict[str, list[Unit]] = {}
    for u in units:
        groups.setdefault(key(u), []).append(u)
    return dict(sorted(groups.items()))


def _proportional(
    allocation: _Allocation,
    sizes: list[int],
    weights: list[Fraction],
    n: int,
    rng: np.random.Generator,
) -> None:
    """Add to ``allocation`` the rest of ``n`` shared in proportion to ``weights`` by largest
    remainder, never more than ``sizes``. A stratum whose share would fill it is filled and
    the rest shared again among the others. Exact fractions, so ties are real ties: the last
    items go to strata drawn at random among those whose remainder equals the cut-off."""
    counts = allocation.counts
    left = n - sum(counts)
    while left > 0:
        open_ = [h for h, (c, s) in enumerate(zip(counts, sizes, strict=True)) if c < s]
        total = sum(weights[h] for h in open_)
        quota = {h: left * weights[h] / total for h in open_}
        full = [h for h in open_ if counts[h] + quota[h] >= sizes[h]]
        if full:
            for h in full:
                left -= sizes[h] - counts[h]
                allocation.add(h, sizes[h] - counts[h])
            continue
        for h in open_:
            allocation.add(h, math.floor(quota[h]))
        rest = left - sum(math.floor(q) for q in quota.values())
        if rest:
            remainder = {h: quota[h] % 1 for h in open_}
            cut = sorted(remainder.values(), reverse=True)[rest - 1]
            above = [h for h in open_ if remainder[h] > cut]
            for h in above:
                allocation.add(h, 1)
            tied = [h for h in open_ if remainder[h] == cut]
            allocation.share(tied, rest - len(above), rng)
        left = 0


def _stratified_draw(
    strategy: str,
    strata: dict[str, list[Unit]],
    allocation: _Allocation,
    rng: np.random.Generator,
    notes: list[str],
) -> Sample:
    """A simple random sample of ``allocation.counts[h]`` items from each stratum, in stratum
    order; an item's inclusion probability is its stratum's expected count over its size."""
    drawn: list[Drawn] = []
    table: dict[str, tuple[int, int]] = {}
    expected: dict[str, float] = {}
    for (name, members), count, mean in zip(
        strata.items(), allocation.counts, allocation.expected, strict=True
    ):
        table[name] = (len(members), count)
        expected[name] = float(mean)
        probability = float(mean / len(members))
        picks = rng.choice(len(members), size=count, replace=False)
        drawn += [Drawn(members[i].item_id, probability, name) for i in picks]
    drawn.sort(key=lambda d: d.item_id)
    total = sum(len(m) for m in strata.values())
    return Sample(strategy, drawn, total, table, notes, expected)


def stratum_name(level: object, stage: str, factor: str) -> str:
    """A stratified design's stratum: the judge's score level, the stage and the factor."""
    return f"score {level} / {stage} / {factor}"


def stratum_stage(name: str) -> str | None:
    """The stage of a stratified design's stratum (``stratum_name``); None for a stratum that
    may hold any stage (a random sample's "all", the disagreement design's kinds).

    >>> stratum_stage("score 3 / S2 / gender"), stratum_stage("all")
    ('S2', None)
    """
    parts = name.split(" / ")
    return parts[1] if len(parts) == 3 and parts[0].startswith("score ") else None


def empty_strata_note(
    strata: Mapping[str, Sequence[int]],
    empty: Sequence[str],
    *,
    drawn: bool = False,
    whole: str = "the run",
) -> str:
    """One line naming the ``empty`` strata (of ``strata``: name -> (population, ...)) and the
    share of ``whole`` they hold, "" when there are none. ``drawn``: they got no item in the
    sample (else: none of their items was rated).

    >>> print(empty_strata_note({"a": (6, 2), "b": (2, 0)}, ["b"]))
    1 of 2 strata have no rated item: b (2 items); they hold 2 of 8 items (25 %) of the run
    """
    if not empty:
        return ""
    total = sum(int(v[0]) for v in strata.values())
    held = sum(int(strata[k][0]) for k in empty)
    named = ", ".join(
        f"{k} ({strata[k][0]} item{'' if strata[k][0] == 1 else 's'})" for k in empty[:10]
    )
    more = f" and {len(empty) - 10} more" if len(empty) > 10 else ""
    what = "got no item in this sample" if drawn else "have no rated item"
    return (
        f"{len(empty)} of {len(strata)} strata {what}: {named}{more}; they hold {held} of "
        f"{total} items ({100 * held / total:.0f} %) of {whole}"
    )
