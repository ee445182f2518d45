"""SummEval's expert and crowd ratings (../shared/data/summeval), shared by the rater and the
level tests."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from tests.support.summeval_coherence import SUMMEVAL, require_summeval


def summeval_long(aspect: str) -> pd.DataFrame:
    rows = []
    for path in sorted(SUMMEVAL.glob("*.jsonl")):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            item = f"{record['model_id']}|{record['id']}"
            for i, ann in enumerate(record["expert_annotations"]):
                rows.append((item, record["id"], record["model_id"], f"expert{i}", ann[aspect]))
            turk = np.mean([t[aspect] for t in record["turker_annotations"]])
            rows.append((item, record["id"], record["model_id"], "turkers", turk))
    return pd.DataFrame(rows, columns=["item", "doc", "system", "rater", "score"])


@pytest.fixture(scope="session")
def summeval_coherence() -> tuple[pd.DataFrame, pd.DataFrame]:
    """(all coherence ratings, the expert ratings with 20 % knocked out at random: missing
    ratings are normal)."""
    require_summeval()  # fails under CI=true when the data is missing
    df = summeval_long("coherence")
    experts = df[df.rater != "turkers"].copy()
    rng = np.random.default_rng(0)
    experts = experts[rng.random(len(experts)) > 0.2]
    return df, experts
