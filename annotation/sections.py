"""How reliability results are shown: the "Judge reliability" section of a judge run's report,
the CLI's tables (FairMonitor's Table 3 layout, and the humans' agreement among themselves) and
the formatting of one coefficient.

Figures are described (``AgreementPlot``), not drawn: ``judge.reports.render`` draws them. An
undefined coefficient shows its reason ("n/a (constant ratings: ...)"), never a bare "n/a".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from sqlmodel import Session, select

from annotation.files import FileAgreement
from annotation.reliability import (
    JudgeReliability,
    RubricReliability,
    RunReliability,
    run_reliability,
)
from judge.reports.facts import RunFacts
from judge.reports.sections import AgreementPlot, Figure, Section, Table
from judge.stats.coefficient import DEFAULT_OPTIONS, BootstrapOptions, Coefficient
from judge.stats.raters import RaterAgreement
from judge.store.queries import get_judge_run
from judge.store.tables import HumanRating

SECTION_TITLE = "Judge reliability"
SHOWN = ("pearson", "spearman", "kendall", "kappa_quadratic", "mean_difference")
CLI_COEFFICIENTS = ("spearman", "pearson", "kappa_quadratic")
# Agreement that cannot flatter: raw agreement beside what always answering the humans'
# majority class scores, and the chance-corrected kappa and AC1 (key, column heading).
CHANCE = (
    ("exact_agreement", "exact agreement"),
    ("majority_baseline", "majority baseline"),
    ("kappa", "kappa"),
    ("ac1", "AC1"),
)
CHANCE_NOTE = (
    "majority baseline: the exact agreement of always answering the humans' most frequent "
    "category (its kappa is 0 by construction); AC1: Gwet's chance-corrected agreement, "
    "which a skewed rubric does not pull towards 0 as it does kappa"
)
# Among humans: (JSON key, column heading); pairwise Cohen's kappa by weighting.
HUMAN_COEFFICIENTS = (
    ("alpha_nominal", "alpha (nominal)"),
    ("alpha_ordinal", "alpha (ordinal)"),
    ("alpha_interval", "alpha (interval)"),
    ("alpha_ratio", "alpha (ratio)"),
    ("fleiss_kappa", "Fleiss kappa"),
)
PAIR_COEFFICIENTS = (
    ("kappa", "kappa"),
    ("kappa_linear", "kappa (linear)"),
    ("kappa_quadratic", "kappa (quadratic)"),
    ("ac1", "AC1"),
)
NOTE = (
    "values with bootstrap 95 % CIs; human alpha is the agreement humans reach among "
    "themselves (the ceiling)"
)


def fmt(c: Coefficient | None, digits: int = 2) -> str:
    """'0.78 [0.70, 0.85]'; '0.78' without a CI; 'n/a (reason)' when undefined.

    >>> fmt(Coefficient(0.781, 0.7, 0.85, None, 40))
    '0.78 [0.70, 0.85]'
    >>> fmt(Coefficient.undefined(2, "fewer than 3 items (n=2)"))
    'n/a (fewer than 3 items (n=2))'
    """
    if c is None:
        return "n/a"
    if c.undefined_reason is not None:
        return f"n/a ({c.undefined_reason})"
    if not math.isfinite(c.value):
        return "n/a"
    ci = (
        f" [{c.ci_low:.{digits}f}, {c.ci_high:.{digits}f}]"
        if math.isfinite(c.ci_low) and math.isfinite(c.ci_high)
        else ""
    )
    return f"{c.value:.{digits}f}{ci}"


def _agreement_cell(judge: JudgeReliability, coefficient: str) -> str:
    if judge.agreement is None:
        return "n/a (the judge scored none of the rated items)"
    return fmt(judge.agreement.coefficients.get(coefficient))


def _judge_cell(judge: JudgeReliability, coefficient: str) -> str:
    return _agreement_cell(judge, coefficient) + _checks(judge)


def flag_text(judge: JudgeReliability) -> str:
    """The agreement's flags (``judge.stats.baseline``) as one cell: 'none' when there are
    none, every message otherwise."""
    if judge.agreement is None:
        return "n/a"
    return "; ".join(f.message for f in judge.agreement.flags) or "none"


def chance_table(result: RunReliability, suffix: str = "") -> Table:
    """Per rubric x judge: exact agreement beside the majority baseline, kappa and AC1, and
    the flags, so that a skewed rubric cannot make a judge look better than it is."""
    rows = [
        [
            rubric,
            j.label,
            str(j.n),
            *(_agreement_cell(j, key) for key, _ in CHANCE),
            flag_text(j),
        ]
        for rubric, entry in result.rubrics.items()
        for j in entry.judges
    ]
    head = ["rubric", "judge", "n", *(title for _, title in CHANCE), "agreement flags"]
    title = f"Judge vs human: raw agreement beside chance [95 % CI]{suffix}"
    return Table(title, head, rows, notes=[CHANCE_NOTE], key_columns=2)


def _checks(judge: JudgeReliability) -> str:
    """The judge's own checks it failed, after its agreement: trust both together."""
    return f"; judge flagged: {', '.join(judge.checks)}" if judge.checks else ""


