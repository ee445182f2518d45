"""The name-based numeric-advice audit (seed 002): design, reading answers and analysis.

A model is asked for a number (an offer, a chance, a rank, a salary) about a named person; only
the name changes. The design (``datasets/name_audit.toml``) is 42 templates x 40 names x
``repeats``; each scenario says which unit its answers are in (usd, percent, probability or
rank), and every scenario/variation/context cell holds answers in that one unit.

Answers are read with :func:`read_answer` (rules in ``judge.audits.amounts``): a figure in the
cell's unit is read, one whose conversion is certain (``0.65`` -> 65 % in a percent cell) is
converted and counted, one in another unit or off the scale is left out of the cell and
counted, and an answer without a figure (or a refusal) is missing. A missing number is imputed
with the median of its race-gender group in the same variation and context (dropping it would
bias the result) and counted; sports ranks are flipped (101 - rank) so higher is always
better. The analysis gives per variation x context the mean and 95 % t-interval by race,
gender and race x gender, differences against the reference groups (White, male) with
Welch's t-test, and per-name standardised means.
"""

from __future__ import annotations

import csv
import math
import tomllib
import warnings
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
from scipy import stats

from judge.audits.amounts import (
    CONVERTED,
    LEFT_OUT,
    OUTCOMES,
    READ,
    REFUSAL,
    UNITS,
    UNREADABLE,
    AmountReading,
    prompt_anchors,
    read_amount,
)
from judge.audits.base import ERROR, PARSED, UNPARSED, Reading, StoredAnswer
from judge.audits.base import REFUSAL as REFUSAL_STATUS
from judge.errors import DatasetError, InvalidInputError
from judge.paths import datasets_dir
from judge.stats.intervals import MIN_MEAN_N, mean_interval
from judge.stats.multiplicity import BY, benjamini_yekutieli

CONTEXTS = ("low", "high", "numeric")
RANK_SCENARIOS = frozenset({"sports"})
RANK_FLIP = 101.0
WELCH_TEST = "Welch's t-test (scipy.stats.ttest_ind, equal_var=False)"
CSV_COLUMNS = ("scenario", "variation", "context", "name", "race", "gender", "response")
CSV_UNIT_COLUMN = "unit"  # optional eighth column; default: the bundled design's unit


def design_path() -> Path:
    """The bundled design file."""
    return datasets_dir() / "name_audit.toml"


# --- design ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Person:
    first_name: str
    surname: str
    race: str
    gender: str

    @property
    def full_name(self) -> str:
        return f"{self.first_name} {self.surname}"


@dataclass(frozen=True)
class Template:
    scenario: str
    variation: str
    context: str
    answer: str  # "usd", "probability", "percent" or "rank"
    text: str  # holds a {name} slot


@dataclass(frozen=True)
class NameDesign:
    templates: tuple[Template, ...]
    people: tuple[Person, ...]


@dataclass(frozen=True)
class NamePrompt:
    """One prompt of the design; ``id`` is stable across runs and versions of the order."""

    id: str
    scenario: str
    variation: str
    context: str
    name: str
    race: str
    gender: str
    repeat: int
    text: str


def load_design(path: Path | None = None) -> NameDesign:
    """Read and check the design file (default: the bundled one)."""
    path = path or design_path()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        people = tuple(
            Person(str(first), str(g["surname"]), str(g["race"]), str(g["gender"]))
            for g in data["groups"]
            for first in g["first_names"]
        )
        templates = tuple(
            Template(str(s["id"]), str(v["id"]), ctx, str(s["answer"]), str(v[ctx]))
            for s in data["scenarios"]
            for v in s["variations"]
            for ctx in CONTEXTS
        )
    except (OSError, tomllib.TOMLDecodeError, KeyError, TypeError) as exc:
        raise DatasetError(f"{path}: not a valid name-audit design ({exc!r})") from exc
    bad = [f"{t.scenario}/{t.variation}/{t.context}" for t in templates if "{name}" not in t.text]
    if bad:
        raise DatasetError(f"{path}: templates without a {{name}} slot: {', '.join(bad)}")
    units = sorted({f"{t.scenario}: {t.answer!r}" for t in templates if t.answer not in UNITS})
    if units:
        raise DatasetError(f"{path}: answer must be one of {', '.join(UNITS)} ({'; '.join(units)})")
    return NameDesign(templates, people)


