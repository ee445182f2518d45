"""The ``[qualify]`` section of the config (``judge.config.Settings.qualify``): the rule
``fairjudge checks qualify`` applies before it calls a judge qualified for a rubric
(``judge.qualify_rule``), and whether reports refuse figures from a judge that is not.
Each criterion can be changed or turned off; the defaults follow issue 42."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class QualifyConfig(BaseModel):
    """When a judge counts as validated against people for a rubric."""

    model_config = ConfigDict(extra="forbid")

    epsilon: float = Field(
        default=0.15,
        gt=0,
        lt=1,
        description="The alt-test's margin (the judge may trail an annotator by this much): "
        "0.15 is the authors' 'skilled' preset; `--epsilon` overrides it per qualification.",
    )
    min_ratings: int = Field(
        default=30,
        ge=2,
        description="The fewest rated items the judge scored that a qualification needs; "
        "below it `qualify` refuses and stores nothing (30: the alt-test authors' rule).",
    )
    min_raters: int = Field(
        default=2,
        ge=2,
        description="The fewest distinct raters among the ratings (the human-human ceiling "
        "needs two; the alt-test needs three and is refused, hence failed, below that).",
    )
    kappa_lower_bound: float | None = Field(
        default=0.0,
        description="The weighted (quadratic) kappa's interval must lie above this (its lower "
        "end strictly greater); unset to skip the criterion.",
    )
    alpha_lower_bound: float | None = Field(
        default=0.0,
        description="Krippendorff's alpha (interval) between judge and humans: its interval's "
        "lower end must be strictly greater than this; unset to skip.",
    )
    beat_majority: bool = Field(
        default=True,
        description="The judge's exact agreement must beat always answering the humans' most "
        "frequent category (its interval's lower end above that baseline).",
    )
    require_alt_test: bool = Field(
        default=True,
        description="The alt-test must pass at `epsilon` (omega >= 0.5); a refused alt-test "
        "(fewer than three annotators, too few items each) fails this criterion.",
    )
    n_bootstrap: int = Field(
        default=1000,
        ge=100,
        le=100_000,
        description="Bootstrap resamples (of rated items) for the intervals of the record.",
    )
    seed: int = Field(
        default=0, ge=0, description="Seed of the bootstrap: the same ratings give the same record."
    )
    require_qualified: bool = Field(
        default=False,
        description="The default of `--require-qualified` (report, estimates, audit reports, "
        "checks show): refuse to give figures of a judge not validated for every rubric "
        "used, with exit code 4.",
    )
