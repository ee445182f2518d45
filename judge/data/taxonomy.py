"""FairMonitor's sensitive factors, education scenarios and the factor -> scenario mapping,
read from ``datasets/factors_scenarios.toml`` (the seed's appendix table, as data).

Item files are checked against it (``judge.data.items``): an unknown factor or scenario id is
an error, a factor-scenario pair the table does not list is a warning. ``extend_taxonomy``
adds users' own factors and scenarios from a file of the same shape (``fairjudge dataset
generate --taxonomy FILE``).
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from judge.errors import DatasetError
from judge.paths import datasets_dir

TAXONOMY_FILE = "factors_scenarios.toml"


@dataclass(frozen=True)
class Factor:
    """A sensitive factor; ``scenarios`` are the ids the paper tests it in (sorted by id)."""

    id: str
    name: str
    description: str
    scenarios: tuple[str, ...]


@dataclass(frozen=True)
class Scenario:
    """An education scenario; ``also_named`` holds other names the paper prints for it."""

    id: str
    name: str
    description: str
    also_named: tuple[str, ...] = ()


@dataclass(frozen=True)
class Taxonomy:
    """The factors and scenarios, each in file order, and which pairs the paper lists."""

    factors: tuple[Factor, ...]
    scenarios: tuple[Scenario, ...]
    source: Path

    @property
    def factor_ids(self) -> tuple[str, ...]:
        return tuple(f.id for f in self.factors)

    @property
    def scenario_ids(self) -> tuple[str, ...]:
        return tuple(s.id for s in self.scenarios)

    @property
    def mapping(self) -> dict[str, tuple[str, ...]]:
        """factor id -> the scenario ids the paper's table lists for it."""
        return {f.id: f.scenarios for f in self.factors}

    def is_mapped(self, factor: str, scenario: str) -> bool:
        """Whether the paper's table lists ``scenario`` for ``factor``."""
        return scenario in self.mapping.get(factor, ())

    def factors_for(self, scenario: str) -> tuple[str, ...]:
        """The factor ids whose row lists ``scenario``."""
        return tuple(f.id for f in self.factors if scenario in f.scenarios)

    def suggest_scenario(self, text: str) -> str | None:
        """The scenario id whose id, name or other name ``text`` spells loosely, if any.

        >>> taxonomy = load_taxonomy()
        >>> taxonomy.suggest_scenario("Classroom management")
        'classroom_management'
        >>> taxonomy.suggest_scenario("wisdom companion")
        'study_companion'
        >>> taxonomy.suggest_scenario("quantum physics") is None
        True
        """
        wanted = _loose(text)
        for scenario in self.scenarios:
            spellings = (scenario.id, scenario.name, *scenario.also_named)
            if wanted in {_loose(s) for s in spellings}:
                return scenario.id
        return None


def _loose(text: str) -> str:
    """Lower case, every run of non-alphanumerics as one underscore."""
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")


def taxonomy_path() -> Path:
    return datasets_dir() / TAXONOMY_FILE


def load_taxonomy(path: Path | None = None) -> Taxonomy:
    """Read and check the taxonomy (the bundled one by default), once per path; raise
    DatasetError listing every problem: repeated ids, a mapped scenario that does not exist,
    a factor with no scenario, a scenario no factor uses, a missing or empty field."""
    return _load(Path(path) if path is not None else taxonomy_path())


