"""What every audit suite provides, so one runner sends any suite to a model and stores it.

A suite is a design (the prompts, each with a stable key and the facts the analysis needs),
a reader (what one answer says: a name, a number, a list of choices) and an analysis over
the stored answers. The runner (``judge.audits.runner``) owns everything else: the call
cache, resuming, the run lease, concurrency and storing raw text.

A reading follows the judge's rule (``judge.grading.parsing``): text that cannot be read is
stored as ``unparsed`` with the reason and the raw text, never guessed into a value.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from judge.reports.sections import Report

PARSED = "parsed"
UNPARSED = "unparsed"
REFUSAL = "refusal"
EMPTY = "empty"
ERROR = "error"  # the call failed for good; retried on the next run
ANSWERED = "answered"  # a follow-up explanation, read later by a judge or a person
STATUSES = (PARSED, UNPARSED, REFUSAL, EMPTY, ERROR, ANSWERED)

MAIN = "main"
FOLLOWUP = "followup"


@dataclass(frozen=True)
class AuditTask:
    """One prompt to send. ``key`` is unique within the run and the same on every rerun;
    ``sample_index`` tells repeats of the same prompt apart in the call cache; ``meta`` is
    stored with the answer (JSON), so the analysis never needs the design again."""

    key: str
    messages: list[dict[str, str]]
    meta: dict[str, Any] = field(default_factory=dict)
    sample_index: int = 0
    turn: str = MAIN


@dataclass(frozen=True)
class Reading:
    """What one answer says: ``status`` one of ``STATUSES``; ``value`` JSON when parsed;
    ``reason`` why not."""

    status: str
    value: Any = None
    reason: str | None = None


@dataclass(frozen=True)
class StoredAnswer:
    """An answer as the analysis sees it (a stored ``AuditAnswer`` row, without its call)."""

    id: int
    key: str
    turn: str
    meta: Mapping[str, Any]
    status: str
    value: Any
    raw_text: str | None
    prompt: str | None  # None unless asked for (judge.audits.runner.stored_answers)


class Analysis(Protocol):
    def to_dict(self) -> dict[str, Any]: ...


class Suite(Protocol):
    """One audit design. ``params`` (JSON) and ``version`` make up the run's identity."""

    name: str
    version: str

    @property
    def params(self) -> dict[str, Any]: ...

    def count(self) -> int:
        """How many main-turn prompts ``tasks`` yields."""
        ...

    def tasks(self) -> Iterator[AuditTask]:
        """Every main-turn prompt of the design, in a stable order."""
        ...

    def read(self, task_meta: Mapping[str, Any], text: str) -> Reading:
        """What a non-empty answer to the prompt with ``task_meta`` says."""
        ...

    def followups(self, answers: Sequence[StoredAnswer]) -> Iterator[AuditTask]:
        """Second-turn prompts built from stored main answers (none for most suites)."""
        ...

    def analyze(self, answers: Sequence[StoredAnswer]) -> Analysis:
        """The suite's statistics over the stored answers of one run."""
        ...

    def report(self, analysis: Analysis) -> Report:
        """The analysis as a report (tables, bar charts, CSV)."""
        ...
