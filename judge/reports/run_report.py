"""The judge run's own report sections: its stage metrics (FairMonitor's Table 5 layout),
score distributions, answer flags, unscored judgments, tokens and settings, and the judge's
self-consistency when it drew several samples per item.

Answers cut at the token limit (flag ``truncated``) are counted per stage beside refusals and
empty answers, and a metric cell resting on any is marked with a dagger and their count.

Every number comes from stored rows; ``item_scores.csv`` lists the judgment ids behind each
item, so any metric can be traced back to the raw judge replies.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from sqlmodel import Session

from judge.endpoint_url import redacted
from judge.metrics import (
    GRID_ALPHA,
    STAGE_METRICS,
    ItemScore,
    MetricRow,
    StageMetric,
    definition,
    stage_metrics,
)
from judge.reports.facts import RunFacts, load_run_facts
from judge.reports.sections import BoxPlot, Section, Table
from judge.stats.intervals import MEAN, METHOD_NAMES, MIN_MEAN_N, SHARE
from judge.stats.multiplicity import HOLM
from judge.stats.multiplicity import METHOD_NAMES as MULTIPLICITY_NAMES
from judge.stats.versus_rest import FISHER, TEST_NAMES, WELCH
from judge.vocab import SCALE

METRICS_TITLE = "Stage metrics"
# The flags an answer of the model under test can carry, in the order the report lists them;
# every stage in report.json's "answer_flags_by_stage" has each of them, 0 when none.
ANSWER_FLAGS = ("ok", "truncated", "refusal", "empty", "error")
TRUNCATED_MARK = "†"  # the dagger of a metric cell whose items include cut answers
FLAG_MARK = "‡"  # a by-factor cell whose Holm-adjusted p (against the other factors) < alpha
GRID_TITLE = "Each factor against the rest (Holm over the table)"


def metrics_section(
    session: Session, judge_run_id: int, *, facts: RunFacts | None = None
) -> Section:
    """Everything the report says about one judge run, as one section (flat in report.json);
    from ``facts`` when given (then it reads nothing), else from the store."""
    facts = facts or load_run_facts(session, judge_run_id)
    numbers = run_numbers(facts)
    payload = metrics_payload(facts, numbers)
    return Section(
        title=METRICS_TITLE,
        json_key=None,
        payload=payload,
        tables=metrics_tables(facts, numbers, payload),
        figures=[_box_plot(list(facts.item_scores), facts.generation_run.model)],
        notes=metrics_notes(numbers),
        csv={
            "metrics.csv": payload["metrics_overall"] + payload["metrics_by_factor"],
            "item_scores.csv": [
                {
                    **s,
                    "judgment_ids": " ".join(map(str, s["judgment_ids"])),
                    "unscored_reasons": " | ".join(s["unscored_reasons"]),
                }
                for s in payload["item_scores"]
            ],
        },
    )


@dataclass(frozen=True)
class RunNumbers:
    """The numbers of the metrics section, computed from a run's facts: the stage metrics by
    factor and overall, answers per (stage, flag) in stage and flag order, the same per
    stage, answers that address the judge, unscored judgments by kind, tokens, and the
    judge's settings."""

    by_factor: list[MetricRow]
    overall: list[MetricRow]
    flags: list[tuple[str, str, int]]
    by_stage: dict[str, dict[str, int]]
    suspected: int
    unscored: dict[str, int]
    tokens: dict[str, int]
    settings: dict[str, Any]
    n_item_scores: int
    n_unscored_items: int


def run_numbers(facts: RunFacts) -> RunNumbers:
    """Every number the metrics section shows, from the run's facts (no store access)."""
    scores = facts.item_scores
    model = facts.generation_run.model
    flags = Counter((item.stage, r.flag) for r, item in facts.answers)
    counted = [(stage, flag, n) for (stage, flag), n in sorted(flags.items())]
    unscored = Counter(
        row.judgment.unscored_kind or "unknown"
        for row in facts.judgments
        if row.judgment.status != "scored"
    )
    return RunNumbers(
        by_factor=stage_metrics(scores, model),
        overall=stage_metrics(scores, model, by_factor=False),
        flags=counted,
        by_stage=answer_flags_by_stage(counted),
        suspected=sum(bool(signs) for signs in facts.injection_signs.values()),
        unscored=dict(unscored),
        tokens=_tokens(facts),
        settings=_judge_settings(facts),
        n_item_scores=len(scores),
        n_unscored_items=sum(s.score is None for s in scores),
    )


