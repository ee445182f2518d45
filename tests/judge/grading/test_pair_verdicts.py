"""Reading pairwise judge replies (``judge.grading.pair_verdicts``): each reply below is
written by hand with the verdict a person reads in it, or why a person could not read one
(then the reply must be ``unreadable``, never a letter)."""

from __future__ import annotations

import pytest

from judge.grading.pair_verdicts import NO_VERDICT, parse_pair_verdict


@pytest.mark.parametrize(
    ("reply", "verdict", "explanation"),
    [
        ('{"explanation": "A is accurate.", "verdict": "A"}', "A", "A is accurate."),
        ('{"explanation": "Neither.", "verdict": "TIE"}', "tie", "Neither."),
        ('```json\n{"verdict": "b", "explanation": "B."}\n```', "B", "B."),
        ('{"Verdict": "B"}', "B", None),  # the key's case does not matter
        (
            "Answer A guesses; answer B reasons.\nVerdict: B",
            "B",
            "Answer A guesses; answer B reasons.",
        ),
        ("**Final verdict:** tie.", "tie", None),
    ],
)
def test_readable_replies(reply: str, verdict: str, explanation: str | None) -> None:
    read = parse_pair_verdict(reply)
    assert (read.verdict, read.explanation, read.reason) == (verdict, explanation, None)


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("", "empty reply"),
        ("Both answers have merit.", NO_VERDICT),
        # a verdict line that is not the last line is reasoning, not the verdict
        ("Verdict: A\nBut on reflection B is also fine.", NO_VERDICT),
        ('{"explanation": "A is better"}', 'the JSON reply has no "verdict" field'),
        ('{"explanation": "x", "verdict": "C"}', "verdict 'C' is not A, B or tie"),
        ('{"explanation": "x", "verdict": 1}', "verdict 1 is not A, B or tie"),
        ("Verdict: both", "verdict 'both' is not A, B or tie"),
        ('{"verdict": "A"', "the reply starts as JSON but is not valid JSON"),
        ('["A"]', "the JSON reply is not an object"),
    ],
)
def test_unreadable_replies_say_why(reply: str, reason: str) -> None:
    read = parse_pair_verdict(reply)
    assert read.verdict == "unreadable"
    assert read.reason is not None and read.reason.startswith(reason)
