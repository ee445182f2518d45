"""Test items written by a model (``fairjudge dataset generate`` and ``dataset plan``): the
item shape asked for and reading a reply into valid items and rejections
(``judge.authoring.stored_calls`` stores one call's result whole).

FairMonitor built its benchmark by asking a strong model for test cases of one stage, one
education scenario and one sensitive factor, each with the answer a fair model would give,
and had experts review them. Here a *cell* is one (stage, factor, scenario); a call asks for
a few items of one cell. ``read_reply`` turns the raw reply into valid items and rejections,
each rejection with its reason and the raw text it was read from; ``stored_calls.CallWriter`` skips
near-duplicates (``judge.data.dedupe``) and stores the call's items, its call row and its
cache row in the same transaction, so a call is stored whole or not at all. Generated items start
as drafts waiting for an expert review (``review_status`` "draft") and carry their provenance.

This module makes no model call: ``judge.authoring.cells`` does, and passes each call's
outcome here as plain values.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass
from typing import Any

from judge.data.items import METADATA, ParsedItem, _check_line
from judge.data.taxonomy import Taxonomy
from judge.errors import InvalidInputError
from judge.vocab import STAGE_FIELDS, STAGES

# What a generated item gives beyond its stage's required fields: FairMonitor's test cases
# all come with an expected unbiased output, and an S3 item names the stereotype B hints at.
GENERATED_EXTRA: dict[str, tuple[str, ...]] = {
    "S1": (),
    "S2": ("expected_answer",),
    "S3": ("implied_stereotype", "expected_answer"),
    "S4": (),
}

# Why an item (or a whole reply) was not stored: the ``kind`` of a ``Rejection``.
EMPTY_REPLY = "empty_reply"
TRUNCATED = "truncated"
NOT_JSON = "not_json"
NO_ITEMS = "no_items"
NOT_AN_OBJECT = "not_an_object"
INVALID = "invalid"
WRONG_STAGE = "wrong_stage"
WRONG_FACTOR = "wrong_factor"
WRONG_SCENARIO = "wrong_scenario"
EXTRA = "extra"
REJECTION_KINDS = (
    EMPTY_REPLY, TRUNCATED, NOT_JSON, NO_ITEMS, NOT_AN_OBJECT, INVALID, WRONG_STAGE,
    WRONG_FACTOR, WRONG_SCENARIO, EXTRA,
)  # fmt: skip

# ``ItemGenerationCall.status``.
OK = "ok"
UNREADABLE = "unreadable"
FAILED = "failed"

SOURCE = "generated"
"""``Item.provenance["source"]`` of a generated item."""

_FENCE = re.compile(r"^```[a-zA-Z]*\s*\n(.*)\n```$", re.S)


def generated_fields(stage: str) -> tuple[str, ...]:
    """The fields a generated item of ``stage`` must give: its stage's required fields and
    the expected unbiased answer (for S3 also the stereotype question B hints at).

    >>> generated_fields("S3")
    ('question_a', 'question_b', 'implied_stereotype', 'expected_answer')
    """
    if stage not in GENERATED_EXTRA:
        raise InvalidInputError(f"stage {stage!r} is not one of {', '.join(STAGES)}")
    return STAGE_FIELDS[stage] + GENERATED_EXTRA[stage]


def items_schema(stage: str, count: int) -> dict[str, Any]:
    """The JSON schema of a reply holding ``count`` items of ``stage``; passed as the
    request's response format, so an endpoint that supports schemas (llama.cpp's grammar,
    OpenAI's strict mode) can only answer in this shape."""
    fields = generated_fields(stage)
    item = {
        "type": "object",
        "properties": {name: {"type": "string"} for name in fields},
        "required": list(fields),
        "additionalProperties": False,
    }
    items = {"type": "array", "items": item, "minItems": count, "maxItems": count}
    return {
        "type": "object",
        "properties": {"items": items},
        "required": ["items"],
        "additionalProperties": False,
    }


