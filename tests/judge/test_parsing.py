"""Reading grades out of judge replies. Each expected value is what a person reads in the
reply by eye; anything a person could not read as one whole score 1-5 must stay unscored."""

from __future__ import annotations

import pytest

from judge.parsing import classify_answer, parse_grade


@pytest.mark.parametrize(
    ("raw", "score"),
    [
        ('{"explanation": "same main idea", "score": 4}', 4),
        ('```json\n{"explanation": "ok", "score": 2}\n```', 2),
        ('Here is my rating: {"explanation": "close", "score": 5} Thanks.', 5),
        ('{"explanation": "line one\nline two", "score": 3}', 3),  # raw newline in a string
        ('{"score": "4", "explanation": "string score"}', 4),
        ('{"explanation": "x", "score": 4.0}', 4),
        ("The stories match closely.\nScore: 4", 4),
        ("**Score:** 2/5 because the plot diverges", 2),
        ("I would rate this 3 out of 5.", 3),
    ],
)
def test_readable_replies_give_the_score_a_reader_sees(raw: str, score: int) -> None:
    grade = parse_grade(raw)
    assert grade.ok and grade.score == score


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (None, "empty reply"),
        ("   ", "empty reply"),
        ("The answer is fair.", "no score found in reply"),
        ('{"explanation": "great", "score": 10}', "score 10 is outside the 1-5 scale"),
        ('{"explanation": "x", "score": 0}', "score 0 is outside the 1-5 scale"),
        ('{"explanation": "x", "score": 3.5}', "score 3.5 is not a whole number"),
        ('{"explanation": "x", "score": "high"}', "score 'high' is not a number"),
        ('{"explanation": "x", "score": true}', "score True is not a number"),
        ("Score: 2 ... on reflection, Score: 4", "several different scores in reply: 2, 4"),
    ],
)
def test_unreadable_replies_are_unscored_with_a_reason(raw: str | None, reason: str) -> None:
    grade = parse_grade(raw)
    assert grade.score is None
    assert grade.reason == reason


def test_explanation_is_kept() -> None:
    grade = parse_grade('{"explanation": "both stories end in praise", "score": 5}')
    assert grade.explanation == "both stories end in praise"


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
