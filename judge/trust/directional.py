"""Counterfactual score changes tested by swap direction (issue 24).

A copy swaps both ways at once: in one answer "he" became "she", in another "she" became
"he". A judge that prefers one side's words lowers the score in one direction and raises it
in the other, so the plain mean change cancels. Here each pair is given a direction and the
changes are *oriented* so that a consistent preference adds up:

- direction of a pair, per swap kind: the net number of that kind's words the copy moved
  from side A to side B (``judge.trust.swaps.net_toward_b``, over every part of
  the item's answer). Positive: the copy moved toward B; negative: toward A; zero with words
  swapped both ways: *mixed*, reported apart and never tested (it has no direction);
- oriented difference: the score of the side-B version minus the side-A version, i.e. the
  change (copy minus original) for a pair moved toward B, and minus the change for one moved
  toward A. Negative: the judge favours side A's words.

Rows, per kind and per scope (each rubric, and "all rubrics" where there are several, with
one value per item: the mean over its rubrics, so items are the independent units): the
oriented comparison, and each direction on its own (copy minus original), which also catches
a judge that marks down any swapped text whichever way it goes. A direction row is tested
only where both directions have pairs: otherwise it is the oriented row with a sign.

Test: ``judge.stats.paired.sign_flip_test`` (exact). A row whose changed pairs are too few
for its smallest attainable p to reach alpha is not tested ("too few pairs to detect a
shift") and stays out of the family. The family is every tested row the report shows; Holm's
correction keeps the chance of any false flag at or below alpha whatever the dependence
between rows (they share pairs). Holm rather than Benjamini-Yekutieli: an audit's reader acts
on any single flag, so the error to bound is a false flag anywhere (family-wise), and for the
small families here Holm is the more powerful of the two methods valid under dependence.

Rows not flagged get an equivalence verdict (``judge.stats.paired.equivalence_test``): "no
shift larger than MARGIN" when the data rule it out, "inconclusive" when they are too few.
Checking every row at alpha makes "no row shifts more than MARGIN" a valid joint claim too
(intersection-union: no correction needed for claiming all of them).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from judge.stats.paired import (
    bootstrap_mean_ci,
    equivalence_test,
    holm,
    min_detectable_shift,
    sign_flip_test,
)

ALPHA = 0.05
MARGIN = 0.25
"""Default equivalence margin, in score points (on a 1-5 scale)."""
BOUND = 4.0
"""The largest possible score change on a 1-5 scale (for the equivalence bound)."""
ALL_RUBRICS = "all rubrics"
ORIENTED, TOWARD_A, TOWARD_B, MIXED = "oriented", "toward A", "toward B", "mixed"


@dataclass(frozen=True)
class PairScore:
    """One item's score for one rubric before and after the swap, with the swap's net
    direction for one kind: +1 toward side B, -1 toward A, 0 mixed."""

    item_id: int
    rubric: str
    direction: int
    before: float
    after: float


@dataclass(frozen=True)
class DirectionRow:
    """One tested (or reported) comparison. ``mean`` is the oriented difference (B minus A)
    for the oriented row and the change (copy minus original) for the others."""

    kind: str
    scope: str
    direction: str
    label: str
    n: int
    changed: int
    mean: float
    ci_low: float
    ci_high: float
    p_value: float | None
    min_p: float
    method: str
    tested: bool
    reason: str | None
    equivalence_p: float | None
    equivalence: str
    p_adjusted: float | None = None
    flagged: bool = False
    finding: str | None = None
    min_detectable_shift: float | None = None
    power_note: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {k: (None if isinstance(v, float) and v != v else v) for k, v in vars(self).items()}


def pair_rows(
    kind: str,
    sides: tuple[str, str],
    pairs: Sequence[PairScore],
    *,
    alpha: float = ALPHA,
    margin: float = MARGIN,
    level: float = 0.95,
    n_bootstrap: int = 2000,
    bound: float = BOUND,
) -> list[DirectionRow]:
    """The rows of one kind (raw p-values; ``correct`` adds the family's correction)."""
    a, b = sides
    rubrics = sorted({p.rubric for p in pairs})
    scopes = [*rubrics, *([ALL_RUBRICS] if len(rubrics) > 1 else [])]
    rows = []
    for scope in scopes:
        chosen = [p for p in pairs if scope in (ALL_RUBRICS, p.rubric)]
        by_direction = {d: _per_item(chosen, d) for d in (1, -1, 0)}
        oriented = np.concatenate([by_direction[1], -by_direction[-1]])
        both = by_direction[1].size > 0 and by_direction[-1].size > 0
        specs = [
            (ORIENTED, f"oriented: {b} version minus {a} version", oriented, True),
            (TOWARD_B, f"swapped toward {b} ({a} -> {b})", by_direction[1], both),
            (TOWARD_A, f"swapped toward {a} ({b} -> {a})", by_direction[-1], both),
            (MIXED, "mixed (as many words swapped each way)", by_direction[0], False),
        ]
        for direction, label, values, testable in specs:
            if values.size == 0 and direction != ORIENTED:
                continue
            rows.append(
                _row(kind, scope, direction, label, values, testable, alpha, margin, level,
                     n_bootstrap, bound)
            )  # fmt: skip
    return rows


def _per_item(pairs: Sequence[PairScore], direction: int) -> np.ndarray:
    """One value per item: the mean change (copy minus original) over its rubrics."""
    changes: dict[int, list[float]] = defaultdict(list)
    for p in pairs:
        if p.direction == direction:
            changes[p.item_id].append(p.after - p.before)
    return np.array([float(np.mean(v)) for _, v in sorted(changes.items())], dtype=float)


def _row(
    kind: str,
    scope: str,
    direction: str,
    label: str,
    values: np.ndarray,
    testable: bool,
    alpha: float,
    margin: float,
    level: float,
    n_bootstrap: int,
    bound: float,
) -> DirectionRow:
    n = int(values.size)
    changed = int(np.count_nonzero(values))
    mean = float(values.mean()) if n else float("nan")
    low, high = bootstrap_mean_ci(values, level=level, n_bootstrap=n_bootstrap)
    test = sign_flip_test(values)
    p: float | None = test.p_value if n else None
    reason = None
    if not n:
        testable, reason = False, "no pairs with a direction"
    elif direction == MIXED:
        p, reason = None, "no net direction"
    elif not testable:
        reason = "same pairs as the oriented row"
    elif not changed:
        testable, reason = False, "no score changed"
    elif test.min_p > alpha:
        testable = False
        reason = (
            f"too few pairs to detect a shift: with {changed} changed, no p below "
            f"{test.min_p:.3g} > {alpha:g}"
        )
    eq = equivalence_test(values, margin=margin, alpha=alpha, bound=bound) if n else None
    verdict = "n/a"
    if eq is not None and direction != MIXED:
        verdict = f"no shift larger than {margin:g}" if eq.equivalent else "inconclusive"
    mds, note = _power(values, changed, test.min_p, alpha)
    return DirectionRow(
        kind, scope, direction, label, n, changed, mean, low, high, p, test.min_p,
        test.method, testable, reason, eq.p_value if eq is not None else None, verdict,
        min_detectable_shift=mds, power_note=note,
    )  # fmt: skip


def _power(
    values: np.ndarray, changed: int, min_p: float, alpha: float
) -> tuple[float | None, str | None]:
    """The row's minimum detectable shift (80 % power, two-sided at ``alpha``, from the
    differences' sd and n) and a note when the row could not have reached significance."""
    n = int(values.size)
    if n < 2:
        return None, "fewer than two pairs: no shift can be detected"
    sd = float(values.std(ddof=1))
    if sd == 0 and not changed:
        return None, (
            "no score changed, so these pairs could detect no shift and the smallest "
            "detectable one cannot be estimated from them"
        )
    if sd == 0:
        return None, "every pair moved by the same amount (sd 0): no t-based estimate"
    mds = min_detectable_shift(sd, n, alpha=alpha)
    if min_p > alpha:
        return mds, (
            f"cannot reach significance: with {changed} changed pairs no p falls below "
            f"{min_p:.3g} > {alpha:g}"
        )
    return mds, None


def correct(
    rows: Sequence[DirectionRow],
    sides: dict[str, tuple[str, str]],
    *,
    alpha: float = ALPHA,
    tolerance: float = 0.0,
) -> list[DirectionRow]:
    """The rows with Holm-adjusted p-values over every tested row, and flags: adjusted p at
    most alpha and the mean's size above ``tolerance``. A flagged row names what it found."""
    tested = [i for i, r in enumerate(rows) if r.tested and r.p_value is not None]
    adjusted = holm([rows[i].p_value for i in tested])  # type: ignore[misc]
    out = list(rows)
    for i, p in zip(tested, adjusted, strict=True):
        r = rows[i]
        flag = p <= alpha and abs(r.mean) > tolerance
        finding = None
        if flag:
            a, b = sides[r.kind]
            if r.direction == ORIENTED:
                finding = f"favours the {a if r.mean < 0 else b} side"
            else:
                toward = b if r.direction == TOWARD_B else a
                move = "drops" if r.mean < 0 else "rises"
                finding = f"score {move} when swapped toward the {toward} side"
        verdict = "shift found" if flag else r.equivalence
        out[i] = replace(r, p_adjusted=p, flagged=flag, finding=finding, equivalence=verdict)
    return out


def summary(rows: Sequence[DirectionRow], margin: float, alpha: float = ALPHA) -> list[str]:
    """One line per kind: what was flagged, or whether the data rule out a shift."""
    lines = []
    for kind in dict.fromkeys(r.kind for r in rows):
        mine = [r for r in rows if r.kind == kind]
        found = [f"{r.scope}: {r.finding}" for r in mine if r.flagged]
        if found:
            lines.append(f"{kind}: flagged ({'; '.join(found)}).")
            continue
        oriented = [r for r in mine if r.direction == ORIENTED]
        if oriented and all(r.equivalence.startswith("no shift") for r in oriented):
            lines.append(
                f"{kind}: nothing flagged, and every oriented row rules out a shift larger "
                f"than {margin:g} points (equivalence, two one-sided tests at {alpha:g})."
            )
        else:
            unclear = [r.scope for r in oriented if not r.equivalence.startswith("no shift")]
            lines.append(
                f"{kind}: nothing flagged, but inconclusive: too few pairs to rule out a shift "
                f"of {margin:g} points ({', '.join(unclear)})."
            )
    return lines
