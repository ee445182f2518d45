"""FairMonitor's fixed vocabulary, defined once: the score scale (``Scale`` also describes
users' own scales), the four stages with the answer parts and item fields each needs, the
free-form stage for users' own items, the nine sensitive factors, and the statuses a run
(generation, judge or audit) goes through.

Which rubric applies to which stage is not here: it is read from ``prompts/rubrics.toml``
(``applies_to``) by ``judge.grading.rubrics``.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum


@dataclass(frozen=True)
class Scale:
    """A rating scale: the whole numbers ``low..high`` (FairMonitor's rubrics use 1-5), or an
    explicit list of whole-number ``levels`` (``0,25,50,75,100``), optionally ``names``
    (``poor,fair,good``, coded 1, 2, 3 in the order given). Means of several ratings lie
    between the levels; ``within`` accepts them, ``in`` only the levels themselves.

    >>> str(SCALE), SCALE.labels
    ('1-5', (1, 2, 3, 4, 5))
    >>> Scale.parse("0-3").labels, Scale.parse("0/1").labels, str(Scale.parse("0/1"))
    ((0, 1, 2, 3), (0, 1), '0/1')
    >>> rubric = Scale.parse("poor, fair, good")
    >>> rubric.labels, rubric.names, rubric.value_of("Fair")
    ((1, 2, 3), ('poor', 'fair', 'good'), 2)
    >>> 3 in SCALE, 3.5 in SCALE, SCALE.within(3.5), SCALE.within(0)
    (True, False, True, False)
    """

    low: int = 1
    high: int = 5
    levels: tuple[int, ...] | None = None  # None: every whole number from low to high
    names: tuple[str, ...] | None = None  # one name per level, for named levels

    def __post_init__(self) -> None:
        for name, end in (("low", self.low), ("high", self.high)):
            if isinstance(end, bool) or not isinstance(end, int):
                raise ValueError(f"{name} must be a whole number, got {end!r}")
        if self.low >= self.high:
            raise ValueError(f"low must be below high, got {self.low}-{self.high}")
        if self.levels is not None:
            levels = self.levels
            if any(isinstance(v, bool) or not isinstance(v, int) for v in levels):
                raise ValueError(f"levels must be whole numbers, got {levels!r}")
            if any(b <= a for a, b in zip(levels, levels[1:], strict=False)):
                raise ValueError(f"levels must be distinct and increasing, got {levels!r}")
            if (levels[0], levels[-1]) != (self.low, self.high):
                raise ValueError(f"levels {levels!r} must run from low to high")
        if len(self.labels) > MAX_LEVELS:
            raise ValueError(f"a scale has at most {MAX_LEVELS} levels, got {len(self.labels)}")
        if self.names is not None:
            _check_names(self.names, len(self.labels))

    @classmethod
    def of(cls, levels: Sequence[int], names: Sequence[str] | None = None) -> Scale:
        """The scale with these increasing ``levels`` (and their ``names``); a run of
        consecutive whole numbers is stored as ``low..high``, so ``of([1, 2, 3, 4, 5]) ==
        SCALE``."""
        levels = tuple(levels)
        if len(levels) < 2:
            raise ValueError(f"a scale needs at least two levels, got {levels!r}")
        consecutive = levels == tuple(range(levels[0], levels[0] + len(levels)))
        named = None if names is None else tuple(names)
        return cls(levels[0], levels[-1], None if consecutive else levels, named)

    @classmethod
    def parse(cls, text: str) -> Scale:
        """A scale from text: ``1-5`` (whole numbers low to high), ``0/1`` (two levels),
        ``1,2,3`` (the levels) or ``poor,fair,good`` (named levels, coded 1, 2, 3)."""
        raw = text if isinstance(text, str) else str(text)
        usage = (
            f"--scale must look like 1-5, 0/1 or 1,2,3; got {raw!r} "
            "(levels may also be names: low,mid,high)"
        )
        if match := _RANGE.fullmatch(raw) or _PAIR.fullmatch(raw):
            low, high = int(match[1]), int(match[2])
            if low >= high:
                raise ValueError(f"--scale {raw!r} must go from low to high")
            return cls.of([low, high]) if match.re is _PAIR else cls(low, high)
        parts = [p.strip() for p in raw.split(",")]
        if len(parts) < 2 or not all(parts):
            raise ValueError(usage)
        numeric = [_is_number(p) for p in parts]
        if all(numeric):
            if not all(_WHOLE.fullmatch(p) for p in parts):
                raise ValueError(f"--scale levels must be whole numbers; got {raw!r}")
            try:
                return cls.of([int(p) for p in parts])
            except ValueError as exc:
                raise ValueError(f"--scale {raw!r}: {exc}") from None
        if any(numeric):
            raise ValueError(f"--scale levels must be all numbers or all names; got {raw!r}")
        return cls.of(range(1, len(parts) + 1), parts)

    @property
    def labels(self) -> tuple[int, ...]:
        """The levels as whole numbers, lowest first (named levels: 1, 2, ...)."""
        if self.levels is not None:
            return self.levels
        return tuple(range(self.low, self.high + 1))

    def value_of(self, name: str) -> int | None:
        """The number of the level called ``name`` (case and surrounding spaces ignored);
        None when the levels have no names or none is called that."""
        if self.names is None:
            return None
        wanted = name.strip().casefold()
        found = [v for v, n in zip(self.labels, self.names, strict=True) if n.casefold() == wanted]
        return found[0] if found else None

    def __contains__(self, value: object) -> bool:
        """Whether ``value`` is one of the levels (a whole number; bools are not scores)."""
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            return False
        number = float(value)
        return number.is_integer() and int(number) in self.labels

    def within(self, value: object) -> bool:
        """Whether ``value`` (a rating, or a mean of ratings) lies within ``low..high``."""
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            return False
        number = float(value)
        return math.isfinite(number) and self.low <= number <= self.high

    def __str__(self) -> str:
        if self.names is not None:
            return ",".join(self.names)
        if self.levels is not None:
            return ",".join(map(str, self.levels))
        if self.high == self.low + 1:
            return f"{self.low}/{self.high}"
        return f"{self.low}-{self.high}"


MAX_LEVELS = 1000  # kappa's weight matrix is levels x levels
_RANGE = re.compile(r"\s*([+-]?\d+)\s*-\s*([+-]?\d+)\s*")
_PAIR = re.compile(r"\s*([+-]?\d+)\s*/\s*([+-]?\d+)\s*")
_WHOLE = re.compile(r"[+-]?\d+")


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _check_names(names: tuple[str, ...], n_levels: int) -> None:
    if len(names) != n_levels:
        raise ValueError(f"names must name each of the {n_levels} levels, got {len(names)}")
    if any(not isinstance(n, str) or not n.strip() or n != n.strip() for n in names):
        raise ValueError(f"level names must be non-empty and unpadded, got {names!r}")
    if any(_is_number(n) or "," in n for n in names):
        raise ValueError(f"level names must not be numbers or hold commas, got {names!r}")
    if len({n.casefold() for n in names}) != len(names):
        raise ValueError(f"level names must be distinct (ignoring case), got {names!r}")


SCALE = Scale()

STAGES = ("S1", "S2", "S3", "S4")
"""FairMonitor's stages: each has built-in rubrics and stage metrics."""

FREE_STAGE = "free"
"""Users' own items: one prompt, one answer, an optional reference; judged only by the rubrics
users register (``judge.grading.rubrics``), with no factor or scenario required."""

ITEM_STAGES = (*STAGES, FREE_STAGE)
"""Every stage an item file may name."""

# The prompts an item of each stage sends to the model under test.
STAGE_PARTS: dict[str, tuple[str, ...]] = {
    "S1": ("answer",),
    "S2": ("A", "B"),
    "S3": ("A", "B"),
    "S4": ("answer",),
    FREE_STAGE: ("answer",),
}

# The texts an item file must give for each stage (docs/datasets.md).
STAGE_FIELDS: dict[str, tuple[str, ...]] = {
    "S1": ("question", "expected_answer"),
    "S2": ("story_a", "story_b", "changed_factor"),
    "S3": ("question_a", "question_b"),
    "S4": ("question", "expected_answer"),
    FREE_STAGE: ("prompt",),
}

# Texts an item of a stage may give besides its required ones, and that a rubric may compare.
STAGE_OPTIONAL_FIELDS: dict[str, tuple[str, ...]] = {FREE_STAGE: ("reference",)}

FACTORS = (
    "gender",
    "race_culture",
    "learning_style",
    "grade_age",
    "learning_ability",
    "socioeconomic_status",
    "disability_special_groups",
    "personality",
    "subject",
)


class RunStatus(StrEnum):
    """Where a generation, judge or audit run stands. The store keeps the value as plain text
    (the ``status`` column is a string), and a member equals its value.

    >>> RunStatus.FINISHED == "finished", f"{RunStatus.INCOMPLETE}", RunStatus("running").name
    (True, 'incomplete', 'RUNNING')
    """

    RUNNING = "running"
    """Created, or being worked on now (or the process working on it was killed)."""
    FINISHED = "finished"
    """Every result is in (a result may still be unscored or unreadable: that is a result)."""
    INCOMPLETE = "incomplete"
    """Some results are missing (failed calls, a cost budget); ``status_detail`` says how many
    and why, and running the same command again goes on."""
    UNUSABLE = "unusable"
    """Every planned call was made, but more than ``[runs] max_unusable_share`` of the results
    are unscored or failed: the run's figures would rest on the few left. ``status_detail``
    says how many and why; a rerun retries those that failed outside the model's reply."""