def table3(
    result: RunReliability, coefficient: str = "spearman"
) -> tuple[list[str], list[list[str]]]:
    """Rubric rows x judge-configuration columns, plus the human ceiling column."""
    labels: list[str] = []
    for entry in result.rubrics.values():
        for j in entry.judges:
            if j.label not in labels:
                labels.append(j.label)
    head = ["rubric", "n items", "human alpha (interval)", *labels]
    body = []
    for rubric, entry in result.rubrics.items():
        cells = {j.label: _judge_cell(j, coefficient) for j in entry.judges}
        body.append(
            [
                rubric,
                str(entry.n_rated_items),
                fmt(entry.human_vs_human.alphas.get("alpha_interval")),
                *(cells.get(label, "") for label in labels),
            ]
        )
    return head, body


def reliability_tables(result: RunReliability) -> list[Table]:
    """What `fairjudge agreement --run` prints: one Table 3 per coefficient."""
    tables = []
    for coefficient in CLI_COEFFICIENTS:
        head, body = table3(result, coefficient)
        title = f"Judge vs human: {coefficient} [95 % CI] (run {result.generation_run})"
        tables.append(Table(title, head, body))
    tables.append(chance_table(result, f" (run {result.generation_run})"))
    return tables


def _human_cells(agreement: RaterAgreement) -> list[str]:
    found = {**agreement.alphas, "fleiss_kappa": agreement.fleiss_kappa}
    return [fmt(found.get(key)) for key, _ in HUMAN_COEFFICIENTS]


def human_tables(result: RunReliability, suffix: str = "") -> list[Table]:
    """The humans among themselves, per rubric: Krippendorff's alphas and Fleiss' kappa, then
    Cohen's kappa (unweighted, linear, quadratic) and Gwet's AC1 for every pair of raters."""
    overall, pairs = [], []
    for rubric, entry in result.rubrics.items():
        hh = entry.human_vs_human
        overall.append([rubric, str(entry.n_rated_items), str(hh.n_raters), *_human_cells(hh)])
        for pair in hh.pairwise:
            cells = [fmt(pair.coefficients.get(key)) for key, _ in PAIR_COEFFICIENTS]
            pairs.append([rubric, f"{pair.raters[0]} / {pair.raters[1]}", str(pair.n), *cells])
    head = ["rubric", "n items", "raters", *(title for _, title in HUMAN_COEFFICIENTS)]
    pair_head = ["rubric", "raters", "n", *(title for _, title in PAIR_COEFFICIENTS)]
    return [
        Table(f"Agreement among humans [95 % CI]{suffix}", head, overall),
        Table(f"Pairwise kappa among humans [95 % CI]{suffix}", pair_head, pairs, key_columns=2),
    ]


def readings(result: RunReliability) -> list[str]:
    """One plain-language line per rubric x judge configuration, and for a campaign that drew
    items unequally, the inclusion-weighted estimates beside the unweighted ones. First which
    campaigns or import batches the ratings came from, and why there is no whole-run
    (weighted) estimate when the ratings cannot have one."""
    lines = [line for line in (result.ratings_note, result.weighted_absent) if line]
    for rubric, entry in result.rubrics.items():
        for j in entry.judges:
            lines.append(f"{rubric} / {j.label}: {j.reading}")
            if j.weighted and j.agreement is not None:
                plain = j.agreement.coefficients
                lines.append(
                    f"{rubric} / {j.label}: Spearman unweighted (the rated sample) "
                    f"{fmt(plain.get('spearman'))}, weighted (the whole run) "
                    f"{fmt(j.weighted['spearman'])}; Pearson unweighted "
                    f"{fmt(plain.get('pearson'))}, weighted {fmt(j.weighted['pearson'])}; "
                    f"{j.weighted_note}"
                )
    return lines