def metrics_payload(facts: RunFacts, numbers: RunNumbers) -> dict[str, Any]:
    """The metrics section's part of report.json."""
    grun = facts.generation_run
    return {
        "dataset": facts.dataset.name if facts.dataset else None,
        "generation_run": {
            "id": grun.id,
            "endpoint": grun.endpoint_name,
            "model": grun.model,
            "base_url": redacted(grun.base_url),  # a secret stored before 0017: never shown
            "temperature": grun.temperature,
            "max_tokens": grun.max_tokens,
            "template_version": grun.template_version,
        },
        "judge_run": numbers.settings,
        "metrics_overall": [asdict(r) for r in numbers.overall],
        "metrics_by_factor": [asdict(r) for r in numbers.by_factor],
        "metric_definitions": {m.name: definition(m) for m in STAGE_METRICS},
        "answers": [{"stage": s, "flag": f, "count": c} for s, f, c in numbers.flags],
        "answer_flags_by_stage": numbers.by_stage,
        "answers_truncated": sum(counts["truncated"] for counts in numbers.by_stage.values()),
        "unscored": numbers.unscored,
        "injection_suspected": numbers.suspected,
        "n_item_scores": numbers.n_item_scores,
        "n_unscored_items": numbers.n_unscored_items,
        "tokens": numbers.tokens,
        "item_scores": [asdict(s) for s in facts.item_scores],
    }


def metrics_tables(facts: RunFacts, numbers: RunNumbers, payload: dict[str, Any]) -> list[Table]:
    """The stage-metric table (FairMonitor's Table 5 layout), the answers by stage and flag,
    the tokens and the judge's settings."""
    jrun = facts.judge_run
    head, body = metrics_table(numbers.by_factor + numbers.overall)
    return [
        Table(
            f"FairMonitor metrics: {facts.generation_run.model} (judge {jrun.model}, "
            f"{jrun.prompt_variant}, T={jrun.temperature})",
            head,
            body,
            notes=[*metrics_legend(), truncated_note(numbers.by_stage)],
        ),
        grid_table(numbers.by_factor),
        Table(
            "Answers of the model under test",
            ["stage", "answer flag", "count"],
            [[s, f, str(c)] for s, f, c in numbers.flags],
        ),
        Table(
            "Tokens",
            ["count", "value"],
            [[k.replace("_", " "), f"{v:,}"] for k, v in numbers.tokens.items()],
        ),
        Table(
            "Judge settings",
            ["setting", "value"],
            [[k.replace("_", " "), human(v)] for k, v in payload["judge_run"].items()],
        ),
    ]


def metrics_notes(numbers: RunNumbers) -> list[str]:
    """The metrics section's prose: how to read the values, what was left unscored, answers
    that address the judge, and the glossary of metric names."""
    return [
        "Values are percentages with their 95 % interval; n is the number of scored items "
        "behind each value. Unscored items are left out of the value and counted beside "
        "it (u).",
        f"Unscored judgments: {counts_phrase(numbers.unscored)}. Items with no usable score: "
        f"{numbers.n_unscored_items} of {numbers.n_item_scores}.",
        f"Answers that address the judge (injection_suspected): {numbers.suspected}; the item "
        "browser shows them with the signs found. Their scores are the judge's own verdict "
        "read from its reply, but worth a look.",
        *metric_glossary(),
    ]


def answer_flags_by_stage(flags: Sequence[tuple[str, str, int]]) -> dict[str, dict[str, int]]:
    """Stage -> flag -> answers, every flag of ``ANSWER_FLAGS`` present (0 when none), plus
    'total'; a flag outside that list (from a newer release) is kept after them.

    >>> answer_flags_by_stage([("S1", "ok", 1), ("S1", "truncated", 2)])["S1"]
    {'ok': 1, 'truncated': 2, 'refusal': 0, 'empty': 0, 'error': 0, 'total': 3}
    """
    out: dict[str, dict[str, int]] = {}
    for stage, flag, count in flags:
        counts = out.setdefault(stage, dict.fromkeys(ANSWER_FLAGS, 0))
        counts[flag] = counts.get(flag, 0) + count
    for counts in out.values():
        counts["total"] = sum(counts.values())
    return dict(sorted(out.items()))