def _read(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DatasetError(f"the factor/scenario taxonomy {path} is missing") from None
    except tomllib.TOMLDecodeError as exc:
        raise DatasetError(
            f"the factor/scenario taxonomy {path} is not valid TOML: {exc}"
        ) from None


@cache
def _load(path: Path) -> Taxonomy:
    raw = _read(path)
    problems: list[str] = []
    factors = [_factor(entry, problems) for entry in _tables(raw, "factors", problems)]
    scenarios = [_scenario(entry, problems) for entry in _tables(raw, "scenarios", problems)]
    _check(factors, scenarios, problems)
    if problems:
        listed = "\n".join(f"  {p}" for p in problems)
        raise DatasetError(f"the factor/scenario taxonomy {path} is invalid:\n{listed}")
    return Taxonomy(tuple(factors), tuple(scenarios), path)


def extend_taxonomy(path: str | Path, base: Taxonomy | None = None) -> Taxonomy:
    """``base`` (the bundled taxonomy by default) with the factors and scenarios of a user's
    file in the same shape added, checked as a whole; raise DatasetError listing every problem.

    A new id needs its ``name`` and ``description`` (and a factor its ``scenarios``, which may
    name built-in scenarios). An id that ``base`` already has is the same factor or scenario:
    a ``name`` or ``description`` given replaces the built-in wording, and a factor's
    ``scenarios`` are added to its row. Factors and scenarios keep ``base``'s order, new ones
    follow in the file's order.
    """
    base = base or load_taxonomy()
    path = Path(path)
    raw = _read(path)
    problems: list[str] = []
    factors = {f.id: f for f in base.factors}
    scenarios = {s.id: s for s in base.scenarios}
    for entry in _entries(raw, "scenarios", problems):
        key = _entry_id(entry, "scenario", problems)
        if key is None:
            continue
        if key in scenarios:
            old = scenarios[key]
            scenarios[key] = Scenario(
                key,
                _optional_text(entry, "name", old.name, problems),
                _optional_text(entry, "description", old.description, problems),
                old.also_named + _strings(entry, "also_named", "scenario", problems),
            )
        else:
            scenarios[key] = _scenario(entry, problems)
    for entry in _entries(raw, "factors", problems):
        key = _entry_id(entry, "factor", problems)
        if key is None:
            continue
        if key in factors:
            old_factor = factors[key]
            added = _strings(entry, "scenarios", "factor", problems)
            factors[key] = Factor(
                key,
                _optional_text(entry, "name", old_factor.name, problems),
                _optional_text(entry, "description", old_factor.description, problems),
                tuple(sorted(set(old_factor.scenarios) | set(added))),
            )
        else:
            factors[key] = _factor(entry, problems)
    if not raw.get("factors") and not raw.get("scenarios"):
        problems.append("no [[factors]] or [[scenarios]] entries")
    _check(list(factors.values()), list(scenarios.values()), problems)
    if problems:
        listed = "\n".join(f"  {p}" for p in problems)
        raise DatasetError(f"the factor/scenario taxonomy {path} is invalid:\n{listed}")
    return Taxonomy(tuple(factors.values()), tuple(scenarios.values()), path)


def _entries(raw: dict[str, Any], key: str, problems: list[str]) -> list[dict[str, Any]]:
    """The ``[[key]]`` tables of an extension file (none is fine); an id given twice is a
    problem."""
    entries = raw.get(key, [])
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        problems.append(f"'{key}' must be a list of [[{key}]] tables")
        return []
    ids = [e.get("id") for e in entries if isinstance(e.get("id"), str)]
    problems.extend(
        f"{key} id {i!r} is used twice" for i in sorted({i for i in ids if ids.count(i) > 1})
    )
    return entries


def _entry_id(entry: dict[str, Any], kind: str, problems: list[str]) -> str | None:
    key = entry.get("id")
    if not isinstance(key, str) or not key.strip():
        problems.append(f"a {kind} has no 'id'")
        return None
    return key


def _optional_text(entry: dict[str, Any], key: str, default: str, problems: list[str]) -> str:
    if key not in entry:
        return default
    value = entry[key]
    if not isinstance(value, str) or not value.strip():
        problems.append(f"{entry.get('id', '?')!r}: '{key}' must be a non-empty string")
        return default
    return value


def _tables(raw: dict[str, Any], key: str, problems: list[str]) -> list[dict[str, Any]]:
    entries = raw.get(key)
    if not isinstance(entries, list) or not entries:
        problems.append(f"no [[{key}]] entries")
        return []
    return [e for e in entries if isinstance(e, dict)]


def _text(entry: dict[str, Any], key: str, kind: str, problems: list[str]) -> str:
    value = entry.get(key)
    if not isinstance(value, str) or not value.strip():
        problems.append(f"a {kind} ({entry.get('id', '?')!r}) has no '{key}'")
        return ""
    return value


def _strings(entry: dict[str, Any], key: str, kind: str, problems: list[str]) -> tuple[str, ...]:
    value = entry.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        problems.append(f"{kind} {entry.get('id', '?')!r}: '{key}' must be a list of strings")
        return ()
    return tuple(value)


def _factor(entry: dict[str, Any], problems: list[str]) -> Factor:
    return Factor(
        id=_text(entry, "id", "factor", problems),
        name=_text(entry, "name", "factor", problems),
        description=_text(entry, "description", "factor", problems),
        scenarios=_strings(entry, "scenarios", "factor", problems),
    )


def _scenario(entry: dict[str, Any], problems: list[str]) -> Scenario:
    return Scenario(
        id=_text(entry, "id", "scenario", problems),
        name=_text(entry, "name", "scenario", problems),
        description=_text(entry, "description", "scenario", problems),
        also_named=_strings(entry, "also_named", "scenario", problems),
    )


def _check(factors: list[Factor], scenarios: list[Scenario], problems: list[str]) -> None:
    for kind, ids in (("factor", [f.id for f in factors]), ("scenario", [s.id for s in scenarios])):
        seen: set[str] = set()
        for key in ids:
            if key in seen:
                problems.append(f"{kind} id {key!r} is used twice")
            seen.add(key)
    known = {s.id for s in scenarios}
    used: set[str] = set()
    for factor in factors:
        if not factor.scenarios:
            problems.append(f"factor {factor.id!r} lists no scenario")
        if len(set(factor.scenarios)) != len(factor.scenarios):
            problems.append(f"factor {factor.id!r} lists a scenario twice")
        for key in factor.scenarios:
            if key not in known:
                problems.append(f"factor {factor.id!r} lists unknown scenario {key!r}")
        used.update(factor.scenarios)
    for scenario in scenarios:
        if scenario.id not in used:
            problems.append(f"scenario {scenario.id!r} is not listed by any factor")
