"""``GET /api/v1/juries?runs=...`` through Flask's test client on a real SQLite store holding
planted judge runs (tests/support/planted_judge.py). Expected agreement values are scipy's on
the planted lists; every reply is read back through ``JuryOut``, which forbids fields it does
not declare; bad juries are a 400 in the one error shape, a bad query a 422."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from sqlmodel import Session

from judge.store.engine import make_engine
from server.schemas.juries import JuryOut
from tests.server.api.test_api import Api, make_api
from tests.support.planted_judge import add_judge_run, plant
from tests.support.stub_openai import StubServer

N = 90


@pytest.fixture
def api(migrated_db_url: str, tmp_path: Path) -> Iterator[tuple[Api, list[int], dict[str, list]]]:
    """The app and three judge runs of the same answers: a good judge and two noisy ones
    (noise sd 0.3 and 2.0 around the raters' mean), plus one run of other answers."""
    rng = np.random.default_rng(0)
    truth = rng.integers(1, 6, N)
    raters = {f"r{k}": np.clip(truth + rng.integers(-1, 2, N), 1, 5).tolist() for k in range(3)}
    human = np.mean(list(raters.values()), axis=0)
    judges = [np.clip(np.round(human + rng.normal(0, sd, N)), 1, 5).tolist()
              for sd in (0.3, 2.0, 2.0)]  # fmt: skip
    with StubServer() as stub:
        made = make_api(migrated_db_url, stub, tmp_path)
        engine = make_engine(migrated_db_url)
        try:
            with Session(engine) as session:
                first = plant(session, judges[0], raters, model="good")
                runs = [first.judge_run_id]
                for k, scores in enumerate(judges[1:]):
                    runs.append(add_judge_run(session, first.generation_run_id, first.item_ids,
                                              scores, model=f"noisy{k}").judge_run_id)  # fmt: skip
                runs.append(plant(session, judges[0], raters, name="other").judge_run_id)
        finally:
            engine.dispose()
        yield made, runs, {"human": human.tolist(), "judges": judges}
        made.close()


def test_the_jury_and_each_judge_against_people(
    api: tuple[Api, list[int], dict[str, list]],
) -> None:
    client, runs, planted = api
    reply = client.get(f"/api/v1/juries?runs={runs[0]},{runs[1]},{runs[2]}&n_bootstrap=300")
    assert reply.status_code == 200, reply.json
    body = JuryOut.model_validate(reply.json).model_dump(mode="json")
    assert body == reply.json  # nothing undeclared, nothing missing
    ics = body["rubrics"]["ICS"]
    human = planted["human"]
    for member, scores in zip(ics["judges"], planted["judges"], strict=True):
        rho = stats.spearmanr(scores, human).statistic
        assert member["coefficients"]["spearman"]["value"] == pytest.approx(rho, abs=1e-10)
    mean = np.mean(planted["judges"], axis=0)
    jury_rho = stats.spearmanr(mean, human).statistic
    assert ics["jury"]["coefficients"]["spearman"]["value"] == pytest.approx(jury_rho, abs=1e-10)
    # Noise sd sqrt(0.09 + 8) / 3 = 0.95 for the mean against 0.3 for the good judge.
    assert ics["versus_best"]["verdict"] == "worse"
    assert ics["versus_best"]["best_judge_run"] == runs[0]
    learnt = client.get(f"/api/v1/juries?runs={runs[0]},{runs[1]},{runs[2]}&combine=learnt"
                        "&n_bootstrap=0&folds=3")  # fmt: skip
    assert learnt.status_code == 200, learnt.json
    weights = JuryOut.model_validate(learnt.json).rubrics["ICS"].weights
    assert weights is not None and all(w[str(runs[0])] > 0.6 for w in weights.per_fold)


def test_bad_juries_are_400_and_bad_queries_422(
    api: tuple[Api, list[int], dict[str, list]],
) -> None:
    client, runs, _ = api
    for query, says in (
        (f"runs={runs[0]}", "a jury needs two judge runs or more"),
        (f"runs={runs[0]},{runs[3]}", "judged different answers"),
    ):
        reply = client.get(f"/api/v1/juries?{query}")
        assert reply.status_code == 400, reply.json
        assert set(reply.json) == {"error"} and says in reply.json["error"]["message"]
    assert client.get(f"/api/v1/juries?runs={runs[0]},99999").status_code == 404
    # An id past the largest a row can have matches the document and names no run: a 404.
    assert client.get("/api/v1/juries?runs=1,9999999999").status_code == 404
    for query in ("", "runs=1,x", "runs=1,2&combine=vote", "runs=0,1", "runs=1,99999999999"):
        assert client.get(f"/api/v1/juries?{query}").status_code == 422, query
