"""The agreement JSON's top-level ``scale`` (issue 41): the scale of the rubrics a judge
scored, "per rubric" when they differ. Before the fix it was always the built-ins' 1-5, even
for a run judged only on a 1-3 rubric. The rubrics' entries are built here by hand: the top
level reads only each rubric's scale and whether a judge scored any of its items."""

from __future__ import annotations

from typing import Any

from annotation.reliability import PER_RUBRIC, JudgeReliability, RubricReliability, RunReliability
from judge.stats.coefficient import BootstrapOptions
from judge.vocab import Scale


class _NoHumans:
    def to_dict(self) -> dict[str, Any]:
        return {}


def _rubric(name: str, scale: Scale, scored: int) -> RubricReliability:
    judge = JudgeReliability(1, "stub", "default", 0.0, scored, 0, "")
    humans: Any = _NoHumans()  # the humans' agreement is not what the top level reads
    return RubricReliability(name, 6, 2, 12, humans, [judge], scale)


def _top(*rubrics: RubricReliability) -> str:
    found = RunReliability(1, "mean", BootstrapOptions(n_bootstrap=0), 0.1,
                           {r.rubric: r for r in rubrics})  # fmt: skip
    scale: str = found.to_dict()["scale"]
    return scale


def test_a_run_judged_only_on_a_1_3_rubric_says_1_3() -> None:
    clarity, ics = Scale.parse("1-3"), Scale.parse("1-5")
    # Judged on CLARITY only (6 items); ICS was rated but the judge scored none of them.
    assert _top(_rubric("CLARITY", clarity, 6), _rubric("ICS", ics, 0)) == "1-3"
    # Judged on both: the scales differ, each rubric names its own.
    assert _top(_rubric("CLARITY", clarity, 6), _rubric("ICS", ics, 5)) == PER_RUBRIC
    # The built-ins alone: 1-5, as before.
    assert _top(_rubric("ICS", ics, 5), _rubric("TCS", ics, 4)) == "1-5"
    # Nothing scored at all: the rated rubrics' own scale.
    assert _top(_rubric("CLARITY", clarity, 0)) == "1-3"