def truncated_note(by_stage: dict[str, dict[str, int]]) -> str:
    """The legend's line on answers cut at the token limit, with their count per stage.

    >>> truncated_note({"S1": {"truncated": 2, "total": 3}, "S2": {"truncated": 0, "total": 4}})
    'Answers cut at the token limit (truncated): 2 of 7 (S1 2). They are judged as cut and stay in the metrics; their scores judge an unfinished text.'
    """  # noqa: E501
    cut = {stage: counts.get("truncated", 0) for stage, counts in by_stage.items()}
    total = sum(counts.get("total", 0) for counts in by_stage.values())
    if not any(cut.values()):
        return f"Answers cut at the token limit (truncated): none of {total:,}."
    where = ", ".join(f"{stage} {n:,}" for stage, n in cut.items() if n)
    return (
        f"Answers cut at the token limit (truncated): {sum(cut.values()):,} of {total:,} "
        f"({where}). They are judged as cut and stay in the metrics; their scores judge an "
        "unfinished text."
    )


def _judge_settings(facts: RunFacts) -> dict[str, Any]:
    jrun = facts.judge_run
    template_versions = sorted(
        {r.judgment.template_version for r in facts.judgments if r.judgment.template_version}
    )
    return {
        "id": jrun.id,
        "endpoint": jrun.endpoint_name,
        "model": jrun.model,
        "base_url": redacted(jrun.base_url),
        "prompt_variant": jrun.prompt_variant,
        "temperature": jrun.temperature,
        "samples": jrun.samples,
        "aggregation": jrun.aggregation,
        # both orders: each pair rubric has 2 x samples judgments per item (see order bias)
        "swap_order": jrun.swap_order,
        "max_tokens": jrun.max_tokens,
        "template_versions": template_versions,
        "status": jrun.status,
        "status_detail": jrun.status_detail,
    }


def _tokens(facts: RunFacts) -> dict[str, int]:
    answers = [r for r, _ in facts.answers]
    judgments = [row.judgment for row in facts.judgments]
    return {
        "generation_prompt": sum(r.prompt_tokens or 0 for r in answers),
        "generation_cached_prompt": sum(r.cached_prompt_tokens or 0 for r in answers),
        "generation_completion": sum(r.completion_tokens or 0 for r in answers),
        "generation_answers": len(answers),
        "judge_prompt": sum(j.prompt_tokens or 0 for j in judgments),
        "judge_cached_prompt": sum(j.cached_prompt_tokens or 0 for j in judgments),
        "judge_completion": sum(j.completion_tokens or 0 for j in judgments),
        "judge_calls": sum(j.calls or 0 for j in judgments),
        "judgments": len(judgments),
    }


def _box_plot(scores: list[ItemScore], model: str) -> BoxPlot:
    """Box plots of item scores per stage and rubric (FairMonitor's Figure 4 layout)."""
    order = list(dict.fromkeys((m.stage, m.rubric) for m in STAGE_METRICS))
    series = []
    for stage, rubric in order:
        values = [
            float(s.score)
            for s in scores
            if s.stage == stage and s.rubric == rubric and s.score is not None
        ]
        series.append((f"{stage} {rubric}\n(n={len(values)})", values))
    return BoxPlot(
        f"Score distributions: {model}",
        series,
        f"judge score ({SCALE})",
        (SCALE.low - 0.5, SCALE.high + 0.5),
    )


def metrics_table(rows: list[MetricRow]) -> tuple[list[str], list[list[str]]]:
    """Factor rows x metric columns (short labels, see ``metrics_legend``), formatted like
    FairMonitor's Table 5 with each value's interval and counts."""
    present = [m for m in table_order() if any(r.metric == m.name for r in rows)]
    factors = sorted({r.factor for r in rows} - {"all"})
    factors += ["all"] if any(r.factor == "all" for r in rows) else []
    cell = {(r.factor, r.metric): r for r in rows}
    body = []
    for factor in factors:
        line = [factor]
        for m in present:
            r = cell.get((factor, m.name))
            line.append("" if r is None else metric_cell(r))
        body.append(line)
    return ["factor", *(m.label for m in present)], body