@dataclass(frozen=True, order=True)
class Cell:
    """One cell of the benchmark's grid: a stage, a sensitive factor, a scenario."""

    stage: str
    factor: str
    scenario: str

    def __str__(self) -> str:
        return f"{self.stage}/{self.factor}/{self.scenario}"

    def to_json(self) -> dict[str, str]:
        return dataclasses.asdict(self)


def item_key(cell: Cell, digest: str, length: int = 8) -> str:
    """The id of a generated item: its cell and the start of its content hash.

    >>> item_key(Cell("S2", "gender", "classroom_management"), "3f9a0c1d77")
    'gen-S2-gender-classroom_management-3f9a0c1d'
    """
    return f"gen-{cell.stage}-{cell.factor}-{cell.scenario}-{digest[:length]}"


@dataclass(frozen=True)
class Rejection:
    """Something read from a reply that was not stored: an item (``index``, its position in
    the reply's list) or the whole reply (``index`` None), why (``kind``, ``reason``) and the
    raw text (an item as JSON, as the reply gave it; the whole reply verbatim)."""

    index: int | None
    kind: str
    reason: str
    raw: str

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Candidate:
    """A valid item read from a reply, not yet checked for near-duplicates."""

    index: int
    item: ParsedItem
    raw: str


@dataclass(frozen=True)
class ReadReply:
    """What ``read_reply`` made of one reply."""

    candidates: list[Candidate]
    rejections: list[Rejection]

    @property
    def readable(self) -> bool:
        """The reply was a JSON object with an items list (its items may still be bad)."""
        return not any(r.index is None for r in self.rejections)


def read_reply(
    text: str | None,
    cell: Cell,
    *,
    asked: int,
    taxonomy: Taxonomy,
    finish_reason: str | None = None,
) -> ReadReply:
    """Read a reply that should be ``{"items": [...]}`` holding ``asked`` items of ``cell``.

    Every item is validated as an item file's line is (``judge.data.items``), with the ids
    and the cell ours to give: an item that names another stage, factor or scenario, or has
    the fields of another stage, is rejected as such; items beyond the ``asked`` are rejected
    as ``extra``. A reply that is not one JSON object with an items list (prose, half an
    object, an empty reply) is rejected whole. A reply wrapped in one code fence is read.

    >>> cell = Cell("S1", "gender", "career_counseling")
    >>> from judge.data.taxonomy import load_taxonomy
    >>> read = read_reply('{"items": [{"question": "Q?", "expected_answer": "A."}, {"x": 1}]}',
    ...                   cell, asked=2, taxonomy=load_taxonomy())
    >>> [c.item.fields for c in read.candidates], [r.kind for r in read.rejections]
    ([{'question': 'Q?', 'expected_answer': 'A.'}], ['invalid'])
    >>> read_reply("Sure! Here are", cell, asked=2, taxonomy=load_taxonomy()).rejections[0].kind
    'not_json'
    """
    whole = text or ""
    if not whole.strip():
        return _whole(EMPTY_REPLY, "the reply is empty", whole)
    body = whole.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    try:
        parsed = json.loads(body)
    except json.JSONDecodeError as exc:
        if finish_reason == "length":
            why = "the reply stopped at max_tokens before its JSON ended"
            return _whole(TRUNCATED, why + " (raise --max-tokens or lower --items-per-call)", whole)
        if _cut_short(body):
            return _whole(TRUNCATED, f"the JSON ends before it is complete ({exc.msg})", whole)
        where = f"line {exc.lineno} column {exc.colno}"
        return _whole(NOT_JSON, f"the reply is not one JSON object ({exc.msg} at {where})", whole)
    if not isinstance(parsed, dict) or not isinstance(parsed.get("items"), list):
        got = type(parsed).__name__ if not isinstance(parsed, dict) else "an object without it"
        why = f"expected a JSON object with an 'items' list, got {got}"
        return _whole(NO_ITEMS, why, whole)
    candidates: list[Candidate] = []
    rejections: list[Rejection] = []
    for index, obj in enumerate(parsed["items"]):
        raw = json.dumps(obj, ensure_ascii=False)
        if index >= asked:
            why = f"the call asked for {asked} item(s); this one is beyond them"
            rejections.append(Rejection(index, EXTRA, why, raw))
            continue
        item, kind, why = _read_item(obj, cell, taxonomy)
        if item is None:
            rejections.append(Rejection(index, kind, why, raw))
        else:
            candidates.append(Candidate(index, item, raw))
    return ReadReply(candidates, rejections)


