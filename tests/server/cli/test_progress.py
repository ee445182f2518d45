"""Progress that everyone can read: where stderr is not a terminal (a log, CI, a pipe), plain
lines at most every few seconds and one at the end, with counts, rate and time left."""

from __future__ import annotations

import pytest

from server.cli.output import (
    PLAIN_PROGRESS_EVERY_S,
    PlainProgress,
    progress_bar,
    progress_line,
    rate_text,
)
from server.usecases.demo import seconds_text


def test_a_progress_line_says_count_share_rate_and_time_left() -> None:
    # 540 of 2,000 in 10.8 s: 27 %, 540 / 10.8 = 50.0 a second, (2,000 - 540) / 50 = 29.2 s.
    assert progress_line("judging", 540, 2000, 10.8) == (
        "judging: 540/2,000 (27 %), 50.0/s, about 29 s left"
    )
    # Done: 2,000 in 40 s.
    assert progress_line("judging", 2000, 2000, 40.0) == (
        "judging: 2,000/2,000 (100 %), 50.0/s, done in 40 s"
    )
    # Slower than one a second the rate reads as seconds each: 3 in 9.3 s = 3.1 s each, and
    # 33 left take 33 x 3.1 = 102.3 s = 1 min 42 s.
    assert progress_line("judging", 3, 36, 9.3) == (
        "judging: 3/36 (8 %), 3.1 s each, about 102 s left"
    )
    assert progress_line("generating", 0, 10, 0.0) == "generating: 0/10 (0 %)"


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.04, "0.0 s"), (9.94, "9.9 s"), (74.4, "74 s"), (119.4, "119 s"), (185, "3 min 5 s")],
)
def test_durations_read_as_people_say_them(seconds: float, text: str) -> None:
    assert seconds_text(seconds) == text


def test_rates() -> None:
    assert (rate_text(52.14), rate_text(1.0), rate_text(0.5)) == ("52.1/s", "1.0/s", "2.0 s each")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_plain_progress_writes_at_most_one_line_per_interval_and_one_at_the_end() -> None:
    clock, lines = Clock(), list[str]()
    progress = PlainProgress("judging", lines.append, every=5.0, clock=clock)
    for done in range(1, 400):  # 400 results within the first 4 s: no line yet
        clock.now = 100.0 + done / 100
        progress(done, 1000)
    assert lines == []
    clock.now = 105.0  # 5 s after the start: a line, then none until 5 s later
    progress(500, 1000)
    clock.now = 109.9
    progress(990, 1000)
    assert lines == ["judging: 500/1,000 (50 %), 100.0/s, about 5.0 s left"]
    clock.now = 110.0  # the last result: always a line, and only one
    progress(1000, 1000)
    progress(1000, 1000)
    assert lines[1:] == ["judging: 1,000/1,000 (100 %), 100.0/s, done in 10 s"]
    # More work added after the end (a plan's second round of calls): its end is said too,
    # once; in between, lines come every 5 s as before. 1,200 in 20 s = 60.0 a second.
    clock.now = 112.0
    progress(1100, 1200)
    clock.now = 120.0
    progress(1200, 1200)
    progress(1200, 1200)
    assert lines[2:] == ["judging: 1,200/1,200 (100 %), 60.0/s, done in 20 s"]


def test_progress_is_plain_lines_off_a_terminal_and_nothing_when_quiet() -> None:
    # Under pytest stderr is captured, so it is not a terminal.
    with progress_bar("judging", False) as bar:
        assert isinstance(bar, PlainProgress) and bar.every == PLAIN_PROGRESS_EVERY_S
    with progress_bar("judging", True) as bar:
        assert bar is None


def test_a_pass_with_nothing_to_do_says_so_rather_than_100_percent() -> None:
    # 108 of 108 judgments stored when the pass began: no call to make, one line saying so.
    clock, lines = Clock(), list[str]()
    progress = PlainProgress("judging", lines.append, every=5.0, clock=clock)
    progress.begin(108, 108)
    clock.now = 130.0
    progress(108, 108)  # a producer that calls anyway adds no "108/108 (100 %)" line
    assert lines == ["judging: nothing to do: 108 of 108 already stored"]


def test_a_resumed_pass_counts_its_own_work_and_says_what_was_stored() -> None:
    # 1,000 of 1,200 stored before: this pass has 200 to do. 100 of them in 5 s = 20.0 a
    # second, 100 left take 5.0 s; all 200 in 10 s.
    clock, lines = Clock(), list[str]()
    progress = PlainProgress("judging", lines.append, every=5.0, clock=clock)
    progress.begin(1000, 1200)
    assert lines == []  # work to do: the first line comes with the first results
    clock.now = 105.0
    progress(1100, 1200)
    clock.now = 110.0
    progress(1200, 1200)
    assert lines == [
        "judging: 100/200 (50 %), 20.0/s, about 5.0 s left; 1,000 already stored",
        "judging: 200/200 (100 %), 20.0/s, done in 10 s; 1,000 already stored",
    ]


def test_a_fresh_pass_reads_as_before() -> None:
    clock, lines = Clock(), list[str]()
    progress = PlainProgress("judging", lines.append, every=5.0, clock=clock)
    progress.begin(0, 10)
    clock.now = 102.0
    progress(10, 10)
    # 10 in 2 s = 5.0 a second, no stored count said.
    assert lines == ["judging: 10/10 (100 %), 5.0/s, done in 2.0 s"]


def test_a_pass_stopped_short_ends_with_its_counts_never_a_share() -> None:
    # A cost bound stopped the pass at 2,999 of 3,000 (after 1,000 stored): one line at 5 s
    # (the interval), then the pass returns at 6 s with 1,999 of its 2,000 done. A share
    # would round to "100 %"; the end line says the counts.
    clock, lines = Clock(), list[str]()
    progress = PlainProgress("judging", lines.append, every=5.0, clock=clock)
    progress.begin(1000, 3000)
    clock.now = 105.0
    progress(2000, 3000)
    clock.now = 106.0
    progress(2999, 3000)
    progress.end()
    assert lines[-1] == "judging: ended with 1,999 of 2,000 done in 6.0 s; 1,000 already stored"
    assert len(lines) == 2 and not any("100 %" in line for line in lines)


def test_a_pass_that_reached_its_total_adds_no_end_line() -> None:
    clock, lines = Clock(), list[str]()
    progress = PlainProgress("judging", lines.append, every=5.0, clock=clock)
    progress.begin(0, 10)
    clock.now = 102.0
    progress(10, 10)
    progress.end()
    assert lines == ["judging: 10/10 (100 %), 5.0/s, done in 2.0 s"]
    # Nothing to do: the begin line only.
    again: list[str] = []
    idle = PlainProgress("judging", again.append, every=5.0, clock=clock)
    idle.begin(10, 10)
    idle.end()
    assert again == ["judging: nothing to do: 10 of 10 already stored"]
