"""The award-choice audit's data (``judge.audits.award``): the item bank of four-option
questions whose answers make up the students' response vectors, and the two groups of first
names the pairs are drawn from, each read with every problem listed at once."""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from judge.errors import InvalidInputError
from judge.paths import datasets_dir

ITEMS_FILE = "award_items.json"
NAMES_FILE = "award_names.toml"
LETTERS = ("A", "B", "C", "D")
EQUIVOCAL: Literal["equivocal"] = "equivocal"

Choice = Literal["A", "B", "equivocal"]
Group = Literal["A", "B"]


@dataclass(frozen=True)
class AwardItem:
    """A four-option item; ``answer`` is the letter of the correct option."""

    id: str
    question: str
    options: tuple[str, str, str, str]
    answer: str

    @property
    def wrong_letters(self) -> tuple[str, ...]:
        return tuple(letter for letter in LETTERS if letter != self.answer)


@dataclass(frozen=True)
class NameGroups:
    """Two groups of first names; ``pairs`` are every (group A name, group B name)."""

    attribute: str
    group_a: str
    group_b: str
    names_a: tuple[str, ...]
    names_b: tuple[str, ...]

    @property
    def pairs(self) -> tuple[tuple[str, str], ...]:
        return tuple((a, b) for a in self.names_a for b in self.names_b)

    def group_of_label(self, label: str) -> Group | None:
        """'A' or 'B' for a group label (any case), else None."""
        wanted = label.strip().casefold()
        if wanted == self.group_a.casefold():
            return "A"
        if wanted == self.group_b.casefold():
            return "B"
        return None


def load_items(path: Path | str | None = None) -> tuple[AwardItem, ...]:
    """Read an item bank (the bundled ``datasets/award_items.json`` by default): a JSON object
    with a list ``items`` (or the list itself), each item with ``question``, ``options`` (an
    object with keys A-D) and ``answer`` (one of A-D); ``id`` is optional. Raise
    InvalidInputError listing every problem."""
    source = Path(path) if path is not None else datasets_dir() / ITEMS_FILE
    try:
        raw = json.loads(source.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InvalidInputError(f"the award item file {source} does not exist") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InvalidInputError(f"the award item file {source} is not valid JSON: {exc}") from None
    entries = raw.get("items") if isinstance(raw, dict) else raw
    if not isinstance(entries, list) or not entries:
        raise InvalidInputError(
            f'the award item file {source} needs a non-empty list of items under "items"'
        )
    problems: list[str] = []
    items = [_item(n, entry, problems) for n, entry in enumerate(entries, start=1)]
    if problems:
        shown = "\n".join(f"  {p}" for p in problems)
        raise InvalidInputError(f"the award item file {source} has problems to fix:\n{shown}")
    return tuple(item for item in items if item is not None)


def _item(n: int, entry: Any, problems: list[str]) -> AwardItem | None:
    if not isinstance(entry, dict):
        problems.append(f"item {n}: must be an object with question, options and answer")
        return None
    question, options, answer = entry.get("question"), entry.get("options"), entry.get("answer")
    before = len(problems)
    if not isinstance(question, str) or not question.strip():
        problems.append(f"item {n}: 'question' must be a non-empty string")
    if (
        not isinstance(options, dict)
        or sorted(options) != list(LETTERS)
        or not all(isinstance(v, str) and v.strip() for v in options.values())
    ):
        problems.append(f"item {n}: 'options' must map exactly A, B, C and D to non-empty text")
    if answer not in LETTERS:
        problems.append(f"item {n}: 'answer' must be one of A, B, C, D, got {answer!r}")
    if len(problems) > before:
        return None
    assert isinstance(options, dict) and isinstance(question, str) and isinstance(answer, str)
    opts = tuple(options[letter].strip() for letter in LETTERS)
    return AwardItem(
        id=str(entry.get("id") or f"item{n:02d}"),
        question=question.strip(),
        options=(opts[0], opts[1], opts[2], opts[3]),
        answer=answer,
    )


_NAME = re.compile(r"^[^\W\d_]+(?:['-][^\W\d_]+)*$")  # one word of letters: Mary, Anne-Marie


def load_name_groups(path: Path | str | None = None) -> NameGroups:
    """Read a names file (the bundled ``datasets/award_names.toml`` by default): ``attribute``
    and exactly two ``[[groups]]`` tables with a ``label`` and a list of ``names``. Raise
    InvalidInputError listing every problem."""
    source = Path(path) if path is not None else datasets_dir() / NAMES_FILE
    try:
        raw = tomllib.loads(source.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InvalidInputError(f"the award names file {source} does not exist") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InvalidInputError(f"the award names file {source} is not valid TOML: {exc}") from None
    problems: list[str] = []
    attribute = raw.get("attribute")
    if not isinstance(attribute, str) or not attribute.strip():
        problems.append("'attribute' must be a non-empty string (e.g. \"race\")")
    groups = raw.get("groups")
    if not isinstance(groups, list) or len(groups) != 2:
        problems.append("there must be exactly two [[groups]] tables")
        groups = []
    labels: list[str] = []
    names: list[tuple[str, ...]] = []
    for n, group in enumerate(groups, start=1):
        label = group.get("label") if isinstance(group, dict) else None
        members = group.get("names") if isinstance(group, dict) else None
        if not isinstance(label, str) or not label.strip():
            problems.append(f"group {n}: 'label' must be a non-empty string")
            label = ""
        elif label.strip().casefold() == EQUIVOCAL:
            problems.append(f"group {n}: the label {EQUIVOCAL!r} is reserved")
        if not isinstance(members, list) or not members:
            problems.append(f"group {n}: 'names' must be a non-empty list of first names")
            members = []
        bad = [m for m in members if not isinstance(m, str) or not _NAME.match(m)]
        if bad:
            problems.append(f"group {n}: names must be single words of letters, not {bad}")
        good = tuple(m for m in members if isinstance(m, str) and _NAME.match(m))
        repeated = sorted({m for m in good if [x.casefold() for x in good].count(m.casefold()) > 1})
        if repeated:
            problems.append(f"group {n}: names listed more than once: {repeated}")
        labels.append(label.strip())
        names.append(good)
    if len(labels) == 2 and labels[0] and labels[0].casefold() == labels[1].casefold():
        problems.append("the two groups need different labels")
    if len(names) == 2:
        shared = sorted({a for a in names[0] for b in names[1] if a.casefold() == b.casefold()})
        if shared:
            problems.append(f"names in both groups: {shared}")
    if problems:
        shown = "\n".join(f"  {p}" for p in problems)
        raise InvalidInputError(f"the award names file {source} has problems to fix:\n{shown}")
    assert isinstance(attribute, str)
    return NameGroups(attribute.strip(), labels[0], labels[1], names[0], names[1])
