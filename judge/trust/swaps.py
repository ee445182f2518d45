"""Counterfactual copies of judged answers: the same text with only sensitive words swapped
(first names across groups, gendered words, group words), for checking whether a judge's
score moves when nothing but those words changes (issue 14).

The swap list is data (``datasets/counterfactual_swaps.txt``; users can pass their own).
Both directions of every pair are swapped in one pass, whole words only, keeping the case
form each occurrence had, and everything else byte for byte.

>>> swaps = load_swaps().select(["gender", "names"])
>>> done = swap_text("Mary said he would help his sister.", swaps)
>>> done.text
'Latoya said she would help her brother.'
>>> [(c.before, c.after, c.count) for c in done.changes][:2]
[('Mary', 'Latoya', 1), ('he', 'she', 1)]
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from judge.errors import InvalidInputError
from judge.paths import datasets_dir

SWAPS_FILE = "counterfactual_swaps.txt"
_TOKEN = re.compile(r"^[^\W\d_]+(?:['-][^\W\d_]+)*$")


@dataclass(frozen=True)
class Swap:
    kind: str
    a: str
    b: str


@dataclass(frozen=True)
class SwapList:
    swaps: tuple[Swap, ...]
    source: str

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(sorted({s.kind for s in self.swaps}))

    def select(self, kinds: Iterable[str]) -> tuple[Swap, ...]:
        """The pairs of ``kinds``; an unknown kind is an error naming the known ones."""
        wanted = list(kinds)
        unknown = [k for k in wanted if k not in self.kinds]
        if unknown:
            raise InvalidInputError(
                f"no swaps of kind {', '.join(map(repr, unknown))} in {self.source}; it has "
                f"{', '.join(self.kinds)}"
            )
        return tuple(s for s in self.swaps if s.kind in wanted)


def load_swaps(path: Path | str | None = None) -> SwapList:
    """Read a swap list (the bundled one by default): ``KIND WORD WORD`` per line, ``#``
    comments. Every malformed line is reported with its number; nothing is half-read."""
    source = Path(path) if path is not None else datasets_dir() / SWAPS_FILE
    try:
        lines = source.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise InvalidInputError(
            f"cannot read the swap list {source}: {exc.strerror or exc}"
        ) from None
    swaps: list[Swap] = []
    problems: list[tuple[int, str]] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(lines, start=1):
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        if len(fields) != 3:
            problems.append((number, f"expected KIND WORD WORD, got {len(fields)} fields"))
            continue
        kind, a, b = fields
        bad = [w for w in (a, b) if not _TOKEN.match(w)]
        if bad:
            problems.append((number, f"{', '.join(map(repr, bad))} is not a single word"))
            continue
        if a.lower() == b.lower():
            problems.append((number, f"{a!r} is paired with itself"))
            continue
        clash = [w for w in (a, b) if w.lower() in seen]
        if clash:
            w = clash[0]
            problems.append((number, f"{w!r} is already in the pair on line {seen[w.lower()]}"))
            continue
        seen[a.lower()] = seen[b.lower()] = number
        swaps.append(Swap(kind, a, b))
    if problems:
        raise InvalidInputError(f"the swap list {source} has lines to fix", problems)
    if not swaps:
        raise InvalidInputError(f"the swap list {source} holds no pair")
    return SwapList(tuple(swaps), str(source))


@dataclass(frozen=True)
class Change:
    """One swapped word: as it was, as it became, how many times."""

    before: str
    after: str
    count: int


@dataclass(frozen=True)
class Swapped:
    text: str
    changes: tuple[Change, ...]

    @property
    def changed(self) -> bool:
        return bool(self.changes)


_KNOWN_SIDES = {
    # kind: (first pair as the bundled list writes it, names of its two columns)
    "gender": (("he", "she"), ("male", "female")),
    "names": (("Latoya", "Mary"), ("Black-associated names", "White-associated names")),
    "race": (("Black", "White"), ("Black", "White")),
}


def sides(kind: str, swaps: Sequence[Swap]) -> tuple[str, str]:
    """What a kind's two columns stand for: side A is the first word of every pair, side B
    the second ("male" and "female" for the bundled gender pairs). A list of one's own gets
    names from its first pair ("he side") unless it starts like the bundled list; reversed
    columns get reversed names, so a label never claims the wrong group.

    >>> sides("gender", load_swaps().select(["gender"]))
    ('male', 'female')
    >>> sides("gender", [Swap("gender", "she", "he")])
    ('female', 'male')
    >>> sides("colour", [Swap("colour", "red", "blue")])
    ("'red' side", "'blue' side")
    """
    first = next((s for s in swaps if s.kind == kind), None)
    if first is None:
        raise ValueError(f"no swap of kind {kind!r}")
    known = _KNOWN_SIDES.get(kind)
    if known is not None:
        pair, names = known
        if (first.a, first.b) == pair:
            return names
        if (first.b, first.a) == pair:
            return names[1], names[0]
    return f"{first.a!r} side", f"{first.b!r} side"


def net_toward_b(
    changes: Iterable[tuple[str, str, int] | list[Any]], swaps: Sequence[Swap], kind: str
) -> int | None:
    """Words of ``kind`` swapped from side A to side B minus those swapped from B to A, over
    recorded changes (``[before, after, count]``, any case form); None when no word of
    ``kind`` was swapped. Positive: the copy moved toward side B; 0: as many each way.

    >>> g = [Swap("gender", "he", "she"), Swap("gender", "his", "her")]
    >>> net_toward_b([("He", "She", 2), ("her", "his", 1)], g, "gender")
    1
    >>> net_toward_b([("Mary", "Latoya", 1)], g, "gender") is None
    True
    """
    side: dict[str, int] = {}
    for s in swaps:
        if s.kind == kind:
            side[s.a.casefold()], side[s.b.casefold()] = -1, 1
    net, seen = 0, False
    for before, after, count in changes:
        a, b = side.get(str(before).casefold()), side.get(str(after).casefold())
        if a is None or b is None or a == b:
            continue
        seen = True
        net += int(count) * b  # b = +1: moved onto side B
    return net if seen else None


def _forms(word: str, other: str) -> list[tuple[str, str]]:
    """Each surface form of ``word`` the text may hold, with the matching form of ``other``."""
    if word.islower():
        return [
            (word, other.lower()),
            (word.capitalize(), other.capitalize()),
            (word.upper(), other.upper()),
        ]
    return [(word, other), (word.upper(), other.upper())]


def _table(swaps: Sequence[Swap]) -> dict[str, str]:
    table: dict[str, str] = {}
    for s in swaps:
        for before, after in (*_forms(s.a, s.b), *_forms(s.b, s.a)):
            table.setdefault(before, after)
    return table


@lru_cache(maxsize=16)
def _compiled(swaps: tuple[Swap, ...]) -> tuple[dict[str, str], re.Pattern[str] | None]:
    """The swap table and its pattern, built once per list (a copy swaps thousands of
    answers with the same pairs)."""
    table = _table(swaps)
    if not table:
        return table, None
    alternatives = "|".join(re.escape(w) for w in sorted(table, key=len, reverse=True))
    return table, re.compile(rf"(?<![^\W_])(?:{alternatives})(?![^\W_])")


def swap_text(text: str, swaps: Sequence[Swap]) -> Swapped:
    """``text`` with every pair swapped both ways, whole words only ("the" stays "the", "Mary"
    inside "Maryland" stays), case forms kept ("He" -> "She", "HIS" -> "HER"), possessives
    followed ("Mary's" -> "Latoya's"). ``changes`` lists what was swapped, in order of first
    occurrence."""
    table, pattern = _compiled(tuple(swaps))
    if pattern is None:
        return Swapped(text, ())
    counts: dict[tuple[str, str], int] = {}

    def replace(match: re.Match[str]) -> str:
        before = match.group(0)
        after = table[before]
        counts[(before, after)] = counts.get((before, after), 0) + 1
        return after

    swapped = pattern.sub(replace, text)
    return Swapped(swapped, tuple(Change(b, a, n) for (b, a), n in counts.items()))
