"""Reading grades out of judge replies. Each expected value is what a person reads in the
reply by eye; anything a person could not read as one whole score 1-5 must stay unscored."""

from __future__ import annotations

import pytest

from judge.grading.parsing import Scored, Unscored, UnscoredKind, parse_grade

NO_FIELD = 'the JSON reply has no "score" field'


@pytest.mark.parametrize(
    ("raw", "score"),
    [
        ('{"explanation": "same main idea", "score": 4}', 4),
        ('```json\n{"explanation": "ok", "score": 2}\n```', 2),
        ('Here is my rating: {"explanation": "close", "score": 5} Thanks.', 5),
        ('{"explanation": "line one\nline two", "score": 3}', 3),  # raw newline in a string
        ('{"score": "4", "explanation": "string score"}', 4),
        ('{"explanation": "x", "score": 4.0}', 4),
        ('{"Score": 3, "explanation": "key in title case"}', 3),
        # the JSON object's field wins over prose numbers outside it
        ('Score: 2 at first glance.\n{"explanation": "on reflection", "score": 4}', 4),
        # the same score given twice, once as a string, is still one score
        ('{"score": 4}\n```json\n{"explanation": "again", "score": "4"}\n```', 4),
        ("The stories match closely.\nScore: 4", 4),
        ("**Score:** 2/5 because the plot diverges", 2),
        ("I would rate this 3 out of 5.", 3),
        ("The set {1, 2} is not JSON. Score: 5", 5),  # braces, but no JSON object
    ],
)
def test_readable_replies_give_the_score_a_reader_sees(raw: str, score: int) -> None:
    grade = parse_grade(raw)
    assert isinstance(grade, Scored) and grade.score == score


@pytest.mark.parametrize(
    ("raw", "kind", "reason"),
    [
        (None, "empty_reply", "empty reply"),
        ("   ", "empty_reply", "empty reply"),
        ("The answer is fair.", "no_score", "no score found in reply"),
        ('{"explanation": "great", "score": 10}', "off_scale", "score 10 is outside the 1-5 scale"),
        ('{"explanation": "x", "score": 0}', "off_scale", "score 0 is outside the 1-5 scale"),
        ('{"explanation": "x", "score": 3.5}', "not_a_number", "score 3.5 is not a whole number"),
        ('{"explanation": "x", "score": "high"}', "not_a_number", "score 'high' is not a number"),
        ('{"explanation": "x", "score": true}', "not_a_number", "score True is not a number"),
        (
            "Score: 2 ... on reflection, Score: 4",
            "several_scores",
            "several different scores in reply: 2, 4",
        ),
        # A JSON reply without a "score" field is unscored: the number in its prose is not read.
        ('{"explanation": "score: 3 because ..."}', "no_score", NO_FIELD),
        ('{"explanation": "I would give it 4/5"}', "no_score", NO_FIELD),
        ('```json\n{"explanation": "Rating: 2"}\n```', "no_score", NO_FIELD),
        ('Score: 4\n{"explanation": "the ideas match"}', "no_score", NO_FIELD),
        ('{"result": {"explanation": "x", "score": 4}}', "no_score", NO_FIELD),  # nested
        (
            'Draft: {"explanation": "a"} Final: {"explanation": "score: 3"}',
            "no_score",
            NO_FIELD,
        ),
        ('{"explanation": "x", "score": null}', "not_a_number", "score None is not a number"),
        (
            '{"explanation": "first", "score": 2}\n{"explanation": "second", "score": 4}',
            "several_scores",
            "several different scores in reply: 2, 4",
        ),
    ],
)
def test_unreadable_replies_are_unscored_with_kind_reason_and_raw(
    raw: str | None, kind: str, reason: str
) -> None:
    grade = parse_grade(raw)
    assert isinstance(grade, Unscored) and grade.score is None
    assert grade.kind == UnscoredKind(kind) and grade.reason == reason
    assert grade.raw == raw  # the raw reply travels with the result


def test_explanation_is_kept() -> None:
    grade = parse_grade('{"explanation": "both stories end in praise", "score": 5}')
    assert grade.explanation == "both stories end in praise"


def test_json_reply_without_score_keeps_its_explanation_but_reads_no_number() -> None:
    raw = '{"explanation": "score: 3 because the main ideas match"}'
    grade = parse_grade(raw)
    assert isinstance(grade, Unscored) and grade.kind is UnscoredKind.NO_SCORE
    assert grade.score is None  # not 3: that number is prose inside the explanation
    assert grade.explanation == "score: 3 because the main ideas match"
    assert grade.raw == raw
