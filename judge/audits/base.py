"""What every audit suite provides, so one runner sends any suite to a model and stores it.

A suite is a design (the prompts, each with a stable key and the facts the analysis needs),
a reader (what one answer says: a name, a number, a list of choices) and an analysis over
the stored answers. The runner (``judge.audits.runner``) owns everything else: the call
cache, resuming, the run lease, concurrency and storing raw text.

A reading follows the judge's rule (``judge.grading.parsing``): text that cannot be read is
stored as ``unparsed`` with the reason and the raw text, never guessed into a value.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
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

DRAW = "draw"
"""``meta`` key of a prompt whose text (and sample index) an earlier prompt of the design
already had: the sample index the runner gave it, so it is a call of its own."""


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
    cache_key: str | None = None  # the call it came from: answers with one key are one draw


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


def number_draws(tasks: Iterable[AuditTask]) -> Iterator[AuditTask]:
    """``tasks`` with every repeat of the same messages and sample index moved to the next
    sample index that text has not used, so each repeat is a call (and a draw) of its own.

    The call cache keys on (messages, sample index): two prompts of a design with the same
    text and index would be answered by one call, and an analysis counting both answers
    would count one draw twice (the award design at level 20 has 500 prompts but 50 texts).
    A task that does not repeat is yielded unchanged, so its cache key, and every stored
    answer to it, stays valid; a moved one carries its index in ``meta[DRAW]``. The order is
    the design's, so the numbering is the same on every run and for any prefix of it.

    >>> t = AuditTask("k", [{"role": "user", "content": "hi"}])
    >>> [x.sample_index for x in number_draws([t, t, AuditTask("j", t.messages, sample_index=1)])]
    [0, 1, 2]
    """
    # Keyed by the messages themselves (tuples of their items): hashing each into a digest
    # instead tripled the time to walk the 168,000 prompts of the names design. A design's
    # repeats share one messages list, one after another: its key is made once for them.
    used: dict[tuple[tuple[tuple[str, str], ...], ...], set[int]] = defaultdict(set)
    last: list[dict[str, str]] | None = None
    key: tuple[tuple[tuple[str, str], ...], ...] = ()
    for task in tasks:
        if task.messages is not last:
            last, key = task.messages, tuple(tuple(sorted(m.items())) for m in task.messages)
        taken = used[key]
        index = task.sample_index
        while index in taken:
            index += 1
        taken.add(index)
        if index != task.sample_index:
            task = replace(task, sample_index=index, meta={**task.meta, DRAW: index})
        yield task
