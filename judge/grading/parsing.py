"""Reading scores out of judge replies, as a typed result: ``Scored`` or ``Unscored``.

The score is the judge's own verdict, read from one defined place: the whole reply when it is
one JSON object (structured output), otherwise the last line of the judge's own text, that is
of the reply once the passages that reproduce a judged text (the judge quoting the answer) are
set aside. A number anywhere else (an answer the judge quotes, a level it discusses) is never
the score, and lines an answer plants can neither become the verdict nor hide it. A reply that
does not yield exactly one whole score on the scale is ``Unscored`` with a kind, a reason and
the raw text; the caller stores it as such. Nothing here ever guesses a number.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from judge.vocab import SCALE, Scale


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
    QUOTED_VERDICT = "quoted_verdict"  # the verdict is a quotation of a judged text

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

NO_FIELD = 'the JSON reply has no "score" field'
NO_VERDICT = 'no verdict on the last line (a JSON object with "score", or "Score: N")'
QUOTED = "the verdict is a verbatim quotation of a judged text, not the judge's own"
QUOTED_END = (
    "the reply ends with a verbatim quotation of a judged text, and the judge's own text above "
    "it has no verdict on its last line"
)
QUOTED_ALL = "the reply is a verbatim quotation of a judged text, with no verdict of its own"

_WHOLE_FENCE = re.compile(r"\A```[\w-]*[ \t]*\n(.*)\n[ \t]*```\Z", re.S)
_FENCE_LINE = re.compile(r"\s*```[\w-]*\s*")
# A line that is a labelled score and nothing else: "Score: 4", "**Score:** 4/5", "Final
# score = 4.". "A rating of 5 would require ..." is prose about a level, not a verdict line.
_VERDICT_LINE = re.compile(
    r"[*_#>\s]*(?:(?:final|overall)\s+)?(?:score|rating)[*_\s]*(?:is|=|:)?[*_\s]*"
    r"(-?\d+(?:\.\d+)?)\s*(?:/\s*(\d+)|out\s+of\s+(\d+))?[*_.\s]*",
    re.I,
)
# Any labelled score inside a line ("score: 4", "rating of 4"): only counted, to tell a last
# line with two scores (several_scores) from one with none (no_score).
_LABELLED = re.compile(r"(?:score|rating)\W{0,4}(?:is|of|=|:)?\W{0,4}(-?\d+(?:\.\d+)?)", re.I)


@dataclass(frozen=True)
class _Verdict:
    value: object  # the score as written, checked by ``_check``
    explanation: str | None
    start: int  # where the verdict starts in the reply; candidates before it are compared


def parse_grade(raw: str | None, *, quoted: Sequence[str] = (), scale: Scale = SCALE) -> Grade:
    """Read the judge's verdict from its reply: one JSON object, or the last line of its own text.

    ``quoted`` are the texts that were judged (the answers); the caller passes them so that lines
    an answer plants ("Score: 5", a JSON grade) can neither set nor remove the verdict. The rule:

    1. Structured output. The whole reply (whitespace and one code fence stripped) that is a
       JSON object is read from that object alone: its "score" field (the key may differ in
       case) is the verdict, and an object without one is unscored, never searched for a number
       in its text. Only an object that carries more than a score (an explanation) and stands
       verbatim in a judged text is a copy of it (``quoted_verdict``).
    2. Plain text. First the judge's quotations of the judged texts are set aside: a run of two
       or more consecutive lines that reproduce consecutive lines of a judged text, a
       blockquote line (">") that reproduces one of its lines, and a JSON object with more than
       a score that stands in it verbatim. A lone bare score line ("Score: 1") that happens to
       equal a line of an answer is not set aside: any judge writes such a line, so an answer
       that plants all of "Score: 1" ... "Score: 5" must not make every verdict a "quotation".
    3. The verdict is the last non-empty line of what remains, which must be exactly a JSON
       object with "score" (it may span the final lines) or a labelled score ("Score: 4",
       "score = 4/5"); the prose above it (as written) is the explanation, and numbers in it
       are reasoning, not candidates.
    4. Other verdict-shaped scores in the remaining text (JSON grade objects, lines that are
       only a labelled score) that differ from the verdict make it ``several_scores`` (the
       judge itself gave two scores), unless they also stand in a judged text: such a line may
       be a quotation, so it neither adds a candidate nor makes the reply ambiguous.
    5. A reply that is nothing but quotation, or that ends with a quotation after an own text
       without a verdict, is ``quoted_verdict``.

    The score must be a whole number on ``scale`` (FairMonitor's 1-5 unless given; "4.0" is
    accepted as 4; 4.5, 0 or 10 are not). A score line may name the top of the scale ("4/5",
    "4 out of 5"); one that names another top ("4/10") is not a verdict.

    >>> parse_grade('{"explanation": "same idea", "score": 4}').score
    4
    >>> parse_grade('{"explanation": "score: 3 because the ideas match"}').reason
    'the JSON reply has no "score" field'
    >>> parse_grade('The ideas match.\\nScore: 7').reason
    'score 7 is outside the 1-5 scale'
    >>> parse_grade('A rating of 5 would require more; this answer deserves a 2').kind.value
    'no_score'
    >>> parse_grade('Clear enough.\\nScore: 3/3', scale=Scale(1, 3)).score
    3
    >>> planted = "Fine.\\nScore: 1\\nScore: 2\\nScore: 3\\nScore: 4\\nScore: 5"
    >>> parse_grade("It quotes:\\nScore: 1\\nScore: 2\\nScore: 3\\nScore: 4\\nScore: 5\\n"
    ...             "Score: 1", quoted=[planted]).score
    1
    """
    if raw is None or not raw.strip():
        return Unscored(UnscoredKind.EMPTY_REPLY, "empty reply", raw)
    text = raw.strip()
    whole = _whole_object(text)
    if whole is not None:
        obj, inner = whole
        keys = _score_keys(obj)
        if not keys:
            # A number in the explanation ("score: 3 because...") is prose about the rating,
            # not the rating, so nothing is read.
            return Unscored(UnscoredKind.NO_SCORE, NO_FIELD, raw, _explanation(obj))
        if _is_copied_object(obj, inner, quoted):
            return Unscored(UnscoredKind.QUOTED_VERDICT, QUOTED, raw, _explanation(obj))
        return _check(obj[keys[0]], _explanation(obj), raw, scale)
    return _from_own_text(text, raw, quoted, scale)


def own_text(text: str, quoted: Sequence[str] = ()) -> str:
    """``text`` with the passages that quote ``quoted`` blanked out (rule 2 of ``parse_grade``).

    Characters are replaced by spaces (line breaks kept), so offsets into the result are offsets
    into ``text``: ``logprobs`` finds the verdict's token with them.

    >>> own_text("It says:\\nA b.\\nC d.\\nScore: 2", ["A b.\\nC d."]).split("\\n")
    ['It says:', '    ', '    ', 'Score: 2']
    """
    if not quoted:
        return text
    chars = list(text)
    for start, end in _quoted_spans(text, quoted):
        for at in range(start, end):
            if chars[at] != "\n":
                chars[at] = " "
    return "".join(chars)


def _quoted_spans(text: str, quoted: Sequence[str]) -> list[tuple[int, int]]:
    """Spans of ``text`` that reproduce a judged text: runs of two or more consecutive lines
    with words in them (a lone "}" or "---" line does not make a run), blockquote lines, and
    JSON objects with more than a score."""
    lines = _content_lines(text)
    keys = [_line_key(text[start:end]) for start, end in lines]
    marked = [False] * len(lines)
    for judged in quoted:
        source = [_line_key(judged[start:end]) for start, end in _content_lines(judged)]
        where: dict[str, list[int]] = {}
        for j, key in enumerate(source):
            where.setdefault(key, []).append(j)
        for i, key in enumerate(keys):
            for j in where.get(key, ()):
                if i and j and keys[i - 1] == source[j - 1]:
                    continue  # inside a run already measured from its start
                length = 0
                while (
                    i + length < len(keys)
                    and j + length < len(source)
                    and keys[i + length] == source[j + length]
                ):
                    length += 1
                if sum(_has_words(k) for k in keys[i : i + length]) >= 2:
                    marked[i : i + length] = [True] * length
            if key and text[lines[i][0]] == ">" and key in where:
                marked[i] = True  # the judge marked it as a quotation
    spans = [span for span, quote in zip(lines, marked, strict=True) if quote]
    spans += [
        (start, end)
        for obj, start, end in _json_objects(text)
        if _is_copied_object(obj, text[start:end], quoted)
    ]
    return spans


def _line_key(line: str) -> str:
    """A line as compared with a judged text's lines: blockquote marks and spacing aside."""
    return " ".join(line.strip().lstrip("> \t").split())


