"""Figures kept between page loads while the store has not changed.

A judge run's figures on 10,000 judgments take tens of seconds to compute (the estimates, the
alt-test, agreement's bootstrap); a page that recomputed them on every load would be unusable.
So a page's figures are kept with the version of the rows they read (a judge run's pages:
``server.usecases.dashboard.run_version``, the run's own rows; other pages:
``store_version``, rows, highest ids, latest times and in-place statuses of every table a
figure reads) and reused only while the version is the same and they are younger than
``MAX_AGE_S``. Every page that shows kept figures says when they were
computed and offers to compute them again (``?fresh=1``): an answer is never stale without
saying so.

One cache per process (gunicorn's workers each keep their own), bounded in entries. Behind
it, a judge run's pages (its report, agreement, the judge's checks) are also kept in the store
(server.usecases.figures), where every worker, machine and restart finds them and where a job
that ends leaves its run's pages computed ahead; server/kept/serving.py reads them there.

A judge run's page whose figures are kept at no version of the run's rows as they are now is
not computed in the request: its computation runs off the request (server/kept/serving.py)
and the page waits for it a short bound, then shows the run's latest kept figures with a
banner saying they predate the latest writes, or a page that reloads itself while nothing was
ever kept (``latest`` finds them in memory, ``server.usecases.figures.read_latest`` in the
store).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

T = TypeVar("T")

ENTRIES = 8
"""Pages' figures kept at once (a 10,000-judgment run's item browser is tens of MB)."""
MAX_AGE_S = 900.0
"""Figures older than this are computed again even when the store's version is unchanged: a
bound on staleness should an in-place edit escape the version."""


@dataclass(frozen=True)
class Computed(Generic[T]):
    """A page's figures, when they were computed, how long that took, and whether this load
    reused them."""

    value: T
    at: datetime
    seconds: float
    reused: bool


class FigureCache:
    """Figures by (page, arguments), each with the store version it was computed at."""

    def __init__(self, entries: int = ENTRIES, max_age_s: float = MAX_AGE_S) -> None:
        self.entries, self.max_age_s = entries, max_age_s
        self._kept: OrderedDict[Hashable, tuple[Hashable, float, Computed[Any]]] = OrderedDict()
        self._lock = threading.Lock()

    def get(
        self,
        key: Hashable,
        version: Hashable,
        compute: Callable[[], T],
        *,
        fresh: bool = False,
    ) -> Computed[T]:
        """The figures for ``key`` computed at ``version``: kept in memory, else computed now
        and kept (``fresh``: always now)."""
        now = time.monotonic()
        with self._lock:
            kept = self._kept.get(key)
            if kept is not None and not fresh:
                at_version, born, found = kept
                if at_version == version and now - born <= self.max_age_s:
                    self._kept.move_to_end(key)
                    return Computed(found.value, found.at, found.seconds, True)
        # Computed outside the lock: another page's figures need not wait for these.
        start = time.perf_counter()
        value = compute()
        made = Computed(value, datetime.now(UTC), time.perf_counter() - start, False)
        self.put(key, version, made, born=now)
        return made

    def peek(self, key: Hashable, version: Hashable) -> Computed[Any] | None:
        """The figures kept in memory for ``key`` at ``version`` (young enough), or None."""
        with self._lock:
            kept = self._kept.get(key)
            if kept is None or kept[0] != version or time.monotonic() - kept[1] > self.max_age_s:
                return None
            self._kept.move_to_end(key)
            found = kept[2]
        return Computed(found.value, found.at, found.seconds, True)

    def latest(self, key: Hashable) -> tuple[Hashable, Computed[Any]] | None:
        """The figures kept in memory for ``key`` at whatever version (and age), with that
        version: what a page shows, said to be stale, while its figures are computed again."""
        with self._lock:
            kept = self._kept.get(key)
        return None if kept is None else (kept[0], kept[2])

    def put(
        self, key: Hashable, version: Hashable, made: Computed[Any], *, born: float | None = None
    ) -> None:
        """Keep ``made`` as the figures of ``key`` at ``version`` (``born``: when they were
        asked for, on the monotonic clock; now by default)."""
        with self._lock:
            self._kept[key] = (version, time.monotonic() if born is None else born, made)
            self._kept.move_to_end(key)
            while len(self._kept) > self.entries:
                self._kept.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()
