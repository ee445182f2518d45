"""Killing a command at random moments (for the durability tests and the benchmark)."""

from __future__ import annotations

import random
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass

from tests.support.stub_openai import StubServer


def requests_of(stub: StubServer, kind: str) -> int:
    """Requests the stub received (paid for) whose key starts with ``kind`` ('judge', 'gen')."""
    with stub.state.lock:  # the stub's threads add keys while we read
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


# Interrupting a command at chosen moments (SIGINT, SIGTERM): tests/server/cli/test_interrupt.py.


@dataclass(frozen=True)
class Interrupted:
    """How a command ended after a signal: its exit code, the seconds from the signal to
    its exit, and what it wrote on stderr."""

    returncode: int
    seconds: float
    stderr: str


def interrupt_when(
    command: list[str],
    ready: Callable[[], bool],
    sig: int,
    *,
    bound: float = 10.0,
    after_signal: Callable[[], None] | None = None,
) -> Interrupted:
    """Start ``command``, send it ``sig`` once ``ready()`` holds (polled, so the moment is
    set by what the command has done, not by a clock), call ``after_signal``, and wait at
    most ``bound`` seconds for it to end. A command still running then is SIGKILLed and
    the test fails; so does one that ends before ``ready()`` held."""
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not ready():
        if proc.poll() is not None:
            _, stderr = proc.communicate()
            raise AssertionError(f"{command} ended (exit {proc.returncode}) too early: {stderr}")
        if time.monotonic() > deadline:
            proc.kill()
            proc.communicate()
            raise AssertionError(f"{command}: the moment to interrupt never came")
        time.sleep(0.002)
    proc.send_signal(sig)
    sent = time.monotonic()
    if after_signal is not None:
        after_signal()
    try:
        _, stderr = proc.communicate(timeout=bound)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, stderr = proc.communicate()
        raise AssertionError(
            f"{command} still ran {bound} s after signal {sig}; stderr: {stderr[-2000:]}"
        ) from None
    return Interrupted(proc.returncode, time.monotonic() - sent, stderr)
