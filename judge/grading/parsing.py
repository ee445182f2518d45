"""Reading scores out of judge replies, as a typed result: ``Scored`` or ``Unscored``.

A reply that does not yield exactly one whole score on the scale is ``Unscored`` with a kind,
a reason and the raw text; the caller stores it as such. Nothing here ever guesses a number.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from judge.vocab import SCALE


class UnscoredKind(StrEnum):
    """Why a judgment has no score. Stored in ``Judgment.unscored_kind``."""

    EMPTY_REPLY = "empty_reply"
    NO_SCORE = "no_score"
    SEVERAL_SCORES = "several_scores"
    NOT_A_NUMBER = "not_a_number"
    OFF_SCALE = "off_scale"
    UNPARSABLE = "unparsable"  # still unreadable after the repair request
    CALL_FAILED = "call_failed"  # the endpoint failed for good (retries used up)
    MISSING_ANSWER = "missing_answer"  # an answer part was never generated, empty or failed

    @property
    def retry_on_rerun(self) -> bool:
        """Failures outside the judge's reply are tried again when the run is resumed."""
        return self in (UnscoredKind.CALL_FAILED, UnscoredKind.MISSING_ANSWER)


@dataclass(frozen=True)
class Scored:
    score: int
    explanation: str | None

    ok = True


@dataclass(frozen=True)
class Unscored:
    kind: UnscoredKind
    reason: str
    raw: str | None = None
    explanation: str | None = None

    ok = False
    score = None


Grade = Scored | Unscored

# "score: 4", "Score = 4/5", "**Score:** 4", "rating of 4"
_LABELLED = re.compile(
    r"(?:score|rating)\W{0,4}(?:is|of|=|:)?\W{0,4}(-?\d+(?:\.\d+)?)(?:\s*/\s*5)?", re.I
)
_OUT_OF_FIVE = re.compile(r"(-?\d+(?:\.\d+)?)\s*(?:/|out of)\s*5\b", re.I)


def parse_grade(raw: str | None) -> Grade:
    """Read ``{"explanation", "score"}`` from a judge reply, tolerating common deviations.

    A reply that holds a JSON object (also inside a code fence or surrounded by prose, raw
    newlines inside strings allowed) is read from that object alone: its "score" field (the key
    may differ in case) is the score, and an object without one is unscored, never searched for
    a number in its text. Only a reply with no JSON object at all may give a labelled score
    ("Score: 4", "4/5"). The score must be a whole number on the scale ("4.0" is accepted as 4;
    4.5, 0 or 10 are not).

    >>> parse_grade('{"explanation": "same idea", "score": 4}').score
    4
    >>> parse_grade('{"explanation": "score: 3 because the ideas match"}').reason
    'the JSON reply has no "score" field'
    >>> parse_grade('Score: 7').reason
    'score 7 is outside the 1-5 scale'
    """
    if raw is None or not raw.strip():
        return Unscored(UnscoredKind.EMPTY_REPLY, "empty reply", raw)
    text = raw.strip()
    objects = _json_objects(text)
    scored = [obj for obj in objects if _score_keys(obj)]
    if scored:
        return _from_objects(scored, raw)
    if objects:
        # The judge answered in JSON but left the score out: a number in the explanation
        # ("score: 3 because...") is prose about the rating, not the rating, so nothing is read.
        return Unscored(
            UnscoredKind.NO_SCORE,
            'the JSON reply has no "score" field',
            raw,
            _explanation(objects[0]),
        )
    hits = [m.group(1) for m in _LABELLED.finditer(text)] or [
        m.group(1) for m in _OUT_OF_FIVE.finditer(text)
    ]
    distinct = sorted(set(hits))
    if len(distinct) == 1:
        return _check(distinct[0], text, raw)
    if len(distinct) > 1:
        return Unscored(
            UnscoredKind.SEVERAL_SCORES,
            f"several different scores in reply: {', '.join(distinct)}",
            raw,
        )
    return Unscored(UnscoredKind.NO_SCORE, "no score found in reply", raw)


def _json_objects(text: str) -> list[dict[str, Any]]:
    """Every top-level JSON object in the reply, in the order they appear: the whole reply, or
    objects inside a code fence or amid prose (raw newlines inside strings allowed)."""
    decoder = json.JSONDecoder(strict=False)
    found: list[dict[str, Any]] = []
    at = text.find("{")
    while at != -1:
        try:
            data, end = decoder.raw_decode(text, at)
        except ValueError:
            at = text.find("{", at + 1)
            continue
        if isinstance(data, dict):
            found.append(data)
        at = text.find("{", end)
    return found


def _score_keys(obj: dict[str, Any]) -> list[str]:
    return [key for key in obj if key.strip().lower() == "score"]


def _explanation(obj: dict[str, Any]) -> str | None:
    value = obj.get("explanation")
    return None if value is None else str(value)


def _from_objects(objects: list[dict[str, Any]], raw: str) -> Grade:
    """The score of the JSON object(s) that carry one; differing scores are not resolved."""
    values = [obj[key] for obj in objects for key in _score_keys(obj)]
    distinct = sorted({str(value).strip() for value in values})
    explanation = _explanation(objects[0])
    if len(distinct) > 1:
        return Unscored(
            UnscoredKind.SEVERAL_SCORES,
            f"several different scores in reply: {', '.join(distinct)}",
            raw,
            explanation,
        )
    return _check(values[0], explanation, raw)


def _check(value: object, explanation: str | None, raw: str) -> Grade:
    def unscored(kind: UnscoredKind, reason: str) -> Unscored:
        return Unscored(kind, reason, raw, explanation)

    if isinstance(value, bool):
        return unscored(UnscoredKind.NOT_A_NUMBER, f"score {value!r} is not a number")
    try:
        number = float(str(value).strip())
    except ValueError:
        return unscored(UnscoredKind.NOT_A_NUMBER, f"score {value!r} is not a number")
    if not number.is_integer():
        return unscored(UnscoredKind.NOT_A_NUMBER, f"score {value} is not a whole number")
    score = int(number)
    if score not in SCALE:
        return unscored(UnscoredKind.OFF_SCALE, f"score {score} is outside the {SCALE} scale")
    return Scored(score, explanation)
