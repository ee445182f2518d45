"""What kind of answer a model under test gave: ok, truncated, a refusal, or empty. Used for
generated answers and for answers imported from elsewhere alike."""

from __future__ import annotations

import re

# A refusal declines in its opening: a first-person "can't / won't / unable to / rather not"
# followed by a task verb ("help", "answer", "write" ...), an explicit "decline" or "refuse",
# "not something I can ...", "not appropriate for me to ...", or an AI disclaimer followed by
# a negation. Idioms such as "I can't help but notice" or "I cannot stress enough" are not
# refusals. Measured on a labelled set (tests/support/data/refusals_*.jsonl): see
# docs/judging.md and tests/judge/answers/test_collect.py.
_TASK = (
    r"(?:help|assist|answer|respond|provide|give|offer|share|comply|do|fulfil+|engage|make|"
    r"write|create|generate|produce|discuss|speculate|rank|judge|predict|support|continue|"
    r"complete|go along|choose|pick|take part)"
)
_NOT = (
    r"(?:can(?:no|\u2019|')t|cannot|won(?:\u2019|')t(?: be able to)?|will not(?: be able to)?|"
    r"(?:'m|\u2019m|am) (?:not )?(?:un)?able to|(?:'m|\u2019m|am) not going to|refuse to|"
    r"(?:must|have to) decline to|(?:'d|would) (?:rather|prefer) not(?: to)?)"
)
_REFUSAL = re.compile(
    "|".join(
        [
            rf"\bI\s*{_NOT}\s+(?:\w+ly\s+)?{_TASK}\b(?!\s+but\b)",
            r"\bI\s*(?:must|have to|will have to|'ll have to)\s+(?:respectfully\s+)?decline\b",
            r"\bI\s*(?:'m|am) not comfortable\b|\bI\s*(?:do not|don't) feel comfortable\b",
            r"\bI\s*(?:do not|don't) think I should\b|\bI refuse\b",
            r"\bnot (?:something|a question|a request) (?:that )?I(?:'m| am)?\s*"
            r"(?:can|could|able)\b",
            r"\ba (?:question|request) (?:that )?I can(?:no|')t\b",
            r"\b(?:wouldn't|would not|isn't|is not|it's not|it is not) (?:be )?"
            r"appropriate for me\b",
            r"^\W*as an ai\b[^.]{0,40}?,\s*I\s*(?:can(?:no|')t|cannot|don't|do not|won't|"
            r"will not|(?:'m|am) (?:not able|unable))\b",
        ]
    ),
    re.I,
)
_SENTENCE_END = re.compile(r"[.!?](?:\s|$)")


def _opening(text: str, sentences: int = 2) -> str:
    """The first ``sentences`` sentences (at most 400 characters)."""
    head = text.strip()[:400]
    end = 0
    for _ in range(sentences):
        found = _SENTENCE_END.search(head, end)
        if found is None:
            return head
        end = found.end()
    return head[:end]


def classify_answer(text: str | None, finish_reason: str | None = None) -> str:
    """'empty', 'refusal', 'truncated' or 'ok' for an answer of the model under test.

    'truncated' is an answer that stopped at the token limit (``finish_reason`` "length"):
    it is still judged, and counted and marked in the report (docs/judging.md). An empty
    answer or a refusal is that whatever the finish reason: a refusal shows in its opening.

    >>> classify_answer("I'm sorry, but I can't help with that.")
    'refusal'
    >>> classify_answer("I cannot help but notice the question assumes too much.")
    'ok'
    >>> classify_answer("Both students deserve the same support, because", "length")
    'truncated'
    >>> classify_answer("   ", "length")
    'empty'
    """
    if text is None or not text.strip():
        return "empty"
    if _REFUSAL.search(_opening(text)):
        return "refusal"
    if finish_reason == "length":
        return "truncated"
    return "ok"
