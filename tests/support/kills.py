"""Killing a command at random moments (for the durability tests and the benchmark)."""

from __future__ import annotations

import random
import signal
import subprocess
import time
from collections.abc import Callable

from tests.support.stub_openai import StubServer


def requests_of(stub: StubServer, kind: str) -> int:
    """Requests the stub received (paid for) whose key starts with ``kind`` ('judge', 'gen')."""
    return sum(n for key, n in stub.state.by_key.items() if key.startswith(f"{kind}:"))


def kill_at_random_moments(
    command: list[str], paid: Callable[[], int], rng: random.Random, kills: int
) -> int:
    """Start ``command`` ``kills`` times and SIGKILL it once it has sent a random number of
    new requests (plus a random fraction of a call); return how many kills landed."""
    landed = 0
    for _ in range(kills):
        before = paid()
        target = before + rng.randint(1, 25)
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while paid() < target and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        time.sleep(rng.uniform(0, 0.05))  # anywhere within a call, or between two
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            landed += 1
        _, stderr = proc.communicate(timeout=30)
        assert b"Traceback" not in stderr, stderr.decode()
    return landed
