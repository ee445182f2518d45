"""``GET /api/v1/pairwise/position`` and ``POST /api/v1/pairwise/judgments`` through Flask's
test client on a real SQLite store, on a hand-worked file of one judge, three models and two
questions; each reply is read back through its response model."""

from __future__ import annotations

from pathlib import Path

from judge.store.engine import make_engine
from server.schemas import PairwiseImportOut, PairwisePositionOut
from server.usecases.pairwise import import_judgments
from tests.server.api.test_api import make_api
from tests.support.stub_openai import StubServer

# question, shown first, shown second, verdict; worked by hand below
ROWS = [
    ("q1", "x", "y", "A"), ("q1", "y", "x", "B"),  # x both times: consistent, x wins
    ("q1", "x", "z", "A"), ("q1", "z", "x", "A"),  # first shown both times: primacy
    ("q1", "y", "z", "tie"), ("q1", "z", "y", "tie"),  # consistent tie
    ("q2", "x", "y", "B"), ("q2", "y", "x", "A"),  # y both times: consistent, y wins
    ("q2", "x", "z", "A"), ("q2", "z", "x", "B"),  # x both times
    ("q2", "y", "z", "B"), ("q2", "z", "y", "unreadable"),  # no outcome
]  # fmt: skip


def test_position_over_http(migrated_db_url: str, tmp_path: Path) -> None:
    path = tmp_path / "mine.csv"
    lines = ["question,model_a,model_b,verdict"] + [",".join(r) for r in ROWS]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    engine = make_engine(migrated_db_url)
    try:
        import_judgments(engine, path, "csv", judge="j")
    finally:
        engine.dispose()
    with StubServer() as stub:
        api = make_api(migrated_db_url, stub, tmp_path)
        try:
            reply = api.get("/api/v1/pairwise/position?bootstrap=100&n_bootstrap=200")
            assert reply.status_code == 422  # "bootstrap" is the CLI's name, not a field
            reply = api.get("/api/v1/pairwise/position?n_bootstrap=200")
            assert reply.status_code == 200, reply.json
            body = PairwisePositionOut.model_validate(reply.json).model_dump(mode="json")
            assert body == reply.json
            (j,) = body["judges"]
            # 6 pairs, 5 readable, 4 consistent: PC 4/5; 1 primacy: PF -1/6 over all 6
            assert (j["pairs"], j["readable_pairs"], j["consistent"]) == (6, 5, 4)
            assert j["position_consistency"] == 0.8
            assert abs(j["preference_fairness"] - (-1 / 6)) < 1e-12
            rates = {(r["model"], r["other"]): r for r in j["win_rates"]}
            # x-z: x wins q2, q1 is inconsistent and counted as a tie (the default)
            xz = rates[("x", "z")]
            assert (xz["pairs"], xz["wins"], xz["ties"], xz["inconsistent"]) == (2, 1, 1, 1)
            yz = rates[("y", "z")]
            assert (yz["pairs"], yz["ties"], yz["unreadable"]) == (1, 1, 1)
            apart = api.get("/api/v1/pairwise/position?inconsistent=apart&n_bootstrap=200")
            xz = {(r["model"], r["other"]): r for r in apart.json["judges"][0]["win_rates"]}
            assert (xz[("x", "z")]["pairs"], xz[("x", "z")]["ties"]) == (1, 0)
            missing = api.get("/api/v1/pairwise/position?judge=nobody")
            assert missing.status_code == 404
            assert "no pairwise judgments of judge 'nobody'" in missing.json["error"]["message"]
        finally:
            api.close()


def test_import_over_http_refuses_a_bad_text_whole(migrated_db_url: str, tmp_path: Path) -> None:
    text = "question,model_a,model_b,verdict\n" + "\n".join(",".join(r) for r in ROWS) + "\n"
    with StubServer() as stub:
        api = make_api(migrated_db_url, stub, tmp_path)
        try:
            # line 14: not a verdict; line 15: its other order is missing
            bad = text + "q9,x,y,maybe\nq10,x,y,A\n"
            reply = api.post(
                "/api/v1/pairwise/judgments", json={"format": "csv", "text": bad, "judge": "j"}
            )
            assert reply.status_code == 400, reply.json
            error = reply.json["error"]
            assert "2 problem(s); nothing was stored" in error["message"]
            assert any("line 14: verdict 'maybe'" in p for p in error["problems"])
            assert any("line 15: judge 'j', question 'q10'" in p for p in error["problems"])
            assert api.get("/api/v1/pairwise/position").status_code == 404  # nothing stored
            body = {"format": "csv", "text": text, "judge": "j", "models": ["x", "y", "z"]}
            done = api.post("/api/v1/pairwise/judgments", json=body)
            assert done.status_code == 201, done.json
            summary = PairwiseImportOut.model_validate(done.json).model_dump(mode="json")
            assert summary == done.json
            assert (summary["records"], summary["judges"], summary["unreadable"]) == (12, ["j"], 1)
            again = api.post("/api/v1/pairwise/judgments", json=body)
            assert again.status_code == 400
            (problem,) = again.json["error"]["problems"]
            assert "12 of the file's judgments are already stored by import 1" in problem
            shown = api.get("/api/v1/pairwise/position?n_bootstrap=200")
            assert shown.json["judges"][0]["position_consistency"] == 0.8
        finally:
            api.close()
