"""The one progress type of the model calls a command makes, defined once for every stage and
interface.

It is called after each stored batch of results with the tasks finished so far and the tasks
planned so far: one pass over a run's tasks (``judge.runs.store_results``), or, for items a
model writes (``judge.authoring.cells``), every wave of calls planned until then. The CLI draws
a bar from it; a job keeps it as its ``done`` and ``total``. Lines of text for people (such as
Label Studio's install steps) are another thing: ``annotation.labelstudio``'s ``Say``.

A pass over a run that resumes says first what the store already held (``begin``): a job
keeps that as done work of its run, while a progress line for people counts only the work
this pass does ("nothing to do: 108 of 108 already stored" rather than "108/108 (100 %)").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeAlias

Progress: TypeAlias = Callable[[int, int], None]
"""Receives (finished, planned) task counts."""


def begin(progress: Progress | None, stored: int, total: int) -> None:
    """Tell ``progress`` that a pass begins with ``stored`` of its ``total`` tasks already in
    the store. A callback with a ``begin(stored, total)`` method hears it there (the CLI's
    lines, which count this pass's work only). Any other hears a plain call only when the
    pass has nothing to do, so that a job's row still holds its run's work; otherwise its
    first call comes, as ever, after the first stored batch."""
    if progress is None:
        return
    hook = getattr(progress, "begin", None)
    if callable(hook):
        hook(stored, total)
    elif stored >= total:
        progress(stored, total)
