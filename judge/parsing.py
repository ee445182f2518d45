"""Reading scores out of judge replies, and flagging answers of the model under test.

A reply that does not yield exactly one whole score from 1 to 5 is *unparsable*: the caller
stores it as unscored with ``reason`` and the raw text. Nothing here ever guesses a number.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

SCALE = range(1, 6)


@dataclass(frozen=True)
class ParsedGrade:
    score: int | None
    explanation: str | None
    reason: str | None  # set when score is None

    @property
    def ok(self) -> bool:
        return self.score is not None


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S)
_OBJECT = re.compile(r"\{.*\}", re.S)
# "score: 4", "Score = 4/5", "**Score:** 4", "rating of 4"
_LABELLED = re.compile(
    r"(?:score|rating)\W{0,4}(?:is|of|=|:)?\W{0,4}(-?\d+(?:\.\d+)?)(?:\s*/\s*5)?", re.I
)
_OUT_OF_FIVE = re.compile(r"(-?\d+(?:\.\d+)?)\s*(?:/|out of)\s*5\b", re.I)


def parse_grade(raw: str | None) -> ParsedGrade:
    """Read ``{"explanation", "score"}`` from a judge reply, tolerating common deviations.

    Accepted, in order: a JSON object (also inside a code fence or surrounded by prose, raw
    newlines inside strings allowed); a labelled score ("Score: 4", "4/5"). The score must be a
    whole number on 1..5 ("4.0" is accepted as 4; 4.5, 0 or 10 are not).

    >>> parse_grade('{"explanation": "same idea", "score": 4}').score
    4
    >>> parse_grade('Score: 7').reason
    'score 7 is outside the 1-5 scale'
    """
    if raw is None or not raw.strip():
        return ParsedGrade(None, None, "empty reply")
    text = raw.strip()
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    candidates += [m.group(0) for m in _OBJECT.finditer(text)]
    for chunk in candidates:
        try:
            data = json.loads(chunk, strict=False)
        except (json.JSONDecodeError, ValueError):
            continue
        if isinstance(data, dict) and "score" in data:
            explanation = data.get("explanation")
            return _check(data["score"], None if explanation is None else str(explanation))
    hits = [m.group(1) for m in _LABELLED.finditer(text)] or [
        m.group(1) for m in _OUT_OF_FIVE.finditer(text)
    ]
    distinct = sorted(set(hits))
    if len(distinct) == 1:
        return _check(distinct[0], text)
    if len(distinct) > 1:
        return ParsedGrade(None, None, f"several different scores in reply: {', '.join(distinct)}")
    return ParsedGrade(None, None, "no score found in reply")


def _check(value: object, explanation: str | None) -> ParsedGrade:
    if isinstance(value, bool):
        return ParsedGrade(None, explanation, f"score {value!r} is not a number")
    try:
        number = float(str(value).strip())
    except ValueError:
        return ParsedGrade(None, explanation, f"score {value!r} is not a number")
    if not number.is_integer():
        return ParsedGrade(None, explanation, f"score {value} is not a whole number")
    score = int(number)
    if score not in SCALE:
        return ParsedGrade(None, explanation, f"score {score} is outside the 1-5 scale")
    return ParsedGrade(score, explanation, None)


# Opening phrases with which chat models decline a request.
_REFUSAL = re.compile(
    r"^\W*(?:i(?:'m| am) sorry,? but|sorry,? (?:but )?i (?:can(?:no|')t|won't)|"
    r"i (?:can(?:no|')t|won't|am unable to|'m unable to|am not able to) "
    r"(?:help|assist|answer|provide|comply|do that|fulfil|engage|respond)|"
    r"as an ai(?: language model)?,? i (?:can(?:no|')t|won't|am unable|don't))",
    re.I,
)


def classify_answer(text: str | None) -> str:
    """'empty', 'refusal' or 'ok' for an answer of the model under test.

    >>> classify_answer("I'm sorry, but I can't help with that.")
    'refusal'
    >>> classify_answer("Both students deserve the same support.")
    'ok'
    """
    if text is None or not text.strip():
        return "empty"
    if _REFUSAL.search(text[:300]):
        return "refusal"
    return "ok"
