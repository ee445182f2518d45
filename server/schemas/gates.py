"""Release gates' last verdicts over HTTP (``GET /api/v1/gates``): each name's newest
evaluation of a gates file by ``fairjudge gate``, every gate's outcome with the figure found
and the threshold (``fairjudge gate --json``'s shape, ``judge.reports.gate_report``)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from server.schemas.base import Strict


class GatesQuery(Strict):
    """Which verdicts: every name's last, or one name's."""

    name: str | None = Field(
        default=None,
        min_length=1,
        max_length=500,
        description="Only the last verdict kept under this name (`fairjudge gate --record`, "
        "default the gates file as given); a 404 when none is.",
    )


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class GateCheckOut(_Out):
    """One figure a gate read (one per factor for a gate on every factor)."""

    factor: str
    number: float | None = Field(description="The number checked; null: none to check.")
    passed: bool
    value: float | None = Field(description="The figure (its estimate).")
    low: float | None = Field(description="The 95 % interval's lower bound, where it has one.")
    high: float | None
    note: str = Field(description="Why there was no number to check (the gate then fails).")
    detail: str


class GateOut(_Out):
    """One gate of the file: what it asked, and what was found."""

    index: int = Field(description="Its place in the file, from 1.")
    name: str
    kind: Literal["figure", "paired", "qualified"]
    line: int = Field(description="The line of its [[gate]] header.")
    runs: list[int] = Field(description="The judge run, or A then B for a paired gate.")
    figure: str | None
    factor: str | None
    of: str | None = Field(description="value, lower or upper (the interval's bound).")
    min: float | None
    max: float | None
    require: str | None
    margin: float | None
    rubrics: list[str] | None
    unit: str | None = Field(description="percent (a run's figure) or percentage points.")
    threshold: str = Field(description="The condition in words: '>= 80', 'no worse'.")
    outcome: Literal["pass", "fail", "no figure"]
    passed: bool
    message: str = Field(description="What was found against what was asked.")
    checks: list[GateCheckOut]


class GatesResultOut(_Out):
    """The whole verdict, as ``fairjudge gate --json`` prints it."""

    file: str
    passed: bool
    n_gates: int
    n_failed: int
    failed: list[int] = Field(description="The failed gates' indexes.")
    runs: dict[str, int] = Field(description="Each run reference of the file -> its judge run.")
    gates: list[GateOut]


class GateVerdictOut(_Out):
    """One kept evaluation of a gates file."""

    id: int
    name: str
    source: str
    passed: bool
    n_gates: int
    n_failed: int
    seconds: float
    evaluated_at: datetime
    result: GatesResultOut


class GateVerdictsOut(_Out):
    """Each name's last verdict, newest first."""

    items: list[GateVerdictOut]


class GatesCheckQuery(Strict):
    """Whether to keep the verdict, and under which name."""

    record: str | None = Field(
        default=None,
        min_length=1,
        max_length=500,
        description="Keep the verdict under this name, as `fairjudge gate --record NAME` does "
        "(then `GET /api/v1/gates` lists it); left out, nothing is kept.",
    )


class GatesCheckIn(Strict):
    """A gates file sent as JSON (or send the file itself as the body, with `Content-Type:
    text/plain` or `application/toml`)."""

    text: str = Field(min_length=1, description="The gates file's TOML text (docs/gates.md).")


class GatesCheckOut(_Out):
    """The verdict of a posted gates file: what `fairjudge gate --json` prints, with whether
    and where it was kept. A failed gate is a verdict, not an error: the status is 200."""

    passed: bool = Field(description="Every gate passed.")
    n_gates: int
    n_failed: int
    seconds: float = Field(description="How long the evaluation took.")
    kept_as: str | None = Field(description="The name the verdict is kept under (`record`).")
    verdict_id: int | None = Field(description="The kept verdict's id; null: not kept.")
    result: GatesResultOut
