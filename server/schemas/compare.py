"""Judge runs compared: the side-by-side routes' query (``compare.*``, with ``paired``) and
the paired route's query and reply (``compare/paired.json``)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from server.schemas.base import ReplyOf, Strict
from server.usecases.requests import MAX_ID
from server.usecases.shapes import PairedComparison


class CompareQuery(Strict):
    """``fairjudge compare``'s runs and options."""

    judge_run: list[Annotated[int, Field(ge=1, le=MAX_ID)]] = Field(
        min_length=2,
        max_length=20,
        description="A judge run to compare (repeat the parameter: at least two).",
    )
    paired: bool = Field(
        default=False,
        description="Two runs judged on the same items: also the paired differences B - A "
        "per cell (the report's `paired` section; `paired_corrected` where people rated both "
        "runs' answers); runs of different items are a 400 with the counts.",
    )
    margin: float | None = Field(
        default=None,
        gt=0,
        le=100,
        description="With paired: the equivalence margin in percentage points (default 5).",
    )
    assume_random: bool = Field(
        default=False,
        description="With paired: treat imported ratings (or several campaigns') as a simple "
        "random sample of the pairs, for the differences corrected by people's ratings.",
    )


class CompareCsvQuery(CompareQuery):
    table: str | None = Field(
        default=None, max_length=100, description="Which CSV of the report (default: the first)."
    )


class PairedCompareQuery(Strict):
    """Two judge runs of the same items, A then B."""

    judge_run: list[Annotated[int, Field(ge=1, le=MAX_ID)]] = Field(
        min_length=2,
        max_length=2,
        description="Run A, then run B (the parameter twice): the differences are B - A.",
    )
    margin: float | None = Field(
        default=None,
        gt=0,
        le=100,
        description="The equivalence margin in percentage points (default 5).",
    )
    assume_random: bool = Field(
        default=False,
        description="Treat imported ratings (or several campaigns') as a simple random sample "
        "of the pairs, for the differences corrected by people's ratings.",
    )


class PairedCompareOut(ReplyOf[PairedComparison]):
    """Two judge runs pair by pair (``server.usecases.comparisons.PairedComparison``): per
    cell (``rows``: factor, stage, rubric, metric) B - A in percentage points (``diff``) with
    its 95 % bootstrap interval (``ci_low``, ``ci_high``), the exact test's ``p_value``, the
    Holm-adjusted ``p_adjusted`` and ``flagged`` (below ``alpha``), the flips
    (``pass_to_fail``, ``fail_to_pass``), the TOST interval (``tost_low``, ``tost_high``) and
    the verdicts ``equivalent`` and ``no_worse`` at ``margin`` (null: too few pairs); numbers
    that do not exist are null with a ``note``. ``corrected``: the same differences corrected
    by people's ratings of both runs' answers, judge-only, human-only and prediction-powered
    (null when neither run's answers were rated; ``usable`` false with the ``reason`` when
    the ratings cannot be used)."""
