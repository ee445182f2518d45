"""The check behind ``--assume-random``: ratings with no design of their own (imported, or of
several campaigns) are treated as a simple random sample of the run's items only if the
judge's scores of the rated items look like its scores of the unrated ones.

Per rubric with ratings, the judge's scores of the rated items are compared with those of the
items the judge scored that nobody rated (``judge.stats.representative.compare_sample``: the
standardised mean difference and Welch's t-test). A rubric fails when ``|SMD| > max_smd``
*and* its Welch p-value, Bonferroni-corrected over the rubrics compared, is below
``smd_alpha`` (``[estimates]`` in the config). Any failing rubric refuses the assumption: the
design becomes "refused (unrepresentative)" with one line giving the numbers, the bound and
the override, and the human-only and prediction-powered estimates are not given. With
``accept_unrepresentative`` they are, and the design's name and description say that the
check failed and was overridden.

A subset picked by something the judge cannot see (the people's own interest, say) passes
this check and can still be biased: it catches what the judge's scores show, no more.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

from judge.config_estimates import EstimatesConfig
from judge.metrics import ItemScore
from judge.stats.representative import SampleComparison, compare_sample

if TYPE_CHECKING:
    from annotation.estimate_results import Design

UNREPRESENTATIVE = "refused (unrepresentative)"
OVERRIDE = "--accept-unrepresentative (accept_unrepresentative=true)"


@dataclass(frozen=True)
class RubricBalance:
    """One rubric's rated items against its unrated ones (``comparison`` None: not compared,
    ``reason`` says why)."""

    rubric: str
    comparison: SampleComparison | None
    p_corrected: float | None  # Bonferroni over the rubrics compared
    failed: bool
    reason: str = ""

    def text(self) -> str:
        c = self.comparison
        if c is None or self.p_corrected is None:
            return f"{self.rubric}: not compared ({self.reason})"
        return (
            f"{self.rubric}: the judge scores the {c.n_rated} rated items {c.mean_rated:.2f} on "
            f"average against {c.mean_unrated:.2f} for the {c.n_unrated} unrated (standardised "
            f"difference {c.smd:+.2f}, Welch p = {self.p_corrected:.2g} corrected)"
        )


@dataclass(frozen=True)
class Representativeness:
    """The check of every rubric, its bounds, and whether the user overrode a failure."""

    max_smd: float
    alpha: float
    rubrics: list[RubricBalance]
    accepted: bool  # a failure was overridden

    @property
    def failed(self) -> list[RubricBalance]:
        return [r for r in self.rubrics if r.failed]

    def refusal(self) -> str:
        """The one line of a refusal: the numbers, the bound and the override."""
        found = "; ".join(r.text() for r in self.failed)
        return (
            f"--assume-random refused: the rated items do not look like a random subset of the "
            f"run's items. {found}. The bound: |difference| <= {self.max_smd:g}, or Welch p >= "
            f"{self.alpha:g} ([estimates] max_smd, smd_alpha). Rate a random sample (a rating "
            f"campaign), or pass {OVERRIDE} to use these ratings all the same"
        )

    def to_dict(self) -> dict[str, Any]:
        rubrics = []
        for r in self.rubrics:
            entry = asdict(r)
            entry["comparison"] = None if r.comparison is None else asdict(r.comparison)
            rubrics.append(entry)
        return {
            "max_smd": self.max_smd,
            "alpha": self.alpha,
            "passed": not self.failed,
            "accepted_unrepresentative": self.accepted,
            "rubrics": rubrics,
        }


def check_representative(
    scores: Sequence[ItemScore],
    human: Mapping[str, Mapping[int, float]],
    rules: EstimatesConfig,
    *,
    accepted: bool = False,
) -> Representativeness:
    """Compare, per rubric with ratings, the judge's scores of the rated items with those of
    the unrated ones (see the module docstring)."""
    judged = {
        rubric: {
            s.item_id: float(s.score) for s in scores if s.rubric == rubric and s.score is not None
        }
        for rubric in human
    }
    return check_values(judged, human, rules, accepted=accepted)


def check_values(
    judged: Mapping[str, Mapping[int, float]],
    rated: Mapping[str, Collection[int]],
    rules: EstimatesConfig,
    *,
    accepted: bool = False,
) -> Representativeness:
    """The same check on any judge values: per key of ``rated`` (a rubric, a follow-up
    class), the judge's values ``judged[key]`` (item -> value) of the items in
    ``rated[key]`` against those of the other items it judged. The award audit's follow-up
    estimates check the judge's 0/100 for each class this way."""
    found: list[tuple[str, SampleComparison | None, str]] = []
    for key in sorted(rated):
        values = judged.get(key, {})
        inside = [v for i, v in values.items() if i in rated[key]]
        outside = [v for i, v in values.items() if i not in rated[key]]
        if len(inside) < 2 or len(outside) < 2:
            why = f"{len(inside)} rated and {len(outside)} unrated scored items; 2 of each needed"
            found.append((key, None, why))
        else:
            found.append((key, compare_sample(inside, outside), ""))
    compared = sum(c is not None for _, c, _ in found)
    rubrics = []
    for key, c, why in found:
        if c is None:
            rubrics.append(RubricBalance(key, None, None, False, why))
            continue
        p = min(1.0, c.p_value * compared)
        failed = abs(c.smd) > rules.max_smd and p < rules.smd_alpha
        rubrics.append(RubricBalance(key, c, p, failed))
    return Representativeness(rules.max_smd, rules.smd_alpha, rubrics, accepted)


def guarded(design: Design, check: Representativeness) -> Design:
    """``design`` (an "assumed random" ``annotation.estimate_results.Design``) refused when
    the check failed, kept and marked when the failure was overridden, unchanged when it
    passed; the check's numbers go with it either way."""
    checked = check.to_dict()
    if not check.failed:
        return replace(design, checked=checked)
    if check.accepted:
        numbers = "; ".join(r.text() for r in check.failed)
        return replace(
            design,
            name=f"{design.name}, unrepresentative accepted",
            description=f"{design.description}. The rated items failed the random-subset check "
            f"({numbers}) and are used all the same, as {OVERRIDE} asked",
            checked=checked,
        )
    return replace(
        design,
        name=UNREPRESENTATIVE,
        usable=False,
        description="imported ratings unlike the run's other items",
        reason=check.refusal(),
        checked=checked,
    )
