"""The parts of a stored audit run's report that are not the suite's own figures: what came
back (answers by status, with the raw text of some that could not be read) and the award
follow-up's classes, tests per source and agreement between sources."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

from judge.audits.award import FollowupAnalysis
from judge.audits.base import STATUSES
from judge.audits.report import award_report
from judge.costs import AnswersCost
from judge.reports.sections import Section, Table


def _num(value: float | None) -> str:
    return "—" if value is None or math.isnan(value) else f"{value:.3f}"


def answers_section(
    info: Mapping[str, Any],
    statuses: Mapping[str, Mapping[str, int]],
    examples: Sequence[Mapping[str, Any]],
    analysis_error: str | None,
    cost: AnswersCost | None = None,
) -> Section:
    """Answers per turn and status, their tokens and cost (``cost``), and up to 20 answers
    that gave no reading, verbatim."""
    rows = [
        [turn, *(str(counts.get(s, 0)) for s in STATUSES), str(sum(counts.values()))]
        for turn, counts in sorted(statuses.items())
    ]
    tables = [
        Table(
            "Answers by status",
            ["turn", *STATUSES, "total"],
            rows,
            notes=[
                "parsed: a reading was taken; unparsed: none could be (raw text kept); refusal: "
                "the model declined (award: counted as equivocal); empty: no text; error: the "
                "call failed for good (sent again on the next run); answered: a follow-up "
                "explanation waiting for its class.",
                "Name audit: an answer whose figure is in another unit than its cell's (a "
                "percentage where dollars are asked) is stored unparsed with a reason starting "
                "'left out:'; one converted to its cell's unit is parsed with a reason starting "
                "'converted:'. The name-based advice section counts both per cell.",
            ],
        )
    ]
    if cost is not None:
        tables.append(cost_table(cost))
    if examples:
        tables.append(
            Table(
                "Answers without a reading (first 20, raw text)",
                ["prompt", "status", "raw text"],
                [[e["key"], e["status"], (e["raw_text"] or "")[:400]] for e in examples],
            )
        )
    notes = [f"Run {info['id']}: {info['suite']} on {info['model']} ({info['status']})."]
    if info.get("status_detail"):
        notes.append(str(info["status_detail"]))
    if analysis_error:
        notes.append(f"No analysis yet: {analysis_error}")
    payload: dict[str, Any] = {
        "run": dict(info),
        "statuses": {k: dict(v) for k, v in statuses.items()},
    }
    if cost is not None:
        payload["cost"] = {k: v for k, v in cost.to_json().items() if k != "prices"}
    return Section("Answers", "answers", payload, tables, notes=notes)


def cost_table(cost: AnswersCost) -> Table:
    """A run's answers, tokens and cost, live and at the batch price ("unknown" without
    prices, never 0)."""

    def money(value: float | None) -> str:
        return "unknown" if value is None else f"{value:.4f}"

    row = [
        str(cost.answers), f"{cost.prompt_tokens:,}", f"{cost.cached_prompt_tokens:,}",
        f"{cost.completion_tokens:,}", money(cost.cost), money(cost.cost_batch),
    ]  # fmt: skip
    head = ["answers", "prompt tokens", "of them cached", "completion tokens", "cost",
            "cost at batch price"]  # fmt: skip
    return Table(f"Tokens and cost ({cost.endpoint}, {cost.model})", head, [row], [cost.note])


PEOPLES_CLASSES = "n/a: people's classes"
"""``judge_standing`` of a follow-up row whose classes people gave (no judge to validate)."""


def followup_sections(
    tests: Mapping[str, FollowupAnalysis],
    agreement: Any | None,
    standing: Mapping[str, str] | None = None,
) -> list[Section]:
    """One chi-square section per source of classes, then the agreement between sources
    (``agreement``: a ``judge.audits.followup.LabelAgreement``). ``standing``: a judge
    source -> its standing ("not validated": ``server.usecases.standing``), given to each of
    its CSV rows as ``judge_standing``; people's sources get ``PEOPLES_CLASSES``."""
    out: list[Section] = []
    given = standing or {}
    for source, analysis in tests.items():
        state = given.get(source, PEOPLES_CLASSES)
        for section in award_report(analysis).sections:
            csv = {
                f"followup_{_slug(source)}.csv": [{**row, "judge_standing": state} for row in rows]
                for rows in section.csv.values()
            }
            out.append(
                dataclasses.replace(
                    section,
                    title=f"Award follow-up, classes by {source}",
                    json_key=None,
                    payload={},
                    csv=csv,
                )
            )
    if agreement is not None:
        alpha = agreement.alpha_nominal
        rows = [["all sources", "Krippendorff's alpha (nominal)", str(alpha.n),
                 _num(alpha.value), f"{_num(alpha.ci_low)}–{_num(alpha.ci_high)}"]]  # fmt: skip
        for pair in agreement.pairwise:
            kappa = pair.coefficients.get("kappa")
            if kappa is None:
                continue
            ci = f"{_num(kappa.ci_low)}–{_num(kappa.ci_high)}"
            rows.append([" vs ".join(pair.raters), "Cohen's kappa", str(pair.n),
                         _num(kappa.value), ci])  # fmt: skip
        table = Table(
            "Agreement on the follow-up classes",
            ["sources", "coefficient", "n", "value", "95 % CI"],
            rows,
            notes=["Nominal classes: unweighted kappa; CIs from an item bootstrap."],
        )
        out.append(Section("Follow-up agreement", None, {}, [table, _beside_chance(agreement)]))
    return out


def _beside_chance(agreement: Any) -> Table:
    """Each judge against each person: exact agreement beside the majority baseline, kappa
    and AC1, and the flags (``judge.audits.followup.judge_vs_people``)."""
    rows = []
    for v in agreement.judge_vs_people:
        cells = []
        for k in ("exact_agreement", "majority_baseline", "kappa", "ac1"):
            c = v.coefficients[k]
            ci = f" [{_num(c.ci_low)}–{_num(c.ci_high)}]" if k != "majority_baseline" else ""
            cells.append(_num(c.value) + ci)
        flags = "; ".join(f.message for f in v.flags) or "none"
        rows.append([v.judge, v.person, str(v.n), *cells, v.majority_class or "—", flags])
    return Table(
        "A judge's classes against a person's, beside chance",
        ["judge", "person", "n", "exact agreement", "majority baseline", "kappa", "AC1",
         "person's majority class", "flags"],
        rows,
        notes=[
            "majority baseline: the exact agreement of always answering the person's most "
            "frequent class; a flag when kappa's interval covers 0 or the judge does no "
            "better than that (judge.stats.baseline)."
        ],
    )  # fmt: skip


def _slug(source: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in source).strip("_")