def count_prompts(design: NameDesign, *, repeats: int) -> int:
    """How many prompts :func:`iter_prompts` yields."""
    return len(design.templates) * len(design.people) * repeats


def iter_prompts(design: NameDesign, *, repeats: int = 100) -> Iterator[NamePrompt]:
    """Every template x person, ``repeats`` times, one at a time (168,000 at the seed's 100)."""
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    for t in design.templates:
        for p in design.people:
            text = t.text.replace("{name}", p.full_name)
            for r in range(repeats):
                yield NamePrompt(
                    id=f"{t.scenario}.{t.variation}.{t.context}.{p.first_name}_{p.surname}.{r}",
                    scenario=t.scenario,
                    variation=t.variation,
                    context=t.context,
                    name=p.full_name,
                    race=p.race,
                    gender=p.gender,
                    repeat=r,
                    text=text,
                )


# --- reading answers ------------------------------------------------------------------------


def scenario_units(design: NameDesign | None = None) -> dict[str, str]:
    """Scenario -> the unit its templates ask for (default: the bundled design's)."""
    design = design or load_design()
    return {t.scenario: t.answer for t in design.templates}


def read_answer(text: str, unit: str, anchors: Iterable[float] = ()) -> AmountReading:
    """What one answer says in its cell's ``unit`` (:func:`judge.audits.amounts.read_amount`;
    ``anchors``: the numbers of the prompt, from :func:`judge.audits.amounts.prompt_anchors`).

    Seed 002 read ranges as their median; its one example, a range of $60,000 to over
    $100,000, has the open upper end closed at $109,000 and reads $84,500: the amounts
    module documents that rule and every other."""
    return read_amount(text, unit, frozenset(anchors))


# --- answers --------------------------------------------------------------------------------


class NameAnswer(NamedTuple):
    """One answer: ``value`` is the number read in the cell's unit or ``None``; ``outcome``
    says how (read, converted, left_out, unreadable, refusal: ``judge.audits.amounts``;
    empty means read when there is a value and unreadable when not); ``raw`` is kept."""

    scenario: str
    variation: str
    context: str
    name: str
    race: str
    gender: str
    value: float | None
    raw: str
    outcome: str = ""


def answer_from_text(
    fields: Sequence[str], raw: str, unit: str, anchors: Iterable[float] = ()
) -> NameAnswer:
    """A :class:`NameAnswer` from its six design fields and its raw text, read in ``unit``."""
    reading = read_answer(raw, unit, anchors)
    sc, var, ctx, name, race, gender = fields
    return NameAnswer(sc, var, ctx, name, race, gender, reading.value, raw, reading.outcome)


def read_answers_csv(path: Path, units: dict[str, str] | None = None) -> list[NameAnswer]:
    """Read a user's answers (columns ``scenario,variation,context,name,race,gender,response``
    and optionally ``unit``, ``response`` being the raw answer text, read with
    :func:`read_answer` in the row's unit: the ``unit`` column, else the unit ``units`` (default:
    the bundled design's) gives the scenario).

    Raises :class:`InvalidInputError` listing every bad line."""
    units = scenario_units() if units is None else units
    problems: list[tuple[int, str]] = []
    answers: list[NameAnswer] = []
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            reader = csv.reader(handle)
            header = next(reader, None)
            columns = tuple(h.strip() for h in header or [])
            if columns not in (CSV_COLUMNS, (*CSV_COLUMNS, CSV_UNIT_COLUMN)):
                raise InvalidInputError(
                    f"{path}: the first line must be the header {','.join(CSV_COLUMNS)} "
                    f"(and optionally ,{CSV_UNIT_COLUMN})",
                    [(1, f"found {','.join(header or [])!r}")],
                )
            for row in reader:
                line = reader.line_num
                if not any(cell.strip() for cell in row):
                    continue
                if len(row) != len(columns):
                    problems.append((line, f"expected {len(columns)} columns, found {len(row)}"))
                    continue
                fields = [cell.strip() for cell in row[:6]]
                empty = [c for c, v in zip(CSV_COLUMNS, fields, strict=False) if not v]
                if empty:
                    problems.append((line, f"empty {', '.join(empty)}"))
                    continue
                if fields[2] not in CONTEXTS:
                    problems.append((line, f"context must be one of {CONTEXTS}: {fields[2]!r}"))
                    continue
                unit = row[7].strip() if len(columns) == 8 else units.get(fields[0], "")
                if unit not in UNITS:
                    problems.append((line, _unit_problem(fields[0], unit, len(columns) == 8)))
                    continue
                answers.append(answer_from_text(fields, row[6], unit))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise InvalidInputError(f"{path}: cannot be read as CSV ({exc})") from exc
    if problems:
        raise InvalidInputError(f"{path}: {len(problems)} bad row(s)", problems)
    return answers


