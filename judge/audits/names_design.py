"""The name audit's design (seed 002): 42 templates x 40 names, read from
``datasets/name_audit.toml``, and the prompts it asks (``judge.audits.names`` reads the
answers, ``judge.audits.names_analysis`` analyses them)."""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from judge.audits.amounts import (
    UNITS,
)
from judge.errors import DatasetError
from judge.paths import datasets_dir

CONTEXTS = ("low", "high", "numeric")


def design_path() -> Path:
    """The bundled design file."""
    return datasets_dir() / "name_audit.toml"


# --- design ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Person:
    first_name: str
    surname: str
    race: str
    gender: str

    @property
    def full_name(self) -> str:
        return f"{self.first_name} {self.surname}"


@dataclass(frozen=True)
class Template:
    scenario: str
    variation: str
    context: str
    answer: str  # "usd", "probability", "percent" or "rank"
    text: str  # holds a {name} slot


@dataclass(frozen=True)
class NameDesign:
    templates: tuple[Template, ...]
    people: tuple[Person, ...]


@dataclass(frozen=True)
class NamePrompt:
    """One prompt of the design; ``id`` is stable across runs and versions of the order."""

    id: str
    scenario: str
    variation: str
    context: str
    name: str
    race: str
    gender: str
    repeat: int
    text: str


def load_design(path: Path | None = None) -> NameDesign:
    """Read and check the design file (default: the bundled one)."""
    path = path or design_path()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        people = tuple(
            Person(str(first), str(g["surname"]), str(g["race"]), str(g["gender"]))
            for g in data["groups"]
            for first in g["first_names"]
        )
        templates = tuple(
            Template(str(s["id"]), str(v["id"]), ctx, str(s["answer"]), str(v[ctx]))
            for s in data["scenarios"]
            for v in s["variations"]
            for ctx in CONTEXTS
        )
    except (OSError, tomllib.TOMLDecodeError, KeyError, TypeError) as exc:
        raise DatasetError(f"{path}: not a valid name-audit design ({exc!r})") from exc
    bad = [f"{t.scenario}/{t.variation}/{t.context}" for t in templates if "{name}" not in t.text]
    if bad:
        raise DatasetError(f"{path}: templates without a {{name}} slot: {', '.join(bad)}")
    units = sorted({f"{t.scenario}: {t.answer!r}" for t in templates if t.answer not in UNITS})
    if units:
        raise DatasetError(f"{path}: answer must be one of {', '.join(UNITS)} ({'; '.join(units)})")
    return NameDesign(templates, people)


def count_prompts(design: NameDesign, *, repeats: int) -> int:
    """How many prompts :func:`iter_prompts` yields."""
    return len(design.templates) * len(design.people) * repeats


def iter_prompts(design: NameDesign, *, repeats: int = 100) -> Iterator[NamePrompt]:
    """Every template x person, ``repeats`` times, one at a time (168,000 at the seed's 100)."""
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    for t in design.templates:
        for p in design.people:
            text = t.text.replace("{name}", p.full_name)
            for r in range(repeats):
                yield NamePrompt(
                    id=f"{t.scenario}.{t.variation}.{t.context}.{p.first_name}_{p.surname}.{r}",
                    scenario=t.scenario,
                    variation=t.variation,
                    context=t.context,
                    name=p.full_name,
                    race=p.race,
                    gender=p.gender,
                    repeat=r,
                    text=text,
                )
