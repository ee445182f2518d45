"""Two small judge runs on a real SQLite store, shared by the tests of figures kept per run
(tests/server/dashboard/test_fresh_figures.py, test_stale_pages.py) and of the warmers'
claim on a run (tests/server/jobs/test_warm_claim.py).

Two datasets, ``a`` and ``b``: the sample's 18 S1 items each, answered and judged once
against the scripted stub (one ICS judgment per item: ICS is the one S1 rubric,
prompts/rubrics.toml); run ``a`` has 2 raters' ratings of its first 3 judged items (6
ratings, counted by hand), run ``b`` none and nothing kept.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from judge.config import Settings
from judge.data.datasets import import_items
from judge.store.engine import make_engine, session_scope
from judge.store.tables import Item, Judgment
from server import usecases
from server.auth import create_key
from tests.support import stores
from tests.support.factories import SAMPLE, make_settings
from tests.support.stub_openai import StubServer

S1_ITEMS = 18
RATERS = ("r1", "r2")


@dataclass(frozen=True)
class TwoRuns:
    """The store, its settings, runs ``a`` and ``b`` (judge and generation run ids) and an
    admin key."""

    engine: Engine
    settings: Settings
    runs: dict[str, int]
    generations: dict[str, int]
    key: str
    url: str


def rating_rows(t: TwoRuns, name: str, raters: tuple[str, ...], items: int) -> list[dict[str, Any]]:
    """Ratings of run ``name``'s first ``items`` judged items by ``raters`` (score 3, then 4
    for the next rater, and so on)."""
    with Session(t.engine) as session:
        found = session.exec(
            select(Item.key, Judgment.rubric)
            .join(Item, col(Item.id) == col(Judgment.item_id))
            .where(col(Judgment.judge_run_id) == t.runs[name])
            .order_by(col(Judgment.id))
            .limit(items)
        ).all()
    return [
        {"item_id": key, "rubric": rubric, "rater": r, "score": 3 + i % 2}
        for key, rubric in found
        for i, r in enumerate(raters)
    ]


def import_ratings(t: TwoRuns, name: str, raters: tuple[str, ...], items: int) -> None:
    """Import ``rating_rows`` into run ``name``'s answers, as ``fairjudge ratings import``."""
    from server.usecases.ratings import import_rating_rows

    rows = rating_rows(t, name, raters, items)
    with Session(t.engine) as session:
        import_rating_rows(session, t.settings, t.generations[name], rows)
        session.commit()


@contextmanager
def two_runs(folder: Path, empty_template: Path, key_name: str) -> Iterator[TwoRuns]:
    """The two runs in ``folder``'s store (a copy of the empty template); the stub keeps
    serving for the block."""
    path = folder / "fairjudge.db"
    stores.copy_store(empty_template, path)
    db_url = f"sqlite:///{path}"
    engine = make_engine(db_url)
    try:
        with StubServer() as stub:
            settings = make_settings(stub.base_url, db_url)
            runs, generations = {}, {}
            for name in ("a", "b"):
                with session_scope(engine) as session:
                    import_items(session, SAMPLE, name)
                gen = usecases.generate(
                    engine, settings, usecases.GenerateRequest(dataset=name, limit=S1_ITEMS)
                )
                generations[name] = gen.run_id
                runs[name] = usecases.judge(
                    engine, settings, usecases.JudgeRequest(generation_run_id=gen.run_id)
                ).run_id
            _, raw = create_key(engine, key_name, "admin")
            made = TwoRuns(engine, settings, runs, generations, raw, db_url)
            import_ratings(made, "a", RATERS, 3)
            yield made
    finally:
        engine.dispose()