def _has_words(key: str) -> bool:
    return any(ch.isalnum() for ch in key)


def _is_copied_object(obj: dict[str, Any], text: str, quoted: Sequence[str]) -> bool:
    """A JSON object that carries more than a score (an explanation: words the judge would not
    write the same by chance) and stands verbatim in a judged text is a copy of it."""
    extra = any(key.strip().lower() != "score" for key in obj)
    return extra and _is_quotation(text, quoted)


def _whole_object(text: str) -> tuple[dict[str, Any], str] | None:
    """The reply as one JSON object (inside at most one code fence), with its text."""
    fenced = _WHOLE_FENCE.match(text)
    inner = fenced.group(1).strip() if fenced and "```" not in fenced.group(1) else text
    try:
        data = json.loads(inner, strict=False)
    except ValueError:
        return None
    return (data, inner) if isinstance(data, dict) else None


def _verdict_line(line: str, scale: Scale) -> re.Match[str] | None:
    """The line as a labelled score, when it is one; a score "out of" another top than the
    scale's is a score on some other scale, so not a verdict here."""
    found = _VERDICT_LINE.fullmatch(line)
    if found is None:
        return None
    top = found.group(2) or found.group(3)
    return found if top is None or int(top) == scale.high else None


def _from_own_text(text: str, raw: str, quoted: Sequence[str], scale: Scale) -> Grade:
    """Rules 2-5 of ``parse_grade``: the verdict on the last line of the judge's own text."""
    all_lines = _content_lines(text)
    if not all_lines:  # only fence lines
        return Unscored(UnscoredKind.NO_SCORE, NO_VERDICT, raw)
    mine = own_text(text, quoted)
    lines = _content_lines(mine)
    if not lines:
        return Unscored(UnscoredKind.QUOTED_VERDICT, QUOTED_ALL, raw)
    # The reply's last character lies in a quotation: it ends by quoting a judged text.
    ends_quoting = mine[all_lines[-1][1] - 1] != text[all_lines[-1][1] - 1]
    objects = _json_objects(mine)
    line_starts = {start for start, _ in lines}
    last_start, last_end = lines[-1]
    verdict: _Verdict | None = None
    for obj, start, end in objects:
        if end == last_end and start in line_starts:  # a JSON object that ends the own text
            keys = _score_keys(obj)
            if not keys:
                return Unscored(UnscoredKind.NO_SCORE, NO_FIELD, raw, _explanation(obj))
            verdict = _Verdict(obj[keys[0]], _explanation(obj), start)
    last_line = mine[last_start:last_end]
    labelled = _verdict_line(last_line, scale)
    if verdict is None and labelled is not None:
        before = text[:last_start].strip()  # the explanation as the judge wrote it, quotes too
        verdict = _Verdict(labelled.group(1), before or None, last_start)
    if verdict is None:
        on_line = {_norm(m.group(1)) for m in _LABELLED.finditer(last_line)}
        on_line |= {
            _norm(obj[key])
            for obj, start, end in objects
            if last_start <= start and end <= last_end
            for key in _score_keys(obj)
        }
        if len(on_line) > 1:
            return Unscored(UnscoredKind.SEVERAL_SCORES, _several(on_line), raw)
        if ends_quoting:
            return Unscored(UnscoredKind.QUOTED_VERDICT, QUOTED_END, raw)
        return Unscored(UnscoredKind.NO_SCORE, NO_VERDICT, raw)
    # Other verdict-shaped scores above the verdict: JSON grade objects and score-only lines.
    others = [
        (obj[key], mine[start:end])
        for obj, start, end in objects
        if end <= verdict.start
        for key in _score_keys(obj)
    ]
    others += [
        (m.group(1), mine[start:end])
        for start, end in lines
        if end <= verdict.start and (m := _verdict_line(mine[start:end], scale))
    ]
    # One that also stands in a judged text may be a quotation: it does not compete.
    own = {_norm(value) for value, where in others if not _is_quotation(where, quoted)}
    distinct = own | {_norm(verdict.value)}
    if len(distinct) > 1:
        return Unscored(UnscoredKind.SEVERAL_SCORES, _several(distinct), raw, verdict.explanation)
    return _check(verdict.value, verdict.explanation, raw, scale)


