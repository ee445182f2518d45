"""Revision 0011: ratings get their scope; rows, ids and rating history survive the table copy
SQLite needs (with foreign keys enforced, as FairJudge's engine runs it), and the new key lets
two campaigns hold the same person's rating of the same item."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command

from judge.store.engine import alembic_config

WHEN = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def _engine(path: Path) -> sa.Engine:
    engine = sa.create_engine(f"sqlite:///{path}")

    @sa.event.listens_for(engine, "connect")
    def _fk(dbapi: Any, _record: Any) -> None:
        dbapi.execute("PRAGMA foreign_keys=ON")

    return engine


def test_0011_scopes_existing_ratings_and_keeps_their_history(tmp_path: Path) -> None:
    engine = _engine(tmp_path / "old.db")
    with engine.begin() as conn:
        command.upgrade(alembic_config(conn), "0010")
        old = sa.MetaData()
        old.reflect(conn)
        t = old.tables
        conn.execute(t["dataset"].insert(), [{"id": 1, "name": "d", "description": "",
                                              "created_at": WHEN}])  # fmt: skip
        conn.execute(
            t["item"].insert(),
            [{"id": 1, "dataset_id": 1, "key": "k1", "stage": "S1", "factor": "gender",
              "scenario": "s", "fields": {}, "content_hash": "h"}],
        )  # fmt: skip
        run = {c.name: None for c in t["generationrun"].c}
        run.update(id=1, dataset_id=1, model="m", created_at=WHEN)
        for c in t["generationrun"].c:  # fill the other required columns with plain values
            if run[c.name] is None and not c.nullable:
                run[c.name] = 0 if isinstance(c.type, sa.Integer | sa.Float) else "x"
        conn.execute(t["generationrun"].insert(), [run])
        base = {"generation_run_id": 1, "item_id": 1, "rubric": "ICS", "created_at": WHEN}
        conn.execute(
            t["humanrating"].insert(),
            [
                {**base, "id": 1, "rater": "a", "score": 3, "source": "labelstudio",
                 "campaign_id": 7},
                {**base, "id": 2, "rater": "b", "score": 4, "source": "import",
                 "campaign_id": None},
            ],
        )  # fmt: skip
        conn.execute(
            t["ratingchange"].insert(),
            [{"id": 1, "rating_id": 1, "change": "edited", "score": 2, "valid_until": WHEN}],
        )
    with engine.begin() as conn:
        command.upgrade(alembic_config(conn), "0011")
    with engine.begin() as conn:
        rows = conn.execute(
            sa.text("SELECT id, rater, score, campaign_id, scope FROM humanrating ORDER BY id")
        ).all()
        # By hand from the rule in 0011: a campaign's rating gets campaign:<id>, an imported
        # one the default import batch.
        assert [tuple(r) for r in rows] == [
            (1, "a", 3.0, 7, "campaign:7"),
            (2, "b", 4.0, None, "import:default"),
        ]
        assert conn.execute(sa.text("SELECT rating_id FROM ratingchange")).scalar() == 1
        assert conn.execute(sa.text("PRAGMA foreign_key_check")).all() == []
        # The same person, item and rubric in a second campaign: allowed now; twice in one
        # scope: refused.
        insert = sa.text(
            "INSERT INTO humanrating (generation_run_id, item_id, rubric, rater, score, source,"
            " created_at, campaign_id, scope) VALUES (1, 1, 'ICS', 'a', 5, 'labelstudio',"
            " :when, :cid, :scope)"
        )
        conn.execute(insert, {"when": WHEN, "cid": 8, "scope": "campaign:8"})
        with pytest.raises(sa.exc.IntegrityError), conn.begin_nested():
            conn.execute(insert, {"when": WHEN, "cid": 8, "scope": "campaign:8"})
    # Downgrading cannot keep both of a's ratings under the old key: refused, nothing lost.
    with pytest.raises(RuntimeError, match="several campaigns"), engine.begin() as conn:
        command.downgrade(alembic_config(conn), "0010")
    with engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM humanrating WHERE scope = 'campaign:8'"))
    with engine.begin() as conn:
        command.downgrade(alembic_config(conn), "0010")
    columns = {c["name"] for c in sa.inspect(engine).get_columns("humanrating")}
    assert "scope" not in columns
    with engine.begin() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM humanrating")).scalar() == 2
        assert conn.execute(sa.text("SELECT rating_id FROM ratingchange")).scalar() == 1
    engine.dispose()
