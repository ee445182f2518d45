"""FairMonitor's fixed vocabulary, defined once: the score scale, the four stages with the
answer parts and item fields each needs, and the nine sensitive factors.

Which rubric applies to which stage is not here: it is read from ``prompts/rubrics.toml``
(``applies_to``) by ``judge.grading.rubrics``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Scale:
    """A whole-number rating scale ``low..high`` (FairMonitor's rubrics use 1-5)."""

    low: int = 1
    high: int = 5

    @property
    def labels(self) -> tuple[int, ...]:
        return tuple(range(self.low, self.high + 1))

    def __contains__(self, value: object) -> bool:
        return isinstance(value, int) and self.low <= value <= self.high

    def __str__(self) -> str:
        return f"{self.low}-{self.high}"


SCALE = Scale()

STAGES = ("S1", "S2", "S3", "S4")

# The prompts an item of each stage sends to the model under test.
STAGE_PARTS: dict[str, tuple[str, ...]] = {
    "S1": ("answer",),
    "S2": ("A", "B"),
    "S3": ("A", "B"),
    "S4": ("answer",),
}

# The texts an item file must give for each stage (docs/datasets.md).
STAGE_FIELDS: dict[str, tuple[str, ...]] = {
    "S1": ("question", "expected_answer"),
    "S2": ("story_a", "story_b", "changed_factor"),
    "S3": ("question_a", "question_b"),
    "S4": ("question", "expected_answer"),
}

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
