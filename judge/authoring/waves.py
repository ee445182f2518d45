"""The calls of a generated-items run, wave by wave: each cell's state during the run, the next
calls of every cell still short (within its cap, on attempts not taken yet), and each cell's
prompt and reply schema rendered once."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from judge.authoring.replies import (
    Cell,
    generated_fields,
    items_schema,
)
from judge.authoring.stored_calls import (
    free_attempts,
    split_asks,
)
from judge.data.taxonomy import Taxonomy
from judge.prompts import PromptBook, RenderedPrompt


@dataclass(frozen=True)
class CellCall:
    """One call to make: its cell, attempt number, items asked, prompt and reply schema."""

    cell: Cell
    attempt: int
    asked: int
    prompt: RenderedPrompt
    schema: dict[str, Any]


class CellPrompts:
    """The prompt and schema of each (cell, items asked), rendered once."""

    def __init__(self, book: PromptBook, taxonomy: Taxonomy) -> None:
        self.book = book
        self.factors = {f.id: f for f in taxonomy.factors}
        self.scenarios = {s.id: s for s in taxonomy.scenarios}
        self._made: dict[tuple[Cell, int], tuple[RenderedPrompt, dict[str, Any]]] = {}

    def __call__(self, cell: Cell, asked: int) -> tuple[RenderedPrompt, dict[str, Any]]:
        key = (cell, asked)
        if key not in self._made:
            prompt = self.book.dataset_generation_prompt(
                stage=cell.stage,
                fields=generated_fields(cell.stage),
                factor=self.factors[cell.factor],
                scenario=self.scenarios[cell.scenario],
                count=asked,
            )
            self._made[key] = (prompt, items_schema(cell.stage, asked))
        return self._made[key]


@dataclass
class CellState:
    """One cell during a run."""

    wanted: int
    cap: int
    taken: set[int]  # attempts stored, or tried in this run
    added: int = 0
    calls: int = 0
    failed: str | None = None  # the error of a call that failed for good

    @property
    def short(self) -> int:
        return max(0, self.wanted - self.added)


def next_wave(states: dict[Cell, CellState], prompts: CellPrompts, k: int) -> list[CellCall]:
    """The next calls of every cell still short, within its cap; none once all are done."""
    wave = []
    for cell, state in states.items():
        if not state.short or state.failed is not None or state.calls >= state.cap:
            continue
        n = min(math.ceil(state.short / k), state.cap - state.calls)
        attempts = free_attempts(state.taken, n)
        state.taken.update(attempts)
        for attempt, asked in zip(attempts, split_asks(state.short, k, n), strict=True):
            prompt, schema = prompts(cell, asked)
            wave.append(CellCall(cell, attempt, asked, prompt, schema))
        state.calls += n
    return wave