def _cut_short(body: str) -> bool:
    """Whether ``body`` starts as JSON and ends inside a string or with brackets open (half
    an object), as a reply cut off does.

    >>> _cut_short('{"items": [{"q": "Is it'), _cut_short('{"a": 1} and more')
    (True, False)
    """
    if body[:1] not in "{[":
        return False
    depth, in_string, escaped = 0, False, False
    for char in body:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
            if depth < 0:
                return False
    return in_string or depth > 0


def _whole(kind: str, reason: str, raw: str) -> ReadReply:
    return ReadReply([], [Rejection(None, kind, reason, raw)])


def _read_item(obj: Any, cell: Cell, taxonomy: Taxonomy) -> tuple[ParsedItem | None, str, str]:
    """One item of a reply as a ParsedItem with our id, or (None, kind, reason)."""
    if not isinstance(obj, dict):
        return None, NOT_AN_OBJECT, f"an item must be a JSON object, got {type(obj).__name__}"
    for key, kind in (("stage", WRONG_STAGE), ("factor", WRONG_FACTOR)):
        given = obj.get(key)
        if given is not None and given != getattr(cell, key):
            return None, kind, f"the item says {key} {given!r}; {getattr(cell, key)!r} was asked"
    given = obj.get("scenario")
    if given is not None and given != cell.scenario:
        why = f"the item says scenario {given!r}; {cell.scenario!r} was asked"
        return None, WRONG_SCENARIO, why
    meta = [k for k in METADATA if k in obj]
    if meta:
        return None, INVALID, f"{', '.join(meta)} is set by reviews and FairJudge, not by the model"
    # Our ids and our cell: the model's own id, if any, means nothing here.
    record = {k: v for k, v in obj.items() if k not in ("id", "stage", "factor", "scenario")}
    record.update(id="generated", stage=cell.stage, factor=cell.factor, scenario=cell.scenario)
    parsed, problems = _check_line(record, taxonomy)
    for name in GENERATED_EXTRA[cell.stage]:
        value = obj.get(name)
        if not isinstance(value, str) or not value.strip():
            problems.append(f"a generated {cell.stage} item needs '{name}' as a non-empty string")
    # A field without a single letter or digit is the prompt's "..." copied back, or noise.
    wordless = [
        k for k, v in record.items() if isinstance(v, str) and not any(c.isalnum() for c in v)
    ]
    if wordless and not problems:
        problems.append(f"{', '.join(sorted(wordless))} holds no words")
    if problems or parsed is None:
        other = _fields_of_other_stage(obj, cell.stage)
        if other is not None:
            return None, WRONG_STAGE, other
        return None, INVALID, "; ".join(problems)
    return dataclasses.replace(parsed, key=item_key(cell, parsed.content_hash)), "", ""


def _fields_of_other_stage(obj: dict[str, Any], stage: str) -> str | None:
    """Why ``obj`` looks like an item of another stage, when it has every field of one and
    not those of ``stage``."""
    if set(STAGE_FIELDS[stage]) <= set(obj):
        return None
    others = [s for s in STAGES if s != stage and set(STAGE_FIELDS[s]) <= set(obj)]
    if not others:
        return None
    names = ", ".join(STAGE_FIELDS[others[0]])
    return (
        f"the item has the fields of stage {'/'.join(others)} ({names}), not those of "
        f"{stage} ({', '.join(STAGE_FIELDS[stage])})"
    )


# -- what a dataset already holds ----------------------------------------------------------
