"""The rubrics: the built-in FairMonitor set, read once from ``prompts/rubrics.toml``, and the
rubric files users write in the same shape (``fairjudge rubrics add``; stored by
``judge.grading.registry``).

Each rubric says what it compares, its levels (1..N, a definition each), the stages it applies
to and the labelled texts it puts before the judge. This module is the single source of the
stage -> rubric map (``applies_to``) and of the texts per rubric (``texts``); nothing else
hard-codes which rubric judges which stage. A user's file is checked whole: every problem
comes back at once, named by rubric and line. A rubric's identity is the SHA-256 of its
definition (``Rubric.definition_hash``), which every judgment records.
"""

from __future__ import annotations

import json
import re
import string
import tomllib
from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path
from typing import Any

from judge.errors import ConfigError, InvalidInputError
from judge.hashing import sha256
from judge.vocab import (
    FREE_STAGE,
    ITEM_STAGES,
    SCALE,
    STAGE_FIELDS,
    STAGE_OPTIONAL_FIELDS,
    STAGE_PARTS,
    STAGES,
    Scale,
)

BUILTIN_SET = "fairmonitor"
"""The name of the built-in rubric set (``JudgeRun.rubric_set``)."""

BUILTIN_NAMES = ("ICS", "TCS", "PCS", "ETCS", "SBAS")
"""FairMonitor's rubric names: registered rubrics may not take them."""

MIN_LEVELS, MAX_LEVELS = 2, 10
_NAME = re.compile(r"[A-Z][A-Z0-9_]{0,39}")
# A label sits inside the fence markers ("<<ANSWER 3f9a...>>") and names a Label Studio slot.
_LABEL = re.compile(r"[A-Z0-9][A-Z0-9 _-]{0,39}")
_KEYS = ("title", "compares", "criterion", "levels", "applies_to", "texts")
_REQUIRED = ("criterion", "levels", "texts")


def grade_schema(scale: Scale = SCALE) -> dict[str, Any]:
    """What the judge must return for a rubric on ``scale``; llama.cpp enforces ``enum`` (not
    minimum/maximum)."""
    return {
        "type": "object",
        "properties": {
            "explanation": {"type": "string"},
            "score": {"type": "integer", "enum": list(scale.labels)},
        },
        "required": ["explanation", "score"],
        "additionalProperties": False,
    }


GRADE_SCHEMA: dict[str, Any] = grade_schema(SCALE)


@dataclass(frozen=True)
class Rubric:
    name: str
    title: str
    compares: str
    criterion: str
    levels: tuple[str, ...]
    applies_to: tuple[str, ...]
    texts: tuple[tuple[str, str], ...]  # (label, format string over item[...] and answers[...])
    version: str = ""  # built-in: "fairmonitor-v3"; registered: "1", "2", ...
    registered: bool = False  # a user's rubric: judged with the judge_rubric_*.j2 templates

    def render_texts(
        self, fields: dict[str, Any], answers: dict[str, str]
    ) -> list[tuple[str, str]]:
        """The labelled texts the judge compares for one item."""
        return [(label, text.format(item=fields, answers=answers)) for label, text in self.texts]

    @property
    def parts(self) -> tuple[str, ...]:
        """The answer parts this rubric reads."""
        return _answer_parts(self.texts)

    @property
    def swapped_order(self) -> tuple[int, ...] | None:
        """For a rubric that compares a pair (answer parts A and B), the order of its texts
        with the pair's two sides exchanged; None for any other rubric.

        A text belongs to side A when it reads ``answers[A]`` or an item field ending in
        ``_a`` (``story_a``, ``question_a``), to side B likewise; other texts (the changed
        factor) keep their place. Each text keeps its label, so the wording stays true in
        either order: SBAS still judges ANSWER B against ANSWER A, now shown first.

        >>> sbas = Rubric("X", "", "", "", ("l",), ("S3",), (("QUESTION A", "{item[question_a]}"),
        ...     ("ANSWER A", "{answers[A]}"), ("QUESTION B", "{item[question_b]}"),
        ...     ("ANSWER B", "{answers[B]}")))
        >>> sbas.swapped_order
        (2, 3, 0, 1)
        """
        return _swapped_order(self.texts)

    @property
    def item_fields(self) -> tuple[str, ...]:
        """The item fields this rubric reads."""
        return tuple(sorted({key for space, key in _references(self.texts) if space == "item"}))

    @property
    def scale(self) -> Scale:
        """Its scores: 1..N, one per level."""
        return Scale(1, len(self.levels))

    def definition(self) -> dict[str, Any]:
        """Everything that decides what the judge is shown, as JSON-ready data."""
        return {
            "name": self.name,
            "title": self.title,
            "compares": self.compares,
            "criterion": self.criterion,
            "levels": list(self.levels),
            "applies_to": list(self.applies_to),
            "texts": [list(pair) for pair in self.texts],
        }

    @cached_property
    def definition_hash(self) -> str:
        """SHA-256 of the definition as canonical JSON (sorted keys, no spaces): the same
        definition hashes the same whatever the file's layout or comments."""
        return sha256(json.dumps(self.definition(), sort_keys=True, separators=(",", ":")))