def table_order() -> list[StageMetric]:
    """The order of metrics in tables: the shares of S1, S3 and S4, then S2's means (the
    paper's S2 metric), then S2's shares >= 4 (ours), so that a table split into panels of
    three keeps each group together."""
    group = {("share", False): 0, ("mean_pct", True): 1, ("share", True): 2}
    return sorted(STAGE_METRICS, key=lambda m: group[(m.kind, m.stage == "S2")])


def metric_cell(row: MetricRow, *, always_unscored: bool = False) -> str:
    """'62 [41-80] n=8', with ' u=2' when items were unscored (always with
    ``always_unscored``) and ' † 3 cut' when 3 scored items were judged on answers cut at the
    token limit; 'n/a n=0 u=3' when nothing was scored; '80 [too few] n=3' or '100 [no
    spread] n=6' for a mean without an interval (``MetricRow.ci_note``).

    >>> metric_cell(MetricRow("m", "f", "S1", "ICS", "x", 62.4, 8, 2, 40.9, 80.1, "wilson"))
    '62 [41-80] n=8 u=2'
    >>> metric_cell(MetricRow("m", "f", "S1", "ICS", "x", 62.4, 8, 0, 40.9, 80.1, "wilson", 3))
    '62 [41-80] n=8 † 3 cut'
    """
    if row.value is None:
        text = "n/a"
    elif row.ci_low is None or row.ci_high is None:
        text = f"{row.value:.0f} [{short_reason(row.ci_note)}]"
    else:
        text = f"{row.value:.0f} [{row.ci_low:.0f}-{row.ci_high:.0f}]"
    text += f" n={row.n_scored}"
    if row.n_unscored or always_unscored:
        text += f" u={row.n_unscored}"
    if row.n_truncated:
        text += f" {TRUNCATED_MARK} {row.n_truncated} cut"
    if row.flagged and row.p_adjusted is not None:
        text += f" {FLAG_MARK} p={p_text(row.p_adjusted)}"
    return text


def p_text(p: float | None) -> str:
    """A p-value for a table cell: three significant digits, '<0.001' below, '' for none.

    >>> p_text(0.01234), p_text(0.00002), p_text(None)
    ('0.0123', '<0.001', '')
    """
    if p is None:
        return ""
    return "<0.001" if p < 0.001 else f"{p:.3g}"


def grid_table(rows: list[MetricRow]) -> Table:
    """One line per by-factor cell: its value, its simultaneous interval, the test against the
    other factors of its metric, the raw and Holm-adjusted p and the flag (or why it was not
    tested)."""
    body = []
    for r in rows:
        sim = (
            f"[{r.sim_low:.0f}-{r.sim_high:.0f}]"
            if r.sim_low is not None and r.sim_high is not None
            else ""
        )
        body.append(
            [
                r.factor,
                next(m.label for m in STAGE_METRICS if m.name == r.metric),
                "n/a" if r.value is None else f"{r.value:.0f}",
                sim,
                str(r.n_scored),
                r.test or "",
                p_text(r.p_value) if r.p_value is not None else f"not tested ({r.test_note})",
                p_text(r.p_adjusted),
                "yes" if r.flagged else "no",
            ]
        )
    return Table(
        GRID_TITLE,
        ["factor", "metric", "value", "simultaneous CI", "n", "test", "p", "p (Holm)", "flag"],
        body,
        notes=grid_legend(rows),
    )


def grid_legend(rows: Sequence[MetricRow]) -> list[str]:
    """How the by-factor cells are tested and corrected, and why Holm."""
    m = sum(r.p_value is not None for r in rows)
    confidence = next((r.sim_confidence for r in rows if r.sim_confidence is not None), None)
    valued = sum(r.value is not None for r in rows)
    sim = (
        f"each at {confidence * 100:.3g} % (Bonferroni over the {valued} cells with a value), "
        "so that all of them hold together with 95 %"
        if confidence is not None
        else "none (no cell has an interval)"
    )
    return [
        f"Each factor's cell is tested against the other factors' items of the same metric: "
        f"{TEST_NAMES[FISHER]} for a share, {TEST_NAMES[WELCH]} for a mean. The {m} p-values "
        f"are adjusted by {MULTIPLICITY_NAMES[HOLM]} over every tested cell of the table; "
        f"{FLAG_MARK} and flag 'yes': adjusted p < {GRID_ALPHA:g}.",
        "Why Holm: the table's claim is 'this factor is treated differently', so one false "
        f"flag among its cells is already a wrong verdict; Holm keeps the chance of any at "
        f"{GRID_ALPHA:g} however the cells depend on each other (a rubric's mean and share "
        "move together), and is never weaker than Bonferroni.",
        f"Simultaneous CI: {sim}.",
    ]


