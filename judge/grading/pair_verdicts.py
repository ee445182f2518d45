"""Reading a pairwise judge's reply (``judge.grading.pairs``): A (the answer shown first), B
(the one shown second), a tie, or unreadable with the reason why.

The verdict is read from one defined place, as ``judge.grading.parsing`` reads a score: the
whole reply when it is one JSON object (structured output, one code fence allowed around it),
whose "verdict" field must be A, B or tie (any case); otherwise the reply's last non-empty
line, which must be exactly a labelled verdict ("Verdict: A"). Anything else (prose without a
verdict line, a verdict outside A/B/tie, an object without "verdict") is unreadable: stored as
such with the raw reply, never turned into a choice. Nothing here guesses.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

PAIR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "explanation": {"type": "string"},
        "verdict": {"type": "string", "enum": ["A", "B", "tie"]},
    },
    "required": ["explanation", "verdict"],
    "additionalProperties": False,
}
"""What the judge must return (explanation first, so it reasons before it decides)."""

UNREADABLE = "unreadable"

_FENCED = re.compile(r"\A```[\w-]*[ \t]*\n(.*)\n[ \t]*```\Z", re.S)
_LINE = re.compile(r"[*_#>\s]*(?:final\s+)?verdict[*_\s]*(?:is|=|:)?[*_\s]*(\w+)[*_.\s]*", re.I)
_NAMES = {"a": "A", "b": "B", "tie": "tie"}
NO_VERDICT = (
    'no verdict: the reply is neither a JSON object with "verdict" nor ends with a line '
    '"Verdict: A", "Verdict: B" or "Verdict: tie"'
)


@dataclass(frozen=True)
class PairReading:
    """A reply read: ``verdict`` A, B, tie or unreadable; ``reason`` says why it is unreadable
    (None otherwise); ``explanation`` the judge's own words when they could be told apart."""

    verdict: str
    explanation: str | None
    reason: str | None = None


def _unreadable(reason: str) -> PairReading:
    return PairReading(UNREADABLE, None, reason)


def parse_pair_verdict(raw: str | None) -> PairReading:
    """The verdict of one pairwise judge reply.

    >>> parse_pair_verdict('{"explanation": "B is clearer.", "verdict": "b"}').verdict
    'B'
    >>> parse_pair_verdict("A is better.\\nVerdict: tie").verdict
    'tie'
    >>> parse_pair_verdict("Both are fine.").verdict
    'unreadable'
    """
    text = (raw or "").strip()
    if not text:
        return _unreadable("empty reply")
    fenced = _FENCED.match(text)
    if fenced:
        text = fenced.group(1).strip()
    if text.startswith(("{", "[")):
        return _from_json(text)
    lines = [line for line in text.splitlines() if line.strip()]
    found = _LINE.fullmatch(lines[-1])
    if found is None:
        return _unreadable(NO_VERDICT)
    verdict = _NAMES.get(found.group(1).lower())
    if verdict is None:
        return _unreadable(f"verdict {found.group(1)!r} is not A, B or tie")
    explanation = "\n".join(lines[:-1]).strip() or None
    return PairReading(verdict, explanation)


def _from_json(text: str) -> PairReading:
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        return _unreadable(f"the reply starts as JSON but is not valid JSON ({exc.msg})")
    if not isinstance(obj, dict):
        return _unreadable("the JSON reply is not an object")
    fields = {str(k).lower(): v for k, v in obj.items()}
    if "verdict" not in fields:
        return _unreadable('the JSON reply has no "verdict" field')
    value = fields["verdict"]
    verdict = _NAMES.get(value.strip().lower()) if isinstance(value, str) else None
    if verdict is None:
        return _unreadable(f"verdict {value!r} is not A, B or tie")
    explanation = fields.get("explanation")
    return PairReading(verdict, explanation if isinstance(explanation, str) else None)