@cache
def _answer_parts(texts: tuple[tuple[str, str], ...]) -> tuple[str, ...]:
    # Cached: planning asks once per item, and parsing format strings is not free.
    return tuple(sorted({key for space, key in _references(texts) if space == "answers"}))


@cache
def _swapped_order(texts: tuple[tuple[str, str], ...]) -> tuple[int, ...] | None:
    sides: list[str | None] = []
    for pair in texts:
        found = set()
        for space, key in _references((pair,)):
            if space == "answers" and key in ("A", "B"):
                found.add(key)
            elif space == "item" and key[-2:].lower() in ("_a", "_b"):
                found.add(key[-1].upper())
        if len(found) > 1:
            return None  # one text shows both sides: no order to exchange
        sides.append(found.pop() if found else None)
    a = [i for i, side in enumerate(sides) if side == "A"]
    b = [i for i, side in enumerate(sides) if side == "B"]
    parts = _answer_parts(texts)
    if not a or len(a) != len(b) or "A" not in parts or "B" not in parts:
        return None
    order = list(range(len(texts)))
    for i, j in zip(a, b, strict=True):
        order[i], order[j] = j, i
    return tuple(order)


def _references(texts: tuple[tuple[str, str], ...]) -> list[tuple[str, str]]:
    """(namespace, key) of every ``{item[KEY]}`` / ``{answers[KEY]}`` in the text templates."""
    found = []
    for _, text in texts:
        for _, name, _, _ in string.Formatter().parse(text):
            if name is None:
                continue
            head, _, rest = name.partition("[")
            found.append((head, rest.rstrip("]")))
    return found


@dataclass(frozen=True)
class RubricSet:
    """The rubrics one judge run applies, in order: the built-in set of a prompts folder
    (``name`` "fairmonitor"), or named rubrics (``name`` their comma-joined names)."""

    version: int
    rubrics: dict[str, Rubric]
    name: str = BUILTIN_SET

    def __getitem__(self, name: str) -> Rubric:
        return self.rubrics[name]

    def __iter__(self) -> Any:
        return iter(self.rubrics.values())

    def for_stage(self, stage: str) -> tuple[str, ...]:
        """Names of the rubrics that judge items of ``stage``, in file order."""
        return tuple(r.name for r in self.rubrics.values() if stage in r.applies_to)

    def stage_map(self) -> dict[str, tuple[str, ...]]:
        return {stage: self.for_stage(stage) for stage in STAGES}

    @property
    def stages(self) -> tuple[str, ...]:
        """The stages some rubric of the set judges."""
        return tuple(s for s in ITEM_STAGES if self.for_stage(s))

    def identity(self) -> list[list[str]]:
        """(name, version, definition hash) of each rubric, sorted: what makes a set the same
        set for a judge run's identity."""
        return sorted([r.name, r.version, r.definition_hash] for r in self.rubrics.values())


# --- the built-in set -------------------------------------------------------------------------


def load_rubrics(folder: str | Path) -> RubricSet:
    """Read and check ``rubrics.toml`` in ``folder``; a bad file is a ConfigError saying why."""
    path = Path(folder) / "rubrics.toml"
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"rubric file {path} not found") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from None
    version = int(data.get("version", 0))
    rubrics: dict[str, Rubric] = {}
    for name, spec in data.items():
        if not isinstance(spec, dict):
            continue
        rubrics[name] = _rubric(path, name, spec, f"{BUILTIN_SET}-v{version}")
    result = RubricSet(version, rubrics)
    empty = [stage for stage, names in result.stage_map().items() if not names]
    if empty:
        raise ConfigError(f"{path}: no rubric applies to stage(s) {', '.join(empty)}")
    return result


