"""Ctrl-C and SIGTERM held off while one transaction runs and delivered as soon as it ends, so
that an interrupt never lands inside the database driver (see ``interrupts_held``)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

HELD_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def interrupts_held() -> Iterator[None]:
    """Hold Ctrl-C and SIGTERM off for the block (one transaction) and deliver them, to
    whatever handler the process had, as soon as it ends.

    An interrupt raised inside the database driver is worse than one a moment later: with
    SQLite, KeyboardInterrupt raised from inside an ``INSERT`` makes SQLAlchemy give the
    connection up without a rollback, and the statement left open keeps the write lock
    until the traceback is freed, so the cleanup that follows (storing what arrived,
    freeing the lease) waits for the 30 s busy timeout. Only the main thread receives
    signals, so elsewhere (a job worker's thread) this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    previous = {sig: signal.signal(sig, lambda got, _: held.append(got)) for sig in HELD_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            # None: a handler set outside Python, which cannot be put back; the default.
            signal.signal(sig, signal.SIG_DFL if handler is None else handler)
        for got in held:  # the first one's handler usually raises, ending the loop
            signal.raise_signal(got)
