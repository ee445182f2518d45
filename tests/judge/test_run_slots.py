"""The slots that bound calls started and not yet committed (``judge.runs._Slots``): a pool
of ``n`` that a worker takes from before its call and the calling thread refills after the
commit. Expected counts are the pool's size, worked out by hand in each test."""

from __future__ import annotations

import threading

import pytest

from judge.runs import _Slots, _Stopped


def test_n_slots_let_exactly_n_calls_start() -> None:
    slots = _Slots(3)
    for _ in range(3):  # 3 slots: three takes return at once
        slots.take()
    slots.stopped.set()
    with pytest.raises(_Stopped):  # the 4th finds none free and gives up once stopped
        slots.take()


def test_slots_given_back_are_taken_again_and_no_more() -> None:
    slots = _Slots(1)
    slots.take()
    slots.give_back(2)  # 0 free + 2 given back = 2 takes, the 3rd must wait
    slots.take()
    slots.take()
    slots.stopped.set()
    with pytest.raises(_Stopped):
        slots.take()


def test_a_waiting_worker_starts_when_a_slot_is_given_back() -> None:
    slots = _Slots(1)
    slots.take()
    started = threading.Event()

    def worker() -> None:
        slots.take()
        started.set()

    thread = threading.Thread(target=worker, daemon=True)
    thread.start()
    assert not started.wait(0.3)  # no slot free: the worker waits
    slots.give_back()
    assert started.wait(5)  # one slot back: the worker goes on
    thread.join(5)