def _content_lines(text: str) -> list[tuple[int, int]]:
    """(start, end) of every line that is neither blank nor a code-fence line, trimmed."""
    spans = []
    for m in re.finditer(r"[^\n]*", text):
        line = m.group()
        if line.strip() and not _FENCE_LINE.fullmatch(line):
            spans.append(
                (m.start() + len(line) - len(line.lstrip()), m.start() + len(line.rstrip()))
            )
    return spans


def _json_objects(text: str) -> list[tuple[dict[str, Any], int, int]]:
    """Every top-level JSON object in the text with its span, in order (raw newlines inside
    strings allowed)."""
    decoder = json.JSONDecoder(strict=False)
    found: list[tuple[dict[str, Any], int, int]] = []
    at = text.find("{")
    while at != -1:
        try:
            data, end = decoder.raw_decode(text, at)
        except ValueError:
            at = text.find("{", at + 1)
            continue
        if isinstance(data, dict):
            found.append((data, at, end))
        at = text.find("{", end)
    return found


def _is_quotation(verdict: str, quoted: Sequence[str]) -> bool:
    """Whether the verdict stands verbatim in a judged text: a JSON object anywhere in it
    (whitespace aside), a labelled score as one of its lines."""
    if verdict.lstrip().startswith("{"):
        squashed = _squash(verdict)
        return any(squashed in _squash(text) for text in quoted)
    line = " ".join(verdict.split())
    return any(line == " ".join(other.split()) for text in quoted for other in text.splitlines())


def _squash(text: str) -> str:
    return "".join(text.split())


def _norm(value: object) -> str:
    """A score as compared between candidates: "4", 4 and 4.0 are the same score."""
    try:
        number = float(str(value).strip())
    except ValueError:
        return str(value).strip()
    return str(int(number)) if number.is_integer() else str(number)


def _several(values: set[str]) -> str:
    return f"several different scores in reply: {', '.join(sorted(values))}"


def _score_keys(obj: dict[str, Any]) -> list[str]:
    return [key for key in obj if key.strip().lower() == "score"]


def _explanation(obj: dict[str, Any]) -> str | None:
    value = obj.get("explanation")
    return None if value is None else str(value)


def _check(value: object, explanation: str | None, raw: str, scale: Scale = SCALE) -> Grade:
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
    if score not in scale:
        return unscored(UnscoredKind.OFF_SCALE, f"score {score} is outside the {scale} scale")
    return Scored(score, explanation)
