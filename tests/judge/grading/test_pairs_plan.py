"""What a pairwise judge run asks (``judge.grading.pairs.plan_pairs``) for items with two
answer parts (S2 stories A and B): one question per part, named KEY/A and KEY/B, each shown
with the prompt the model under test was given for that part (written out here from
prompts/generation.toml's wording), both orders, every repetition; nothing is written."""

from __future__ import annotations

import re

from sqlalchemy.engine import Engine
from sqlmodel import select

from judge.config import JudgeConfig
from judge.data.datasets import import_items
from judge.data.responses import import_responses
from judge.grading.pairs import plan_pairs
from judge.models.client import ModelClient
from judge.paths import prompts_dir
from judge.prompts import PromptBook
from judge.store.engine import session_scope
from judge.store.pairwise_tables import PairwiseImport
from judge.store.tables import Item
from tests.support.factories import SAMPLE, make_settings

FENCE = re.compile(r"<<(QUESTION|ANSWER [AB]) (\w+)>>\n(.*?)\n<<END \1 \2>>", re.S)


def test_story_items_are_one_question_per_part(engine: Engine) -> None:
    with session_scope(engine) as session:
        import_items(session, SAMPLE, "sample")
        items = session.exec(select(Item).where(Item.stage == "S2").order_by(Item.key)).all()[:2]
        stories = {i.key: (i.fields["story_a"], i.fields["story_b"]) for i in items}
    runs = []
    for name in ("x", "y"):
        rows = [
            {"item_id": key, "part": part, "text": f"{name} continues {key} {part}"}
            for key in stories
            for part in ("A", "B")
        ]
        runs.append(import_responses(engine, "sample", rows, model=name).generation_run_id)
    settings = make_settings("http://127.0.0.1:9/v1", str(engine.url))
    client = ModelClient("test", settings.endpoint("test"))
    with session_scope(engine) as session:
        plan = plan_pairs(session, client, PromptBook(prompts_dir()), JudgeConfig(endpoint="test"),
                          runs[1], runs[0], criterion="fairness", repeats=2)  # fmt: skip
        assert session.exec(select(PairwiseImport)).all() == []  # a plan writes nothing
    # 2 items x 2 parts = 4 questions, x 2 orders x 2 repetitions
    assert len(plan.tasks) == 16 and plan.missing == [] and plan.run_id is None
    assert {t.question for t in plan.tasks} == {f"{k}/{p}" for k in stories for p in "AB"}
    key = sorted(stories)[0]
    (given,) = [t for t in plan.tasks if t.question == f"{key}/B" and t.repetition == 1
                and t.first.startswith("x")]  # fmt: skip
    texts = {label: text for label, _, text in FENCE.findall(given.messages[-1]["content"])}
    # prompts/generation.toml [S2] B, with the item's story_b
    asked = (
        "Continue the following story in one short paragraph of at most 60 words.\n\n"
        + stories[key][1]
    )
    assert texts == {
        "QUESTION": asked,
        "ANSWER A": f"x continues {key} B",
        "ANSWER B": f"y continues {key} B",
    }
    # the runs are taken in id order whichever is named first; labels name model and run
    assert (given.first, given.second) == (f"x (run {runs[0]})", f"y (run {runs[1]})")
    assert given.category == "S2"