def _rubric(path: Path, name: str, spec: dict[str, Any], version: str) -> Rubric:
    where = f"{path} [{name}]"
    try:
        rubric = Rubric(
            name=name,
            title=spec["title"],
            compares=spec["compares"],
            criterion=spec["criterion"].rstrip(),
            levels=tuple(spec["levels"]),
            applies_to=tuple(spec["applies_to"]),
            texts=tuple((str(label), str(text)) for label, text in spec["texts"]),
            version=version,
        )
    except KeyError as exc:
        raise ConfigError(f"{where} lacks {exc.args[0]!r}") from None
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: texts must be a list of [label, text] pairs") from None
    if len(rubric.levels) != len(SCALE.labels):
        raise ConfigError(f"{where} must define exactly {len(SCALE.labels)} levels")
    unknown = [s for s in rubric.applies_to if s not in STAGES]
    if unknown:
        raise ConfigError(f"{where}: applies_to names unknown stage(s) {', '.join(unknown)}")
    for stage in rubric.applies_to:
        for space, key in _references(rubric.texts):
            known = STAGE_FIELDS[stage] if space == "item" else STAGE_PARTS[stage]
            if space not in ("item", "answers") or key not in known:
                raise ConfigError(
                    f"{where}: text {{{space}[{key}]}} is not available for {stage} items "
                    f"(item fields: {', '.join(STAGE_FIELDS[stage])}; "
                    f"answers: {', '.join(STAGE_PARTS[stage])})"
                )
    return rubric


# --- users' rubric files ----------------------------------------------------------------------