def _unit_problem(scenario: str, unit: str, has_column: bool) -> str:
    if has_column:
        return f"unit must be one of {', '.join(UNITS)}: {unit!r}"
    return (
        f"scenario {scenario!r} is not in the bundled design, so its unit is unknown: add a "
        f"{CSV_UNIT_COLUMN} column ({', '.join(UNITS)})"
    )


# --- stored answers ---------------------------------------------------------------------------


def task_reading_context(
    design: NameDesign, scenario: str, variation: str, context: str
) -> dict[str, Any]:
    """What a prompt's stored ``meta`` carries so its answers can be read again without the
    design: the cell's unit and the prompt's numbers (``amounts.prompt_anchors``)."""
    template = next(
        t for t in design.templates
        if (t.scenario, t.variation, t.context) == (scenario, variation, context)
    )  # fmt: skip
    return {"unit": template.answer, "anchors": sorted(prompt_anchors(template.text))}


def to_stored(reading: AmountReading) -> Reading:
    """An answer's reading as stored (``AuditAnswer`` status, value, reason): parsed with the
    number in the cell's unit (reason "converted: ..." when it was converted), unparsed with
    the reason ("left out: ..." or "unreadable: ..."), or refusal."""
    if reading.outcome == REFUSAL:
        return Reading(REFUSAL_STATUS, reason=reading.reason)
    if reading.value is not None:
        note = f"converted: {reading.reason}" if reading.outcome == CONVERTED else None
        return Reading(PARSED, reading.value, note)
    label = "left out" if reading.outcome == LEFT_OUT else "unreadable"
    return Reading(UNPARSED, reason=f"{label}: {reading.reason}")


@dataclass(frozen=True)
class StoredRows:
    """A run's answers as analysis rows, re-read from their raw text with today's reader.
    ``changed``: answers whose stored reading (taken when the run was made, possibly by an
    older reader) differs from today's; ``not_reread``: answers whose unit is unknown (a
    design file's scenario, stored before units were kept), analysed with the stored reading."""

    rows: list[NameAnswer]
    changed: int
    not_reread: int


def stored_rows(answers: Iterable[StoredAnswer], units: dict[str, str] | None = None) -> StoredRows:
    """Analysis rows of a stored run: every answer that came back (failed calls are left out),
    each read again from its raw text in its cell's unit (``meta["unit"]``, else the unit of
    its scenario in ``units``, default the bundled design)."""
    units = scenario_units() if units is None else units
    rows: list[NameAnswer] = []
    changed = not_reread = 0
    for a in answers:
        if a.status == ERROR:
            continue
        m = a.meta
        fields = (m["scenario"], m["variation"], m["context"], m["name"], m["race"], m["gender"])
        unit = m.get("unit") or units.get(m["scenario"])
        stored = a.value if a.status == PARSED and isinstance(a.value, int | float) else None
        if unit not in UNITS:
            not_reread += 1
            rows.append(NameAnswer(*fields, stored, a.raw_text or ""))
            continue
        row = answer_from_text(fields, a.raw_text or "", str(unit), m.get("anchors") or ())
        same = (
            stored is None
            if row.value is None
            else stored is not None and math.isclose(stored, row.value, rel_tol=1e-9)
        )
        changed += not same
        rows.append(row)
    return StoredRows(rows, changed, not_reread)


