"""Judge calls go out rubric by rubric, so consecutive prompts share their opening and a
server that keeps its previous prompt (the embedded llama.cpp server) evaluates only the
texts (see the layout test in test_prompts.py)."""

from __future__ import annotations

import re

from sqlalchemy.engine import Engine

from judge.data.datasets import import_items
from judge.store.engine import session_scope
from server import usecases
from tests.support.factories import SAMPLE, make_settings
from tests.support.stub_openai import StubServer

TASK = re.compile(r"^Task: rate .*? \((\w+)\)", re.M)


def test_judge_requests_go_out_rubric_by_rubric(engine: Engine, db_url: str) -> None:
    with StubServer() as stub:
        # one call at a time, as with the embedded server: requests arrive in planned order
        settings = make_settings(stub.base_url, db_url, concurrency=1)
        with session_scope(engine) as session:
            import_items(session, SAMPLE, "sample")
        gen = usecases.generate(engine, settings, usecases.GenerateRequest(dataset="sample"))
        usecases.judge(engine, settings, usecases.JudgeRequest(generation_run_id=gen.run_id))
        rubrics = [
            found.group(1)
            for body in stub.state.bodies
            if body["messages"][0]["role"] == "system"
            for found in [TASK.search(body["messages"][-1]["content"])]
            if found
        ]
    # The sample has 18 items per stage: ICS judges S1 and S4 (36), TCS, PCS and ETCS each
    # judge S2 (18 each), SBAS judges S3 (18) -- 108 judge calls in all (counted by hand
    # from the paper's stage -> rubric table and the sample's stage counts).
    assert len(rubrics) == 108
    runs = [r for i, r in enumerate(rubrics) if i == 0 or rubrics[i - 1] != r]
    # five rubrics, each called in one unbroken run: the rubric changes four times
    assert sorted(runs) == ["ETCS", "ICS", "PCS", "SBAS", "TCS"]
    assert {r: rubrics.count(r) for r in runs} == {
        "ICS": 36,
        "TCS": 18,
        "PCS": 18,
        "ETCS": 18,
        "SBAS": 18,
    }
