"""A store holding the whole loop once, for the dashboard's page tests and its browser test:
48 of the bundled sample's 72 items (``small_sample``: every stage) answered and judged
through the scripted stub in both orders (order bias), two planted unscored judgments, three
raters' ratings of every judged item, a counterfactual copy judged (the judge's own check),
and an award audit with follow-ups the judge classified. A Label Studio campaign is not in
it: tests/server/dashboard/test_campaign_page.py makes one against the real Label Studio.

What is planted is known here, so tests can check pages against it as well as against the
API: ``UNSCORED_ITEMS`` get a judge reply with no score; the raters' scores are seeded.
"""

from __future__ import annotations

import json
import random
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlmodel import Session, select

from judge.store.engine import make_engine
from judge.store.tables import Item, Judgment
from server import usecases
from server.usecases import audits, followups
from server.usecases.ratings import import_rating_rows
from server.usecases.requests import JudgeRequest
from tests.judge.audits.test_runner import QUESTION, always_group_a
from tests.support import stores
from tests.support.factories import make_settings
from tests.support.stub_openai import StubServer

UNSCORED_ITEMS = ("s1-gender-1", "s4-subject-1")
"""Items whose judge reply carries no score: their questions' first words are matched in the
judge prompt (the stub echoes the question as the answer)."""
RATERS = ("rater-a", "rater-b", "rater-c")
SMALL_FACTORS = ("gender", "grade_age", "subject")
"""The small loop (``small_sample``): stages S1 and S4 whole (36 items scored with ICS, as
many as the alt-test needs: 30 or more per rubric, judge/stats/alttest.py), S2 and S3 on
these three factors only (2 items each): 48 items, 60 judgments a run instead of 108, the
two ``UNSCORED_ITEMS`` among them."""
WHOLE_STAGES = ("S1", "S4")
AWARD = {"levels": [5], "pairs_per_level": 2, "followup": True}
AWARD_PROMPTS = 1 * 2 * 4  # 1 level x 2 pairs x 4 counterbalanced variants
JUDGE_CLASS = "justified"


@dataclass(frozen=True)
class Loop:
    """The template file and the ids in it."""

    path: Path
    generation_run_id: int
    judge_run_id: int
    copy_judge_run_id: int  # the counterfactual copy's judge run
    audit_run_id: int
    unscored_questions: tuple[str, ...]

    def copy(self, target: Path) -> str:
        """A copy of the store at ``target``; its URL."""
        return stores.copy_store(self.path, target)


def _questions(sample: Path) -> dict[str, str]:
    with sample.open(encoding="utf-8") as f:
        items = [json.loads(line) for line in f]
    return {i["id"]: i["question"] for i in items if i["id"] in UNSCORED_ITEMS}


NO_SCORE = "I would rather not put a number on this answer."


def _judge_responder(questions: tuple[str, ...]) -> Any:
    """The judge declines to score the planted items, and declines again when asked to
    repair its reply (the repair request quotes the first reply)."""

    def respond(messages: list[dict[str, str]]) -> str | None:
        judging = any(m["role"] == "system" for m in messages)
        text = "\n".join(m["content"] for m in messages)
        if judging and (NO_SCORE in text or any(q in text for q in questions)):
            return NO_SCORE
        return None  # the stub's own answer or grade

    return respond


def _audit_responder(messages: list[dict[str, str]]) -> str | int | None:
    if any(m["role"] == "system" for m in messages):  # the judge classifying a follow-up
        return json.dumps({"explanation": "cites the scores", "class": JUDGE_CLASS})
    if QUESTION.search(messages[0]["content"]):
        return always_group_a(messages)
    return None


def small_sample(path: Path, sample_file: Path) -> Path:
    """The sample's items of the small loop (``SMALL_FACTORS``) written to ``path`` (JSON
    lines, in the sample's order): every stage, section and link of the loop's pages at a
    little over half its judgments, for tests whose checks do not depend on the store's
    size (what a page computes grows with it, and ``?fresh=1`` and each warm compute it)."""

    def kept(item: dict[str, Any]) -> bool:
        return item["stage"] in WHOLE_STAGES or item["factor"] in SMALL_FACTORS

    lines = sample_file.read_text(encoding="utf-8").splitlines()
    kept_lines = [line for line in lines if line.strip() and kept(json.loads(line))]
    path.write_text("".join(line + "\n" for line in kept_lines), encoding="utf-8")
    return path


def build_loop(path: Path, sample_template: Path, sample_file: Path) -> Loop:
    """Build the store at ``path`` from a copy of the sample template (see the module)."""
    url = stores.copy_store(sample_template, path)
    engine = make_engine(url)
    questions = tuple(_questions(sample_file).values())
    with StubServer(responder=_judge_responder(questions)) as stub:
        settings = make_settings(stub.base_url, url)
        gen = usecases.generate(
            engine, settings, usecases.GenerateRequest(dataset=stores.SAMPLE_DATASET)
        )
        request = JudgeRequest(generation_run_id=gen.run_id, swap_order=True)
        jud = usecases.judge(engine, settings, request)
        copy = usecases.counterfactual_audit(engine, settings, jud.run_id, swap=["all"])
    rng = random.Random(30)
    with Session(engine) as session:
        keys = {i.id: i.key for i in session.exec(select(Item))}
        rows = []
        seen = set()
        for j in session.exec(select(Judgment).where(Judgment.judge_run_id == jud.run_id)):
            if (j.item_id, j.rubric) in seen:
                continue
            seen.add((j.item_id, j.rubric))
            base = j.score if j.score is not None else 3
            for rater in RATERS:
                score = min(5, max(1, base + rng.choice((-1, 0, 0, 1))))
                rows.append(
                    {"item_id": keys[j.item_id], "rubric": j.rubric, "rater": rater, "score": score}
                )
        import_rating_rows(session, settings, gen.run_id, rows)
        session.commit()
    with StubServer(responder=_audit_responder) as stub:
        settings = make_settings(stub.base_url, url)
        audit = audits.run_audit(engine, settings, "award", AWARD, max_tokens=50)
        followups.classify_followups(engine, settings, audit.run_id)
    engine.dispose()
    stores._settle(path, make_engine(url))
    return Loop(path, gen.run_id, jud.run_id, copy.judge_run_id, audit.run_id, questions)


def copy_loop(loop: Loop, folder: Path) -> Loop:
    """The loop's store copied into ``folder`` (a test's own)."""
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / "loop.db"
    shutil.copyfile(loop.path, target)
    return Loop(
        target,
        loop.generation_run_id,
        loop.judge_run_id,
        loop.copy_judge_run_id,
        loop.audit_run_id,
        loop.unscored_questions,
    )
