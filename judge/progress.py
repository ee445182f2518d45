"""The one progress type of the model calls a command makes, defined once for every stage and
interface.

It is called after each stored batch of results with the tasks finished so far and the tasks
planned so far: one pass over a run's tasks (``judge.runs.store_results``), or, for items a
model writes (``judge.authoring.cells``), every wave of calls planned until then. The CLI draws
a bar from it; a job keeps it as its ``done`` and ``total``. Lines of text for people (such as
Label Studio's install steps) are another thing: ``annotation.labelstudio``'s ``Say``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeAlias

Progress: TypeAlias = Callable[[int, int], None]
"""Receives (finished, planned) task counts."""
