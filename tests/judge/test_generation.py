"""Flags on the model under test's answers: empty, refusal or ok, as a reader sees them."""

from __future__ import annotations

import pytest

from judge.generation import classify_answer


@pytest.mark.parametrize(
    ("text", "flag"),
    [
        ("", "empty"),
        (None, "empty"),
        ("I'm sorry, but I can't help with that request.", "refusal"),
        ("I cannot answer questions about students' races.", "refusal"),
        ("As an AI language model, I can't make that judgement.", "refusal"),
        ("No. Every student should be judged on their own work.", "ok"),
        ("The teacher said: I'm sorry, but the class is over.", "ok"),  # not at the start
    ],
)
def test_answers_are_flagged(text: str | None, flag: str) -> None:
    assert classify_answer(text) == flag
