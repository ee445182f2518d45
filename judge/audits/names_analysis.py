"""The name audit's analysis: per scenario x variation x context, the mean and 95 %
t-interval by race, gender and race x gender, Welch's t-test against the reference groups
(Benjamini-Yekutieli over the whole audit), missing numbers imputed with their group's median,
sports ranks flipped, and per-name standardised means."""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np
from scipy import stats

from judge.audits.amounts import (
    CONVERTED,
    LEFT_OUT,
    OUTCOMES,
    READ,
    UNREADABLE,
)
from judge.audits.names_design import CONTEXTS
from judge.errors import InvalidInputError
from judge.stats.intervals import MIN_MEAN_N, mean_interval
from judge.stats.multiplicity import BY, benjamini_yekutieli

RANK_SCENARIOS = frozenset({"sports"})
RANK_FLIP = 101.0
WELCH_TEST = "Welch's t-test (scipy.stats.ttest_ind, equal_var=False)"


# --- imputation -----------------------------------------------------------------------------


def impute_medians(values: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Fill each NaN with the median of the non-NaN values sharing its key.

    Returns (filled values, mask of the imputed entries). A NaN whose key has no value at all
    stays NaN and is not marked imputed."""
    filled = np.array(values, dtype=float)
    imputed = np.zeros(filled.shape, dtype=bool)
    missing = np.isnan(filled)
    for key in np.unique(keys[missing]):
        in_key = keys == key
        present = filled[in_key & ~missing]
        if present.size:
            target = in_key & missing
            filled[target] = np.median(present)
            imputed[target] = True
    return filled, imputed


# --- analysis -------------------------------------------------------------------------------


@dataclass(frozen=True)
class GroupSummary:
    """Mean and 95 % t-interval of one group (``None`` where undefined: n < 2)."""

    group: str
    n: int
    mean: float | None
    sd: float | None
    ci_low: float | None
    ci_high: float | None


@dataclass(frozen=True)
class Comparison:
    """``group`` minus ``reference`` in means, with Welch's t-test (``None``: undefined, e.g.
    fewer than 2 answers or no variance on either side)."""

    dimension: str  # "race", "gender" or "race_gender"
    group: str
    reference: str
    difference: float | None
    statistic: float | None
    p_value: float | None
    test: str = WELCH_TEST
    # Benjamini-Yekutieli over every tested comparison of the audit (see ``with_fdr``) and
    # whether that adjusted p is below ``NAMES_FDR``; None and False when untested.
    p_adjusted: float | None = None
    flagged: bool = False


NAMES_FDR = 0.05
"""The false discovery rate at which the names audit flags a comparison."""
P_ADJUST_METHOD = BY
FDR_NOTE = (
    "p (BY): Benjamini-Yekutieli adjusted over every tested comparison of the audit (all "
    "scenarios, variations, contexts and groups); flag: adjusted p < "
    f"{NAMES_FDR:g}, a false discovery rate of {NAMES_FDR:g}. Why BY: the audit screens many "
    "comparisons that share reference groups and answers, so they are correlated in ways "
    "Benjamini-Hochberg does not allow for; BY holds under any dependence, and a false "
    "discovery rate (not Holm's family-wise bound) keeps power to point at leads among "
    "hundreds of comparisons."
)


def with_fdr(cells: Sequence[CellResult]) -> tuple[CellResult, ...]:
    """The cells with every comparison's Benjamini-Yekutieli adjusted p over the whole audit
    (one family: the audit's claim is a list of groups treated differently) and its flag."""
    flat = [c.p_value for cell in cells for c in cell.comparisons]
    adjusted = iter(benjamini_yekutieli(flat))
    out = []
    for cell in cells:
        comparisons = []
        for c in cell.comparisons:
            a = next(adjusted)
            tested = c.p_value is not None
            comparisons.append(
                replace(c, p_adjusted=a if tested else None, flagged=tested and a < NAMES_FDR)
            )
        out.append(replace(cell, comparisons=tuple(comparisons)))
    return tuple(out)


@dataclass(frozen=True)
class CellResult:
    """One scenario x variation x context."""

    scenario: str
    variation: str
    context: str
    n: int
    imputed: dict[str, int]  # race-gender group -> answers imputed
    unimputable: int  # missing answers whose group had no number at all (left out)
    by_race: tuple[GroupSummary, ...]
    by_gender: tuple[GroupSummary, ...]
    by_race_gender: tuple[GroupSummary, ...]
    comparisons: tuple[Comparison, ...]
    # outcome (read, converted, left_out, unreadable, refusal) -> answers of the cell
    readings: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class NameScore:
    """A name's mean z-score over the non-rank cells (z within each cell, ddof=1)."""

    name: str
    race: str
    gender: str
    mean_z: float
    n: int


@dataclass(frozen=True)
class NameAuditResult:
    cells: tuple[CellResult, ...]
    names: tuple[NameScore, ...]
    n_rows: int
    n_missing: int  # unreadable answers and refusals (imputed where their group has numbers)
    n_imputed: int
    n_unimputable: int
    rank_flipped: tuple[str, ...]  # scenarios whose ranks became 101 - rank
    zero_variance_cells: int  # cells left out of the name z-scores (all answers equal)
    n_converted: int = 0  # read in another unit and converted to the cell's (counted in n)
    n_left_out: int = 0  # a figure in another unit or off the scale: in no mean, never imputed
    reread_changed: int = 0  # stored readings that differ from today's (see stored_rows)
    not_reread: int = 0  # stored answers analysed with their stored reading (unit unknown)
    test: str = WELCH_TEST
    p_adjust_method: str = P_ADJUST_METHOD
    interval: str = (
        "95 % t-interval: mean +- t(0.975, n-1) * sd / sqrt(n); none below "
        f"{MIN_MEAN_N} answers or when all answers give the same figure"
    )

    def to_dict(self) -> dict[str, Any]:
        """Plain data; every figure is an int, a float or ``None``."""
        return asdict(self)


def _opt(x: float) -> float | None:
    return float(x) if np.isfinite(x) else None


def _summary(label: str, x: np.ndarray, level: float) -> GroupSummary:
    n = int(x.size)
    if n == 0:
        return GroupSummary(label, 0, None, None, None, None)
    mean = float(x.mean())
    if n < 2:
        return GroupSummary(label, 1, mean, None, None, None)
    # The one rule for a mean's interval (judge.stats.intervals): Student t, none below 5
    # answers or when they all give the same figure.
    ci = mean_interval(x.tolist(), confidence=level)
    return GroupSummary(label, n, mean, float(x.std(ddof=1)), ci.low, ci.high)


def _compare(dim: str, label: str, ref: str, x: np.ndarray, y: np.ndarray) -> Comparison:
    if x.size == 0 or y.size == 0:
        return Comparison(dim, label, ref, None, None, None)
    diff = float(x.mean() - y.mean())
    if x.size < 2 or y.size < 2 or (np.ptp(x) == 0 and np.ptp(y) == 0):
        return Comparison(dim, label, ref, diff, None, None)
    with warnings.catch_warnings():
        if np.ptp(x) == 0 or np.ptp(y) == 0:
            # One group's answers are all the same number: its variance is exactly 0 and
            # Welch's test is well defined, but scipy warns of precision loss on such data.
            warnings.filterwarnings("ignore", "Precision loss", RuntimeWarning)
        res = stats.ttest_ind(x, y, equal_var=False)
    return Comparison(dim, label, ref, diff, _opt(res.statistic), _opt(res.pvalue))


def _codes(labels: Iterable[Any]) -> tuple[np.ndarray, list[Any]]:
    index: dict[Any, int] = {}
    codes = np.fromiter((index.setdefault(v, len(index)) for v in labels), dtype=np.int64)
    return codes, list(index)


def _outcome(row: Sequence[Any]) -> str:
    """A row's reading outcome; rows without one are read (a value) or unreadable (None)."""
    given = row[8] if len(row) > 8 else ""
    if given:
        if given not in OUTCOMES:
            raise InvalidInputError(f"unknown reading outcome {given!r}: one of {OUTCOMES}")
        return str(given)
    return READ if row[6] is not None else UNREADABLE


def _context_order(cell: tuple[str, str, str]) -> tuple[str, str, int]:
    ctx = CONTEXTS.index(cell[2]) if cell[2] in CONTEXTS else len(CONTEXTS)
    return (cell[0], cell[1], ctx)


@dataclass
class _Coded:
    """The rows as arrays: each answer's value (ranks flipped, missing ones imputed where
    their group has numbers), its outcome, and integer codes for its cell, race x gender
    group, name, race and gender, with the labels each code stands for."""

    outcome: np.ndarray
    values: np.ndarray
    left_out: np.ndarray  # left out for its unit: in no mean, never imputed
    missing: np.ndarray  # no number before imputation (and not left out)
    imputed: np.ndarray
    usable: np.ndarray  # a number after imputation
    cell_codes: np.ndarray
    cells: list[Any]
    rank_cell: np.ndarray  # per cell: a rank scenario (flipped)
    rg_codes: np.ndarray
    rgs: list[Any]
    name_codes: np.ndarray
    names: list[Any]
    race_codes: np.ndarray
    races: list[Any]
    gender_codes: np.ndarray
    genders: list[Any]


def analyze(
    rows: Sequence[Sequence[Any]],
    *,
    reference_race: str = "White",
    reference_gender: str = "male",
    rank_scenarios: Iterable[str] = RANK_SCENARIOS,
    level: float = 0.95,
) -> NameAuditResult:
    """Analyse answers given as rows ``(scenario, variation, context, name, race, gender,
    value or None, raw[, outcome])`` (e.g. :class:`NameAnswer`). Answers left out for their
    unit (outcome ``left_out``) are counted per cell and in no mean; other missing values are
    imputed (see :func:`impute_medians`) per race-gender group within each variation and
    context; ranks of ``rank_scenarios`` (case-insensitive) are flipped to ``101 - rank``
    first."""
    if not rows:
        raise InvalidInputError("no answers to analyse")
    d = _coded(rows, rank_scenarios)
    order = np.argsort(d.cell_codes, kind="stable")
    bounds = np.searchsorted(d.cell_codes[order], np.arange(len(d.cells) + 1))
    results: list[CellResult] = []
    z = np.full(d.values.shape, np.nan)
    zero_var = 0
    for c in sorted(range(len(d.cells)), key=lambda i: _context_order(d.cells[i])):
        idx = order[bounds[c] : bounds[c + 1]]
        results.append(_cell(d, c, idx, reference_race, reference_gender, level))
        idx_ok = idx[d.usable[idx]]
        x = d.values[idx_ok]
        if not d.rank_cell[c] and x.size >= 2:
            sd = x.std(ddof=1)
            if sd > 0:
                z[idx_ok] = (x - x.mean()) / sd
            else:
                zero_var += 1
    kept = ~d.left_out
    return NameAuditResult(
        cells=with_fdr(results),
        names=_name_scores(z, d.name_codes, d.names),
        n_rows=len(rows),
        n_missing=int(d.missing.sum()),
        n_imputed=int(d.imputed.sum()),
        n_unimputable=int((~d.usable & kept).sum()),
        n_converted=int((d.outcome == CONVERTED).sum()),
        n_left_out=int(d.left_out.sum()),
        rank_flipped=tuple(sorted({c[0] for c, r in zip(d.cells, d.rank_cell, strict=True) if r})),
        zero_variance_cells=zero_var,
    )


def _coded(rows: Sequence[Sequence[Any]], rank_scenarios: Iterable[str]) -> _Coded:
    """Code the rows (see ``_Coded``): ranks of ``rank_scenarios`` flipped to 101 - rank,
    then each missing number (not left out) imputed with its cell x race-gender median."""
    outcome = np.array([_outcome(r) for r in rows])
    sc, var, ctx, name, race, gender, value, _raw = zip(*(r[:8] for r in rows), strict=True)
    left_out = outcome == LEFT_OUT
    values = np.array([np.nan if v is None else v for v in value], dtype=float)
    values[left_out] = np.nan
    cell_codes, cells = _codes(zip(sc, var, ctx, strict=True))
    rg_codes, rgs = _codes(zip(race, gender, strict=True))
    name_codes, names = _codes(zip(name, race, gender, strict=True))
    race_codes, races = _codes(race)
    gender_codes, genders = _codes(gender)

    rank_set = {s.lower() for s in rank_scenarios}
    rank_cell = np.array([c[0].lower() in rank_set for c in cells], dtype=bool)
    is_rank = rank_cell[cell_codes]
    values[is_rank] = RANK_FLIP - values[is_rank]

    missing = np.isnan(values) & ~left_out
    kept = ~left_out
    imputed = np.zeros(values.shape, dtype=bool)
    values[kept], imputed[kept] = impute_medians(
        values[kept], (cell_codes * len(rgs) + rg_codes)[kept]
    )
    return _Coded(
        outcome=outcome,
        values=values,
        left_out=left_out,
        missing=missing,
        imputed=imputed,
        usable=~np.isnan(values),
        cell_codes=cell_codes,
        cells=cells,
        rank_cell=rank_cell,
        rg_codes=rg_codes,
        rgs=rgs,
        name_codes=name_codes,
        names=names,
        race_codes=race_codes,
        races=races,
        gender_codes=gender_codes,
        genders=genders,
    )


def _cell(
    d: _Coded,
    c: int,
    idx: np.ndarray,
    reference_race: str,
    reference_gender: str,
    level: float,
) -> CellResult:
    """Cell ``c`` (its answers at ``idx``): the groups' summaries, each group against its
    reference, and the counts of imputed, unimputable and per-outcome answers."""
    usable, values, rgs = d.usable, d.values, d.rgs
    idx_ok = idx[usable[idx]]
    x = values[idx_ok]

    def pick(codes: np.ndarray, code: int, idx_ok: np.ndarray = idx_ok) -> np.ndarray:
        return values[idx_ok[codes[idx_ok] == code]]

    by_race = {r: pick(d.race_codes, i) for i, r in enumerate(d.races)}
    by_gender = {g: pick(d.gender_codes, i) for i, g in enumerate(d.genders)}
    by_rg = {f"{r} {g}": pick(d.rg_codes, i) for i, (r, g) in enumerate(rgs)}
    ref_rg = f"{reference_race} {reference_gender}"
    comparisons: list[Comparison] = []
    for dim, groups, ref in (
        ("race", by_race, reference_race),
        ("gender", by_gender, reference_gender),
        ("race_gender", by_rg, ref_rg),
    ):
        if ref in groups:
            comparisons += [
                _compare(dim, g, ref, groups[g], groups[ref]) for g in sorted(groups) if g != ref
            ]
    imp_counts = np.bincount(d.rg_codes[idx][d.imputed[idx]], minlength=len(rgs))
    got = dict(zip(*np.unique(d.outcome[idx], return_counts=True), strict=True))
    return CellResult(
        scenario=d.cells[c][0],
        variation=d.cells[c][1],
        context=d.cells[c][2],
        n=int(x.size),
        imputed={f"{r} {g}": int(imp_counts[i]) for i, (r, g) in enumerate(rgs)},
        unimputable=int((~usable[idx] & ~d.left_out[idx]).sum()),
        readings={o: int(got.get(o, 0)) for o in OUTCOMES},
        by_race=tuple(_summary(k, v, level) for k, v in sorted(by_race.items())),
        by_gender=tuple(_summary(k, v, level) for k, v in sorted(by_gender.items())),
        by_race_gender=tuple(_summary(k, v, level) for k, v in sorted(by_rg.items())),
        comparisons=tuple(comparisons),
    )


def _name_scores(z: np.ndarray, name_codes: np.ndarray, names: list[Any]) -> tuple[NameScore, ...]:
    """Each name's mean z-score over the cells that gave it one, sorted by race, gender and
    name."""
    has_z = ~np.isnan(z)
    z_sum = np.bincount(name_codes[has_z], weights=z[has_z], minlength=len(names))
    z_n = np.bincount(name_codes[has_z], minlength=len(names))
    scores = tuple(
        NameScore(n, r, g, float(z_sum[i] / z_n[i]), int(z_n[i]))
        for i, (n, r, g) in enumerate(names)
        if z_n[i]
    )
    return tuple(sorted(scores, key=lambda s: (s.race, s.gender, s.name)))
