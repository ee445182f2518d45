"""What the Batch API tests share: settings and a config file for an endpoint marked
``batch = true`` with prices, and the stored judgments read back by item key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from judge.config import Settings
from judge.store.tables import Item, Judgment
from tests.support.factories import make_settings

PRICES = {"input_price_per_mtok": 2.0, "output_price_per_mtok": 8.0, "batch_discount": 0.5}
"""Per million tokens; half price through the Batch API."""


def batch_settings(base_url: str, db_url: str, **endpoint: Any) -> Settings:
    """``make_settings`` with the endpoint offering the Batch API, at ``PRICES``."""
    return make_settings(base_url, db_url, **{"batch": True, **PRICES, **endpoint})


def write_batch_config(path: Path, base_url: str, db_url: str) -> Path:
    """A config file for ``tests.support.batch_command``: the stub as the batch judge."""
    path.write_text(f"""
database_url = "{db_url}"
state_dir = "{path.parent / "state"}"
[endpoints.test]
base_url = "{base_url}"
model = "stub-model"
structured_output = "json_object_schema"
concurrency = 4
max_retries = 1
max_backoff_s = 0.1
batch = true
input_price_per_mtok = 2.0
output_price_per_mtok = 8.0
batch_discount = 0.5
[generation]
endpoint = "test"
max_tokens = 32
[judge]
endpoint = "test"
""")
    return path


JudgmentKey = tuple[str, str, int]
"""(item key, rubric, sample index)."""


def judgments_by_key(engine: Engine, run_id: int) -> dict[JudgmentKey, Judgment]:
    """A judge run's judgments by (item key, rubric, sample index)."""
    with Session(engine) as session:
        rows = session.exec(
            select(Judgment, Item).join(Item).where(Judgment.judge_run_id == run_id)  # type: ignore[arg-type]
        ).all()
        session.expunge_all()
    found: dict[JudgmentKey, Judgment] = {}
    for judgment, item in rows:
        key = (item.key, judgment.rubric, judgment.sample_index)
        assert key not in found, f"two judgments for {key}"
        found[key] = judgment
    return found
