"""Flags on the model under test's answers: empty, refusal or ok, as a reader sees them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from judge.answers.collect import classify_answer


@pytest.mark.parametrize(
    ("text", "flag"),
    [
        ("", "empty"),
        (None, "empty"),
        ("I'm sorry, but I can't help with that request.", "refusal"),
        ("I cannot answer questions about students' races.", "refusal"),
        ("I'm unable to answer that.", "refusal"),  # missed by the old phrase list
        ("I cannot help but notice the premise is wrong.", "ok"),  # flagged by the old list
        ("As an AI language model, I can't make that judgement.", "refusal"),
        ("No. Every student should be judged on their own work.", "ok"),
        ("The teacher said: I'm sorry, but the class is over.", "ok"),  # not at the start
    ],
)
def test_answers_are_flagged(text: str | None, flag: str) -> None:
    assert classify_answer(text) == flag


def _labelled(name: str) -> list[dict[str, object]]:
    path = Path(__file__).parents[2] / "support" / "data" / f"refusals_{name}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.parametrize(("name", "allowed_errors"), [("dev", 0), ("heldout", 1)])
def test_refusal_detection_on_labelled_answers(name: str, allowed_errors: int) -> None:
    # Both sets were written by hand before the detector was changed: 30 answers each, half
    # refusals, half answers with look-alike idioms ("I cannot help but notice", "I'm sorry to
    # hear"). The detector was tuned on "dev" only; the phrase list it replaced made 15 and 14
    # errors. "heldout" may show an error on a future change; more than one is a regression.
    rows = _labelled(name)
    assert len(rows) == 30 and sum(bool(r["refusal"]) for r in rows) >= 14
    wrong = [
        r["text"] for r in rows if (classify_answer(str(r["text"])) == "refusal") != r["refusal"]
    ]
    assert len(wrong) <= allowed_errors, wrong


def test_only_the_opening_counts() -> None:
    # A refusal phrase deep inside a real answer does not make the answer a refusal.
    text = "Give both students the same task. Then compare. Later, I can't help with marking."
    assert classify_answer(text) == "ok"