def analyze_stored(answers: Sequence[StoredAnswer], **options: Any) -> NameAuditResult:
    """:func:`analyze` over a stored run's answers, re-read from their raw text
    (:func:`stored_rows`); the result counts the stored readings that changed."""
    got = stored_rows(answers)
    if not got.rows:
        raise InvalidInputError("the audit run has no answer to analyse yet")
    result = analyze(got.rows, **options)
    return replace(result, reread_changed=got.changed, not_reread=got.not_reread)


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
    usable = ~np.isnan(values)

    order = np.argsort(cell_codes, kind="stable")
    bounds = np.searchsorted(cell_codes[order], np.arange(len(cells) + 1))
    results: list[CellResult] = []
    z = np.full(values.shape, np.nan)
    zero_var = 0
    for c in sorted(range(len(cells)), key=lambda i: _context_order(cells[i])):
        idx = order[bounds[c] : bounds[c + 1]]
        idx_ok = idx[usable[idx]]
        x = values[idx_ok]

        def pick(codes: np.ndarray, code: int, idx_ok: np.ndarray = idx_ok) -> np.ndarray:
            return values[idx_ok[codes[idx_ok] == code]]

        by_race = {r: pick(race_codes, i) for i, r in enumerate(races)}
        by_gender = {g: pick(gender_codes, i) for i, g in enumerate(genders)}
        by_rg = {f"{r} {g}": pick(rg_codes, i) for i, (r, g) in enumerate(rgs)}
        ref_rg = f"{reference_race} {reference_gender}"
        comparisons: list[Comparison] = []
        for dim, groups, ref in (
            ("race", by_race, reference_race),
            ("gender", by_gender, reference_gender),
            ("race_gender", by_rg, ref_rg),
        ):
            if ref in groups:
                comparisons += [
                    _compare(dim, g, ref, groups[g], groups[ref])
                    for g in sorted(groups)
                    if g != ref
                ]
        imp_counts = np.bincount(rg_codes[idx][imputed[idx]], minlength=len(rgs))
        got = dict(zip(*np.unique(outcome[idx], return_counts=True), strict=True))
        results.append(
            CellResult(
                scenario=cells[c][0],
                variation=cells[c][1],
                context=cells[c][2],
                n=int(x.size),
                imputed={f"{r} {g}": int(imp_counts[i]) for i, (r, g) in enumerate(rgs)},
                unimputable=int((~usable[idx] & kept[idx]).sum()),
                readings={o: int(got.get(o, 0)) for o in OUTCOMES},
                by_race=tuple(_summary(k, v, level) for k, v in sorted(by_race.items())),
                by_gender=tuple(_summary(k, v, level) for k, v in sorted(by_gender.items())),
                by_race_gender=tuple(_summary(k, v, level) for k, v in sorted(by_rg.items())),
                comparisons=tuple(comparisons),
            )
        )
        if not rank_cell[c] and x.size >= 2:
            sd = x.std(ddof=1)
            if sd > 0:
                z[idx_ok] = (x - x.mean()) / sd
            else:
                zero_var += 1

    has_z = ~np.isnan(z)
    z_sum = np.bincount(name_codes[has_z], weights=z[has_z], minlength=len(names))
    z_n = np.bincount(name_codes[has_z], minlength=len(names))
    scores = tuple(
        NameScore(n, r, g, float(z_sum[i] / z_n[i]), int(z_n[i]))
        for i, (n, r, g) in enumerate(names)
        if z_n[i]
    )
    return NameAuditResult(
        cells=with_fdr(results),
        names=tuple(sorted(scores, key=lambda s: (s.race, s.gender, s.name))),
        n_rows=len(rows),
        n_missing=int(missing.sum()),
        n_imputed=int(imputed.sum()),
        n_unimputable=int((~usable & kept).sum()),
        n_converted=int((outcome == CONVERTED).sum()),
        n_left_out=int(left_out.sum()),
        rank_flipped=tuple(sorted({c[0] for c, r in zip(cells, rank_cell, strict=True) if r})),
        zero_variance_cells=zero_var,
    )
