"""Two models' answers to the same items, judged, with people's ratings of both, written as
rows (tests/support/planted_judge.py): the store the paired comparison's API and dashboard
tests read.

People score each item ``truth`` on both models' answers (``rated``: NaN where nobody rated);
the judge scores A's answer ``truth`` and B's ``truth + 1``; a third judge run scores A's
answers exactly as run A did (``same``); a fourth judges other items (``other``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy.engine import Engine
from sqlmodel import Session

from judge.store.tables import GenerationRun, Response
from tests.support.planted_judge import add_judge_run, add_ratings, plant


@dataclass(frozen=True)
class PlantedPairs:
    a: int
    b: int
    same: int
    other: int


def plant_pairs(engine: Engine, truth: Sequence[float], rated: Sequence[float]) -> PlantedPairs:
    """The judge runs of the module docstring, their ids."""
    with Session(engine) as session:
        a = plant(session, truth, {"r1": rated})
        gen_b = GenerationRun(
            endpoint_name="b", base_url="http://gen.example/v1", model="model-b",
            temperature=0.0, max_tokens=64, status="finished", dataset_id=a.dataset_id,
            template_version="gen-v1",
        )  # fmt: skip
        session.add(gen_b)
        session.flush()
        assert gen_b.id is not None
        session.add_all(
            Response(run_id=gen_b.id, item_id=i, part="answer", prompt="p", raw_text="b",
                     flag="ok", cache_key=f"b{i}")
            for i in a.item_ids
        )  # fmt: skip
        b = add_judge_run(session, gen_b.id, a.item_ids, [t + 1 for t in truth], model="other")
        add_ratings(session, gen_b.id, a.item_ids, "r1", rated)
        same = add_judge_run(session, a.generation_run_id, a.item_ids, truth, model="again")
        session.commit()
        other = plant(session, truth[:5], {}, name="elsewhere")
    return PlantedPairs(a.judge_run_id, b.judge_run_id, same.judge_run_id, other.judge_run_id)
