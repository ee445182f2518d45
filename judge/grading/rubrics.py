"""The rubrics, read once from ``prompts/rubrics.toml``: what each compares, its levels, the
stages it applies to, and the labelled texts it puts before the judge.

This file is the single source of the stage -> rubric map (``applies_to``) and of the texts
per rubric (``texts``); nothing else hard-codes which rubric judges which stage.
"""

from __future__ import annotations

import string
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from judge.errors import ConfigError
from judge.vocab import SCALE, STAGE_FIELDS, STAGE_PARTS, STAGES

# What the judge must return; llama.cpp enforces `enum` (not minimum/maximum).
GRADE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "explanation": {"type": "string"},
        "score": {"type": "integer", "enum": list(SCALE.labels)},
    },
    "required": ["explanation", "score"],
    "additionalProperties": False,
}


@dataclass(frozen=True)
class Rubric:
    name: str
    title: str
    compares: str
    criterion: str
    levels: tuple[str, ...]
    applies_to: tuple[str, ...]
    texts: tuple[tuple[str, str], ...]  # (label, format string over item[...] and answers[...])

    def render_texts(
        self, fields: dict[str, Any], answers: dict[str, str]
    ) -> list[tuple[str, str]]:
        """The labelled texts the judge compares for one item."""
        return [(label, text.format(item=fields, answers=answers)) for label, text in self.texts]

    @property
    def parts(self) -> tuple[str, ...]:
        """The answer parts this rubric reads."""
        return _answer_parts(self.texts)


@cache
def _answer_parts(texts: tuple[tuple[str, str], ...]) -> tuple[str, ...]:
    # Cached: planning asks once per item, and parsing format strings is not free.
    return tuple(sorted({key for space, key in _references(texts) if space == "answers"}))


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
    """All rubrics of one prompts folder, in file order."""

    version: int
    rubrics: dict[str, Rubric]

    def __getitem__(self, name: str) -> Rubric:
        return self.rubrics[name]

    def __iter__(self) -> Any:
        return iter(self.rubrics.values())

    def for_stage(self, stage: str) -> tuple[str, ...]:
        """Names of the rubrics that judge items of ``stage``, in file order."""
        return tuple(r.name for r in self.rubrics.values() if stage in r.applies_to)

    def stage_map(self) -> dict[str, tuple[str, ...]]:
        return {stage: self.for_stage(stage) for stage in STAGES}


def load_rubrics(folder: str | Path) -> RubricSet:
    """Read and check ``rubrics.toml`` in ``folder``; a bad file is a ConfigError saying why."""
    path = Path(folder) / "rubrics.toml"
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"rubric file {path} not found") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from None
    rubrics: dict[str, Rubric] = {}
    for name, spec in data.items():
        if not isinstance(spec, dict):
            continue
        rubrics[name] = _rubric(path, name, spec)
    result = RubricSet(int(data.get("version", 0)), rubrics)
    empty = [stage for stage, names in result.stage_map().items() if not names]
    if empty:
        raise ConfigError(f"{path}: no rubric applies to stage(s) {', '.join(empty)}")
    return result


def _rubric(path: Path, name: str, spec: dict[str, Any]) -> Rubric:
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
