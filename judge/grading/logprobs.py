"""The judge's probability of each score level, read from the token that carries its score.

Asked with ``top_logprobs``, an endpoint reports for every token it wrote the likeliest
alternatives and their log-probabilities. At the token that holds the score, the alternatives
whose text (spaces stripped) is exactly a level's number ("4" or " 4" for 4) give that
level's probability; normalised over the levels, they give the expected score sum p(k) * k
and its entropy, reported beside the sampled score, never in its place.

Everything is read, nothing estimated. The score is the one ``parse_grade`` reads, found at
the same place (the "score" field of the JSON object that ends the reply, or the number on a
labelled last line); its token is found by adding up token texts into character offsets. A
reply where that token cannot be found for certain, a scale with a level written in more than
one character (a tokenizer may split "10" into "1", "0": token "1" would then mean 1 or 10),
or alternatives that hold no level give ``NoDistribution`` with the reason. Levels missing
from the alternatives get probability 0 (theirs was below the least likely alternative
returned); ``mass`` says how much of the probability the levels held before normalising.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from judge.grading.parsing import Scored, own_text, parse_grade
from judge.vocab import Scale

MASS_TOLERANCE = 1e-6
"""How far above 1 the levels' summed probability may lie (log-probabilities come rounded,
often as float32) before the alternatives are called inconsistent."""

NO_LOGPROBS = "the endpoint returned no log-probabilities for this reply"
NOT_FOUND = "the score's place in the reply was not found"
MISALIGNED = "the tokens do not spell the reply around the score, so its token is unknown"

_DECODER = json.JSONDecoder(strict=False)
_ENDS_REPLY = re.compile(r"\s*(?:```\s*)?")  # what may follow the verdict object
_FENCE_LINE = re.compile(r"\s*```[\w-]*\s*")
_LABELLED_NUMBER = re.compile(r"(?:score|rating)[*_\s]*(?:is|=|:)?[*_\s]*(-?\d+(?:\.\d+)?)", re.I)


@dataclass(frozen=True)
class ScoreDistribution:
    """The judge's probabilities for the levels at its score token."""

    probs: dict[int, float]
    """Probability of each level of the scale (all present), normalised over the levels."""
    mass: float
    """Summed probability of the levels' tokens before normalising (the rest went to other
    tokens, or to levels below the least likely alternative returned)."""
    expected: float
    """Expected score: sum of p(level) * level."""
    entropy_bits: float
    """Entropy of ``probs`` in bits, -sum p log2 p: 0 when certain, log2(levels) at most."""
    sampled: int
    """The score the judge wrote (the one ``parse_grade`` reads)."""

    ok = True


@dataclass(frozen=True)
class NoDistribution:
    """Why no distribution could be read from the reply."""

    reason: str

    ok = False


def score_distribution(
    logprobs: Sequence[Mapping[str, Any]] | None,
    text: str | None,
    *,
    scale: Scale,
    quoted: Sequence[str] = (),
) -> ScoreDistribution | NoDistribution:
    """The probability of each level of ``scale`` at the token holding the judge's score.

    ``logprobs`` are the reply's tokens as ``Completion.logprobs`` holds them (``{"token",
    "logprob", "top": [[token, logprob], ...]}``), ``text`` the reply, ``quoted`` the judged
    texts (as for ``parse_grade``).

    Here the alternatives for the score token hold 0.56 for "5", 0.16 for "4", 0.08 for " 3"
    and 0.2 for "The" (not a level): mass 0.8, and normalised p = 0.1, 0.2, 0.7 on levels 3,
    4, 5, so expected 0.1*3 + 0.2*4 + 0.7*5 = 4.6 and entropy -(0.1 log2 0.1 + 0.2 log2 0.2
    + 0.7 log2 0.7) = 0.33219 + 0.46439 + 0.36020 = 1.15678 bits.

    >>> from math import log
    >>> from judge.vocab import SCALE
    >>> top = [["5", log(0.56)], ["The", log(0.2)], ["4", log(0.16)], [" 3", log(0.08)]]
    >>> tokens = [
    ...     {"token": '{"score": ', "logprob": 0.0, "top": []},
    ...     {"token": "5", "logprob": log(0.56), "top": top},
    ...     {"token": "}", "logprob": 0.0, "top": []},
    ... ]
    >>> found = score_distribution(tokens, '{"score": 5}', scale=SCALE)
    >>> {k: round(p, 6) for k, p in found.probs.items()}
    {1: 0.0, 2: 0.0, 3: 0.1, 4: 0.2, 5: 0.7}
    >>> round(found.mass, 6), round(found.expected, 6), round(found.entropy_bits, 5)
    (0.8, 4.6, 1.15678)
    >>> score_distribution(None, '{"score": 5}', scale=SCALE).reason
    'the endpoint returned no log-probabilities for this reply'
    """
    if not logprobs:
        return NoDistribution(NO_LOGPROBS)
    grade = parse_grade(text, quoted=quoted, scale=scale)
    if not isinstance(grade, Scored):
        return NoDistribution(f"the reply has no score to read ({grade.reason})")
    assert text is not None  # a scored reply has text
    long = [level for level in scale.labels if len(str(level)) > 1]
    if long:
        return NoDistribution(
            f"level {long[0]} is written in more than one character, which may span several "
            "tokens (many tokenizers split every digit), so the score token cannot tell the "
            "levels apart"
        )
    span = _score_span(own_text(text, quoted))  # quotations of the answers blanked out
    if span is None:
        return NoDistribution(NOT_FOUND)
    written = text[span[0] : span[1]]
    if written != str(grade.score):
        return NoDistribution(
            f"the score is written as {written!r}, not as the level's number alone"
        )
    entry = _token_at(logprobs, text, span[0])
    if entry is None:
        return NoDistribution(MISALIGNED)
    if str(entry["token"]).strip() != written:
        return NoDistribution(
            f"the token {entry['token']!r} that holds the score holds more than the score"
        )
    return _distribution(entry, scale, grade.score)