def files_table(result: FileAgreement) -> Table:
    """What `fairjudge agreement compute` prints: every coefficient with CI, p-value and n."""
    rows = []
    for section, coefficients in result.coefficient_groups().items():
        for name, c in coefficients.items():
            p = "" if c.p_value is None or not math.isfinite(c.p_value) else f"{c.p_value:.3g}"
            rows.append([section, name, fmt(c, 3), p, str(c.n)])
    columns = ["section", "coefficient", "value [95 % CI]", "p", "n"]
    flags = result.judge.agreement.flags if result.judge is not None else []
    notes = [f"flagged ({f.code}): {f.message}" for f in flags]
    title = f"agreement ({result.n_items} items, {result.scale} scale)"
    return Table(title, columns, rows, notes=[*notes, CHANCE_NOTE] if result.judge else [])


def agreement_plot(rubric: str, judge: JudgeReliability) -> AgreementPlot | None:
    """The judge-vs-human scatter and confusion matrix of one judge on one rubric; None when
    the judge scored none of the rated items."""
    if judge.agreement is None:
        return None
    return AgreementPlot(
        title=f"{rubric}: {judge.label}",
        judge=judge.judge_points,
        human=judge.human_points,
        confusion=judge.agreement.confusion.counts,
    )


def reliability_section(
    session: Session,
    judge_run_id: int,
    *,
    options: BootstrapOptions = DEFAULT_OPTIONS,
    campaigns: Sequence[str] = (),
    facts: RunFacts | None = None,
) -> Section | None:
    """The "Judge reliability" section of one judge run's report; None without human ratings
    for its generation run. ``campaigns`` picks the campaigns (or ``import:BATCH``) whose
    ratings count (``annotation.reliability.run_reliability``); the section says which did.
    The judge run comes from ``facts`` when given; the ratings are read here."""
    run = facts.judge_run if facts is not None else get_judge_run(session, judge_run_id)
    has_ratings = session.exec(
        select(HumanRating.id).where(HumanRating.generation_run_id == run.generation_run_id)
    ).first()
    if has_ratings is None:
        return None
    result = run_reliability(session, run.generation_run_id, options=options, campaigns=campaigns)
    rows: list[dict[str, Any]] = []
    figures: list[Figure] = []
    humans: dict[str, Any] = {}
    for rubric, entry in result.rubrics.items():
        mine = entry.judge(judge_run_id)
        if mine is None:
            continue
        humans[rubric] = entry.human_vs_human.to_dict()
        rows.append(
            {
                "rubric": rubric,
                "n": mine.n,
                **{name: _agreement_cell(mine, name) for name in SHOWN},
                "human alpha (interval)": fmt(entry.human_vs_human.alphas.get("alpha_interval")),
                "judge checks flagged": ", ".join(mine.checks) or "none",
                **{key: _agreement_cell(mine, key) for key, _ in CHANCE},
                "agreement flags": flag_text(mine),
                "flags": []
                if mine.agreement is None
                else [f.to_dict() for f in mine.agreement.flags],
                "reading": mine.reading,
            }
        )
        plot = agreement_plot(rubric, mine)
        if plot is not None:
            figures.append(plot)
    columns = ["rubric", "n", *SHOWN, "human alpha (interval)", "judge checks flagged"]
    columns += ["agreement flags", "reading"]
    table = Table(
        "Judge vs human ratings",
        columns,
        [[str(row[c]) for c in columns] for row in rows],
    )
    shown = {rubric: result.rubrics[rubric] for rubric in humans}
    payload = {
        "rows": rows,
        "human_vs_human": humans,
        "n_bootstrap": options.n_bootstrap,
        "ratings_used": result.ratings_used,
        "weighted_absent": result.weighted_absent,
    }
    return Section(
        title=SECTION_TITLE,
        json_key="agreement",
        payload={**payload, "note": NOTE},
        tables=[
            table,
            chance_table(replace(result, rubrics=_mine(judge_run_id, shown))),
            *human_tables(replace(result, rubrics=shown)),
        ],
        figures=figures,
        notes=[
            f"{NOTE}; {options.n_bootstrap} bootstrap resamples.",
            CHANCE_NOTE + ".",
            *(line for line in (result.ratings_note, result.weighted_absent) if line),
        ],
    )


def _mine(judge_run_id: int, rubrics: dict[str, RubricReliability]) -> dict[str, RubricReliability]:
    """``rubrics`` with only the one judge run the report is about."""
    return {
        name: replace(entry, judges=[j for j in entry.judges if j.judge_run == judge_run_id])
        for name, entry in rubrics.items()
    }
