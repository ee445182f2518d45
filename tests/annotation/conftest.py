"""Fixtures shared by the annotation tests."""

from __future__ import annotations

import pytest
from sqlalchemy.engine import Engine

from tests.support import stores


@pytest.fixture
def judged(engine: Engine, judged_s1_template: stores.Judged) -> tuple[int, int]:
    """The 18 S1 sample items answered and judged (ICS) through the stub endpoint (a copy of
    the session's template, tests/support/stores.py); the ids of the generation run and the
    judge run."""
    stores.restore(judged_s1_template.path, engine)
    return judged_s1_template.generation_run_id, judged_s1_template.judge_run_id