def _distribution(
    entry: Mapping[str, Any], scale: Scale, sampled: int
) -> ScoreDistribution | NoDistribution:
    """Sum the score token's alternatives (and the token itself) per level, then normalise."""
    alternatives: dict[str, float] = {}
    for token, logprob in [*entry["top"], [entry["token"], entry["logprob"]]]:
        alternatives.setdefault(str(token), float(logprob))  # each token counted once
    by_text = {str(level): level for level in scale.labels}
    raw = dict.fromkeys(scale.labels, 0.0)
    for token, logprob in alternatives.items():
        level = by_text.get(token.strip())
        if level is not None:
            raw[level] += math.exp(logprob)
    mass = sum(raw.values())
    if mass <= 0.0:
        return NoDistribution("no alternative for the score token is a level of the scale")
    if mass > 1.0 + MASS_TOLERANCE:
        return NoDistribution(
            f"the levels' alternatives add up to probability {mass:.6f}, more than 1: the "
            "log-probabilities are inconsistent"
        )
    probs = {level: p / mass for level, p in raw.items()}
    expected = sum(p * level for level, p in probs.items())
    entropy = -sum(p * math.log2(p) for p in probs.values() if p > 0.0)
    return ScoreDistribution(probs, mass, expected, entropy, sampled)


def _score_span(text: str) -> tuple[int, int] | None:
    """Where the verdict's score stands in the reply, by ``parse_grade``'s rule: the value of
    the one "score" field of the JSON object that ends the reply, else the number on the
    labelled last line. The caller checks that what stands there is the parsed score."""
    verdict = _last_object(text)
    if verdict is not None:
        spans = _score_fields(text, verdict)
        return spans[0] if spans is not None and len(spans) == 1 else None
    lines = [
        m for m in re.finditer(r"[^\n]+", text) if m.group().strip() and not _is_fence(m.group())
    ]
    if not lines:
        return None
    found = _LABELLED_NUMBER.search(lines[-1].group())
    if found is None:
        return None
    start = lines[-1].start()
    return start + found.start(1), start + found.end(1)


def _is_fence(line: str) -> bool:
    return _FENCE_LINE.fullmatch(line) is not None


def _last_object(text: str) -> int | None:
    """Where the top-level JSON object that ends the reply (a closing fence aside) starts."""
    last = None
    at = text.find("{")
    while at != -1:
        try:
            data, end = _DECODER.raw_decode(text, at)
        except ValueError:
            at = text.find("{", at + 1)
            continue
        if isinstance(data, dict) and _ENDS_REPLY.fullmatch(text, end):
            last = at
        at = text.find("{", end)
    return last


def _score_fields(text: str, start: int) -> list[tuple[int, int]] | None:
    """The spans of the values of the object's top-level "score" keys (any case), a quoted
    value's without its quotes and spaces; None when the object cannot be walked."""
    spans = []
    try:
        at = _skip(text, start + 1)
        while text[at] != "}":
            key, at = _DECODER.raw_decode(text, at)
            at = _skip(text, at)
            if not isinstance(key, str) or text[at] != ":":
                return None
            at = _skip(text, at + 1)
            value, end = _DECODER.raw_decode(text, at)
            if key.strip().lower() == "score":
                first, last = (at + 1, end - 1) if isinstance(value, str) else (at, end)
                inner = text[first:last]
                spans.append(
                    (first + len(inner) - len(inner.lstrip()), first + len(inner.rstrip()))
                )
            at = _skip(text, end)
            if text[at] == ",":
                at = _skip(text, at + 1)
            elif text[at] != "}":
                return None
    except (ValueError, IndexError):
        return None
    return spans


def _skip(text: str, at: int) -> int:
    """The first offset from ``at`` that is not JSON whitespace."""
    while at < len(text) and text[at] in " \t\n\r":
        at += 1
    return at


def _token_at(
    logprobs: Sequence[Mapping[str, Any]], text: str, offset: int
) -> Mapping[str, Any] | None:
    """The token whose characters cover ``text[offset]``.

    Token texts are added up into offsets from the start of the reply, and from its end; an
    offset counts only where the tokens on that side spell the reply exactly (a character
    split over byte tokens may come back as "" or U+FFFD and shift offsets past it).
    """
    tokens = [str(entry["token"]) for entry in logprobs]
    at = 0
    for i, token in enumerate(tokens):
        if text[at : at + len(token)] != token:
            break
        if at <= offset < at + len(token):
            return logprobs[i]
        at += len(token)
    end = len(text)
    for i in range(len(tokens) - 1, -1, -1):
        token = tokens[i]
        if end - len(token) < 0 or text[end - len(token) : end] != token:
            break
        if end - len(token) <= offset < end:
            return logprobs[i]
        end -= len(token)
    return None
