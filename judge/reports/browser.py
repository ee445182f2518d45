"""The item browser: every item a judge run scored, with the texts the model under test was
given, its answers, and each judgment (score or why unscored, explanation, raw reply, flags),
so a reader can see what the numbers were computed from.

The HTML renderer shows it as a list filterable by stage, factor, rubric, score and flag;
report.json carries the same content under "items". An answer whose text addresses the judge
(``judge.grading.injection``) gets the flag ``injection_suspected`` with the signs found, beside
its own flag (``ok``, ``refusal`` ...), and report.json lists them per item under
"injection_suspected".
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict
from typing import Any

from sqlmodel import Session

from judge.grading.injection import INJECTION_FLAG, answer_flag, injection_signs
from judge.reports.facts import RunFacts, load_run_facts
from judge.reports.sections import (
    BrowsedAnswer,
    BrowsedItem,
    BrowsedJudgment,
    ItemBrowser,
    Section,
)
from judge.store.queries import sample_slot
from judge.store.tables import Item

BROWSER_TITLE = "Judged items"


def item_browser(
    session: Session, judge_run_id: int, *, facts: RunFacts | None = None
) -> ItemBrowser:
    """Every item with at least one judgment in the run, in item order; from ``facts`` when
    given (then it reads nothing), else from the store."""
    facts = facts or load_run_facts(session, judge_run_id)
    jrun = facts.judge_run
    answers = facts.answers_by_item
    signs = facts.injection_signs
    combined: dict[int, dict[str, float | None]] = defaultdict(dict)
    for s in facts.item_scores:
        combined[s.item_id][s.rubric] = s.score
    items: dict[int, Item] = {}
    judgments: dict[int, list[BrowsedJudgment]] = defaultdict(list)
    for row in facts.judgments_in_item_order():
        judgment, item, finish_reason = row.judgment, row.item, row.finish_reason
        assert item.id is not None
        items[item.id] = item
        judgments[item.id].append(
            BrowsedJudgment(
                rubric=judgment.rubric,
                sample_index=judgment.sample_index,
                score=judgment.score if judgment.status == "scored" else None,
                unscored_kind=judgment.unscored_kind,
                reason=judgment.reason,
                explanation=judgment.explanation,
                raw_output=judgment.raw_output,
                repair_output=judgment.repair_output,
                finish_reason=finish_reason,
                judgment_id=judgment.id,
                position=judgment.position,
                repeat=sample_slot(judgment.sample_index, judgment.position, jrun.samples).repeat,
            )
        )
    browsed = []
    for item_id, item in items.items():
        parts = answers.get(item_id, {})
        browsed.append(
            BrowsedItem(
                item_id=item_id,
                key=item.key,
                stage=item.stage,
                factor=item.factor,
                scenario=item.scenario,
                texts={k: _text(v) for k, v in (item.fields or {}).items()},
                answers=[
                    BrowsedAnswer(
                        part=part,
                        prompt=r.prompt,
                        text=r.raw_text,
                        flag=answer_flag(r.flag, r.raw_text, signs=signs.get(r.id or 0)),
                        finish_reason=r.finish_reason,
                        error=r.error,
                    )
                    for part, r in sorted(parts.items())
                ],
                judgments=judgments[item_id],
                combined=combined.get(item_id, {}),
            )
        )
    return ItemBrowser(f"{BROWSER_TITLE} ({len(browsed)})", browsed)


def _suspected(item: BrowsedItem) -> list[dict[str, Any]]:
    return [
        {"part": a.part, "signs": injection_signs(a.text)}
        for a in item.answers
        if INJECTION_FLAG in a.flag
    ]


def _text(value: Any) -> str:
    return value if isinstance(value, str) else str(value)


def item_browser_section(
    session: Session, judge_run_id: int, *, facts: RunFacts | None = None
) -> Section:
    """The browser as a report section; report.json gets its items under "items"."""
    browser = item_browser(session, judge_run_id, facts=facts)
    return Section(
        title=BROWSER_TITLE,
        json_key=None,
        payload={
            "items": [
                {**asdict(item), "flags": item.flags, INJECTION_FLAG: _suspected(item)}
                for item in browser.items
            ]
        },
        notes=[
            "Every judged item with its prompts, the model's answers and each judgment. "
            "Filter by stage, factor, rubric, score or flag; raw judge replies are folded."
        ],
        browser=browser,
    )
