"""Imported pairwise judgments: the query and reply of ``GET /api/v1/pairwise/position``
(what ``fairjudge judgments position --json`` prints)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from server.schemas.base import ReplyOf, Strict
from server.usecases.pairwise import PositionOptions
from server.usecases.shapes import PairwiseImportSummary

Interval = list[float | None]


class PairwisePositionQuery(PositionOptions, Strict):
    """Which judge, how an inconsistent pair counts, and the bootstrap's size and seed."""


class PairRatesOut(BaseModel):
    """One model pair of one judge: ``model``'s wins, ties and losses against ``other``."""

    model_config = ConfigDict(extra="forbid")
    model: str
    other: str
    pairs: int = Field(description="Pairs with an outcome: the rates' denominator.")
    wins: int
    ties: int
    losses: int
    inconsistent: int = Field(
        description="Pairs whose verdict followed the position (counted as ties, or left "
        "out with inconsistent=apart)."
    )
    unreadable: int = Field(description="Pairs with an unreadable verdict: left out.")
    wins_rate: float | None
    ties_rate: float | None
    losses_rate: float | None
    wins_rate_ci: Interval = Field(description="Wilson score interval.")
    ties_rate_ci: Interval
    losses_rate_ci: Interval


class StrengthOut(BaseModel):
    """A model's centred Bradley-Terry log-strength and its bootstrap interval."""

    model_config = ConfigDict(extra="forbid")
    model: str
    strength: float | None
    ci: Interval


class JudgePositionOut(BaseModel):
    """One judge's position bias, repetition stability, win rates and strengths."""

    model_config = ConfigDict(extra="forbid")
    judge: str
    models: list[str]
    questions: int
    repetitions: list[int]
    judgments: int
    unreadable_judgments: int
    pairs: int = Field(description="Pairs judged in both orders, all repetitions.")
    readable_pairs: int = Field(description="Pairs with both verdicts readable: PC's denominator.")
    unreadable_pairs: int
    consistent: int
    primacy_preferring: int
    recency_preferring: int
    position_consistency: float | None
    position_consistency_ci: Interval
    preference_fairness: float | None = Field(
        description="(recency - primacy) / pairs, in [-1, 1]; > 0 favours the second position."
    )
    preference_fairness_ci: Interval
    repetition_stability: float | None = Field(
        description="Mean share of repetitions giving a prompt's most frequent verdict; null "
        "with one repetition."
    )
    stability_prompts: int
    flagged: bool
    flag_reasons: list[str]
    win_rates: list[PairRatesOut]
    bradley_terry: list[StrengthOut] | None = Field(
        description="Null with fewer than three models or no maximum-likelihood estimate."
    )
    bradley_terry_note: str
    bootstrap_without_estimate: int


class PairwisePositionOut(BaseModel):
    """Every judge's figures and the rules they were computed with."""

    model_config = ConfigDict(extra="forbid")
    inconsistent: Literal["tie", "apart"]
    inconsistent_rule: str
    level: float
    flag_level: float = Field(description="Bonferroni simultaneous confidence of the flags.")
    min_consistency: float
    n_bootstrap: int
    seed: int
    flagged: list[str]
    notes: list[str]
    judges: list[JudgePositionOut]


class PairwiseImportIn(Strict):
    """One file's pairwise judgments as text (docs/pairwise.md), checked whole: every problem
    listed and nothing stored from a bad text; judgments already stored are refused."""

    format: Literal["csv", "jsonl", "shi2024"]
    text: str = Field(min_length=1, description="The file's content.")
    judge: str | None = Field(
        default=None,
        min_length=1,
        max_length=200,
        description="The judge's label (csv/jsonl: unless the rows name it; shi2024: replaces "
        "the judge named by the last column).",
    )
    models: list[Annotated[str, Field(min_length=1, max_length=200)]] | None = Field(
        default=None, max_length=1000, description="The models the text may name."
    )


class PairwiseImportOut(ReplyOf[PairwiseImportSummary]):
    """What an import stored (``judge.trust.pairwise_import.PairwiseImportSummary``)."""
