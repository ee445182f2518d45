"""The ``[estimates]`` section of the config (``judge.config.Settings.estimates``): the bounds
at which ``fairjudge estimates`` refuses to treat ratings as a random sample, or to pool a
judge's correction across the models it judged. Its own module so that ``judge/config.py``
stays one reading; ``Settings`` holds it like any other section."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class EstimatesConfig(BaseModel):
    """When corrected figures are refused rather than given on an assumption the data deny."""

    model_config = ConfigDict(extra="forbid")

    max_smd: float = Field(
        default=0.2,
        ge=0,
        description="--assume-random: the largest standardised mean difference between the "
        "judge's scores of the rated items and of the unrated ones that still passes for a "
        "random subset (0.2: Cohen's 'small'); past it, and significant at `smd_alpha`, the "
        "ratings are refused unless --accept-unrepresentative.",
    )
    smd_alpha: float = Field(
        default=0.01,
        gt=0,
        lt=1,
        description="--assume-random: the level at which Welch's t-test of that difference "
        "must reject too (Bonferroni over the rubrics compared), so that a small honest "
        "subset, whose difference is large by chance, is not refused.",
    )
    transport_alpha: float = Field(
        default=0.05,
        gt=0,
        lt=1,
        description="--transport: a correction is pooled across models only when the joint "
        "F-test that the judge-human relation (bias and slope) is the same for every model "
        "does not reject at this level; otherwise each model gets its own estimate.",
    )
