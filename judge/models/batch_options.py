"""How a command uses the Batch API (``BatchOptions``: the tuning options of ``--batch``).

They live in a module of their own, with no imports, so that the use cases (and through
them the CLI) can take them without loading the model client (``judge.models.batching``
imports openai)."""

from __future__ import annotations

from dataclasses import dataclass

POLL_S = 30.0
"""Seconds between two looks at a batch in progress (the provider's batches take minutes to
hours)."""


@dataclass(frozen=True)
class BatchOptions:
    """How a command sends its calls through the Batch API.

    ``retry_live``: the calls a batch did not answer are sent live in the same command (else
    the run ends incomplete and the next command sends them in a new batch). ``wait``: False
    submits (or looks at) the batches and returns without waiting for them; the same command
    run again collects them. ``poll_s``: seconds between two looks at a running batch (the
    use cases refuse one that is not above 0)."""

    retry_live: bool = False
    wait: bool = True
    poll_s: float = POLL_S