def short_reason(note: str) -> str:
    """A missing interval's reason in two words, for a table cell.

    >>> short_reason("too few items for an interval (3; 5 needed)"), short_reason("")
    ('too few', 'no interval')
    """
    for short in ("too few", "no spread"):
        if note.startswith(short):
            return short
    return "no interval"


def metrics_legend(*, always_unscored: bool = False) -> list[str]:
    """What a stage-metric table's cells and short column labels mean."""
    counted = "" if always_unscored else "; shown when there are any"
    return [
        "Cell: value in % [95 % interval] n=scored items, u=unscored items (left out of the "
        f"value{counted}).",
        f"X>=k: share of scored items whose rubric X score is >= k; interval: "
        f"{METHOD_NAMES[SHARE]}.",
        f"X mean: mean rubric X score / {SCALE.high} x 100 (% of the maximum); interval: "
        f"{METHOD_NAMES[MEAN]}; 'too few' below {MIN_MEAN_N} scored items and 'no spread' "
        "when every item has the same score (a zero-width interval would claim a certainty "
        "those items do not give).",
        f"{TRUNCATED_MARK} k cut: k of the n scored items were judged on an answer the model "
        "stopped at the token limit (flag truncated). They stay in the value: dropping them "
        "would leave out the longest answers and favour models that answer briefly.",
        "ICS: idea consistency (S1, S4); TCS, PCS, ETCS: thematic, plot and emotional-tendency "
        "consistency of stories A and B (S2); SBAS: stereotype and bias avoidance (S3).",
        f"{FLAG_MARK} p=x: the factor's cell differs from the other factors' (Holm-adjusted p "
        f"x < {GRID_ALPHA:g} over the table's cells; see '{GRID_TITLE}').",
    ]


def metric_glossary() -> list[str]:
    """Each table label with its metric's name in report.json and metrics.csv and its
    definition, e.g. 'S1 ICS>=3 = "S1 ICS share>=3 (%)": percentage of ...'."""
    return [f'{m.label} = "{m.name}": {definition(m)}.' for m in table_order()]


def counts_phrase(counts: dict[str, int]) -> str:
    """'call_failed 3, unparsable 2', or 'none'.

    >>> counts_phrase({"unparsable": 2, "call_failed": 3})
    'call_failed 3, unparsable 2'
    """
    return ", ".join(f"{k} {v:,}" for k, v in sorted(counts.items())) or "none"


def tokens_phrase(tokens: dict[str, int]) -> str:
    """The tokens of a run in words.

    >>> tokens_phrase({"generation_prompt": 12345, "generation_completion": 3456,
    ...     "generation_answers": 108, "judge_prompt": 20000, "judge_completion": 900,
    ...     "judge_calls": 110, "judgments": 108})
    'generation 12,345 prompt + 3,456 completion (108 answers); judge 20,000 prompt + 900 completion (110 calls, 108 judgments)'
    """  # noqa: E501
    t = tokens
    return (
        f"generation {t['generation_prompt']:,} prompt + {t['generation_completion']:,} "
        f"completion ({t['generation_answers']:,} answers); judge {t['judge_prompt']:,} prompt "
        f"+ {t['judge_completion']:,} completion ({t['judge_calls']:,} calls, "
        f"{t['judgments']:,} judgments)"
    )


def human(value: Any) -> str:
    """A setting's value for people: lists joined, None as 'none', floats without noise.

    >>> human(["v1", "v2"]), human(None), human(0.5), human("plain")
    ('v1, v2', 'none', '0.5', 'plain')
    """
    if value is None:
        return "none"
    if isinstance(value, list | tuple | set):
        return ", ".join(human(v) for v in value) or "none"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)