def parse_rubric_file(
    text: str, *, source: str = "the rubric file", reserved: tuple[str, ...] = BUILTIN_NAMES
) -> list[Rubric]:
    """The rubrics a user's file defines, in the shape of ``prompts/rubrics.toml``: one table
    per rubric with ``criterion``, ``levels`` (a list, or a table numbered 1..N), ``texts``
    and optionally ``title``, ``compares`` and ``applies_to`` (default: free-form items).

    Every problem raises one InvalidInputError listing them all, each with the line of its
    rubric's table and the rubric's name.

    >>> rubric, = parse_rubric_file('''
    ... [CLEAR]
    ... criterion = "How clearly the answer is written."
    ... levels = ["Unclear.", "Mostly clear.", "Clear."]
    ... texts = [["ANSWER", "{answers[answer]}"]]
    ... ''')
    >>> rubric.name, rubric.scale.labels, rubric.applies_to
    ('CLEAR', (1, 2, 3), ('free',))
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InvalidInputError(f"{source} is not valid TOML: {exc}") from None
    problems: list[tuple[int, str]] = []
    rubrics: list[Rubric] = []
    for key, spec in data.items():
        if key == "version":  # rubrics.toml's own version; the store numbers versions itself
            continue
        line = _table_line(text, key)
        if not isinstance(spec, dict):
            problems.append((line, f"{key!r} is not a rubric table (write [{key}] above it)"))
            continue
        rubric, found = _user_rubric(key, spec, reserved)
        problems += [(line, f"rubric {key}: {why}") for why in found]
        if rubric is not None:
            rubrics.append(rubric)
    if problems:
        raise InvalidInputError(f"{source} was not registered; fix these problems:", problems)
    if not rubrics:
        raise InvalidInputError(f"{source} defines no rubric (one [NAME] table per rubric)")
    return rubrics


def _table_line(text: str, name: str) -> int:
    """The line where ``name`` is first defined: its table header (``[NAME]``,
    ``[NAME.levels]``) or a top-level ``NAME = ...``; 0 when not found."""
    key = rf"(?:{re.escape(name)}|\"{re.escape(name)}\")"
    header = re.compile(rf"^[ \t]*(?:\[[ \t]*{key}[ \t]*[\].]|{key}[ \t]*=)", re.M)
    found = header.search(text)
    return text.count("\n", 0, found.start()) + 1 if found else 0


def _user_rubric(
    name: str, spec: dict[str, Any], reserved: tuple[str, ...]
) -> tuple[Rubric | None, list[str]]:
    problems: list[str] = []
    if not _NAME.fullmatch(name):
        hint = f"; write [{name.upper()}]" if _NAME.fullmatch(name.upper()) else ""
        problems.append(
            "the name must be 1-40 capital letters, digits or underscores, starting with a "
            f"letter (like the built-in ICS){hint}"
        )
    if name in reserved or name.lower() == BUILTIN_SET:
        problems.append(f"the name is taken by a built-in rubric ({', '.join(reserved)})")
    unknown = sorted(set(spec) - set(_KEYS))
    if unknown:
        problems.append(f"unknown key(s) {', '.join(unknown)} (known: {', '.join(_KEYS)})")
    problems += [f"'{key}' is missing" for key in _REQUIRED if key not in spec]
    title = _one_line(spec.get("title", name), "title", problems) or name
    compares = _one_line(spec.get("compares", ""), "compares", problems)
    criterion = spec.get("criterion", "")
    if "criterion" in spec and (not isinstance(criterion, str) or not criterion.strip()):
        problems.append("'criterion' must be a non-empty text")
    levels = _levels(spec["levels"], problems) if "levels" in spec else ()
    applies_to = _applies_to(spec.get("applies_to", [FREE_STAGE]), problems)
    texts = _texts(spec["texts"], problems) if "texts" in spec else ()
    if texts and applies_to:
        problems += _check_references(texts, applies_to)
    if problems:
        return None, problems
    rubric = Rubric(
        name=name,
        title=title,
        compares=compares,
        criterion=criterion.strip(),
        levels=levels,
        applies_to=applies_to,
        texts=texts,
        registered=True,
    )
    return rubric, []


def _one_line(value: Any, key: str, problems: list[str]) -> str:
    if not isinstance(value, str):
        problems.append(f"'{key}' must be text")
        return ""
    return " ".join(value.split())


def _levels(raw: Any, problems: list[str]) -> tuple[str, ...]:
    """The level definitions in order, from a list or a table keyed "1".."N"; a level left
    out or left empty is named."""
    if isinstance(raw, list):
        numbered = {number: text for number, text in enumerate(raw, start=1)}
    elif isinstance(raw, dict):
        numbered = {}
        for key, text in raw.items():
            if not re.fullmatch(r"[1-9]\d*", key.strip()):
                problems.append(f"level {key!r} is not a whole number from 1 up")
                continue
            numbered[int(key)] = text
    else:
        problems.append("'levels' must be a list of definitions or a table numbered 1..N")
        return ()
    top = max(numbered, default=0)
    if top < MIN_LEVELS or top > MAX_LEVELS:
        problems.append(f"'levels' must define {MIN_LEVELS} to {MAX_LEVELS} levels, got {top}")
        return ()
    levels: list[str] = []
    for number in range(1, top + 1):
        text = numbered.get(number)
        if text is None:
            problems.append(f"level {number} is missing (levels run 1..{top}, each defined)")
        elif not isinstance(text, str) or not text.strip():
            problems.append(f"level {number} has no definition")
        else:
            # The prompt shows one numbered line per level, so line breaks become spaces.
            levels.append(" ".join(text.split()))
    return tuple(levels) if len(levels) == top else ()


def _applies_to(raw: Any, problems: list[str]) -> tuple[str, ...]:
    if isinstance(raw, str):
        raw = [raw]
    if not isinstance(raw, list) or not raw or not all(isinstance(s, str) for s in raw):
        problems.append(f"'applies_to' must list stages among {', '.join(ITEM_STAGES)}")
        return ()
    unknown = [s for s in raw if s not in ITEM_STAGES]
    if unknown:
        problems.append(
            f"applies_to names unknown stage(s) {', '.join(unknown)} "
            f"(known: {', '.join(ITEM_STAGES)})"
        )
        return ()
    return tuple(dict.fromkeys(raw))


def _texts(raw: Any, problems: list[str]) -> tuple[tuple[str, str], ...]:
    pairs = raw if isinstance(raw, list) else None
    if not pairs or not all(
        isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p) for p in pairs
    ):
        problems.append('\'texts\' must be a list of ["LABEL", "text"] pairs')
        return ()
    texts = tuple((label.strip(), text) for label, text in pairs)
    for label, _ in texts:
        if not _LABEL.fullmatch(label):
            problems.append(
                f"text label {label!r} must be 1-40 capital letters, digits, spaces, '_' or '-'"
            )
    labels = [label for label, _ in texts]
    twice = sorted({label for label in labels if labels.count(label) > 1})
    if twice:
        problems.append(f"text label(s) {', '.join(twice)} used more than once")
    return texts


def _check_references(texts: tuple[tuple[str, str], ...], stages: tuple[str, ...]) -> list[str]:
    """Problems with the ``{item[FIELD]}`` and ``{answers[PART]}`` references of the texts, for
    every stage the rubric applies to."""
    problems: list[str] = []
    refs: list[tuple[str, str]] = []
    for label, text in texts:
        try:
            parsed = list(string.Formatter().parse(text))
        except ValueError as exc:
            problems.append(f"text {label}: {exc} (write a literal brace as {{{{ or }}}})")
            continue
        for _, name, spec, conversion in parsed:
            if name is None:
                continue
            head, _, rest = name.partition("[")
            if spec or conversion or head not in ("item", "answers") or not rest.endswith("]"):
                problems.append(
                    f"text {label}: {{{name}}} is not a text reference; use {{item[FIELD]}} "
                    "or {answers[PART]}"
                )
                continue
            refs.append((head, rest[:-1]))
    for stage in stages:
        fields = STAGE_FIELDS[stage] + STAGE_OPTIONAL_FIELDS.get(stage, ())
        for space, key in refs:
            known = fields if space == "item" else STAGE_PARTS[stage]
            if key not in known:
                problems.append(
                    f"text {{{space}[{key}]}} is not available for {stage} items (item fields: "
                    f"{', '.join(fields)}; answers: {', '.join(STAGE_PARTS[stage])})"
                )
    if not problems and not any(space == "answers" for space, _ in refs):
        problems.append("no text shows the model's answer; add one such as {answers[answer]}")
    return problems
