"""Fault injection against the scripted stub endpoint: every judgment ends scored or
explicitly unscored with its reason, retries are bounded, and reruns pay only for what is
missing. (The real embedded model cannot produce 500s, 429s or timeouts on demand.)"""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from judge.data.datasets import import_items
from judge.store.engine import session_scope
from judge.store.tables import JudgeRun, Judgment, Response
from server import usecases
from server.usecases import context
from tests.support.factories import make_settings
from tests.support.stub_openai import StubServer

FAULTS = [
    "error_once",
    "rate_limited_once",
    "timeout_always",
    "error_always",
    "garbage_body",
    "prose_always",
    "prose_then_fixed",
    "out_of_range",
    "slow",
]


def fault_items(path: Path) -> Path:
    lines = [
        {
            "id": f"f-{name}",
            "stage": "S1",
            "factor": "gender",
            "scenario": "classroom_management",
            "question": f"Question with #fault:{name} inside?",
            "expected_answer": "No.",
        }
        for name in FAULTS
    ]
    lines.append(
        {
            "id": "plain",
            "stage": "S1",
            "factor": "subject",
            "scenario": "classroom_assessment",
            "question": "A question with no fault?",
            "expected_answer": "No.",
        }
    )
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return path


def judgments(engine: Engine) -> dict[str, Judgment]:
    from judge.store.tables import Item

    with Session(engine) as s:
        rows = s.exec(select(Judgment, Item).join(Item)).all()
        return {item.key: j for j, item in rows}


def test_every_fault_ends_scored_or_unscored_with_reason(
    tmp_path: Path, engine: Engine, db_url: str, stub: StubServer
) -> None:
    settings = make_settings(stub.base_url, db_url, timeout_s=0.5, max_retries=2)
    with session_scope(engine) as session:
        import_items(session, fault_items(tmp_path / "f.jsonl"), "faults")
    gen = usecases.generate(engine, settings, usecases.GenerateRequest(dataset="faults"))
    assert gen.flags == {"ok": 10}
    before = stub.state.requests
    summary = usecases.judge(engine, settings, usecases.JudgeRequest(generation_run_id=gen.run_id))
    rows = judgments(engine)
    # scored: error_once, rate_limited_once, slow, prose_then_fixed, plain; the other 5 unscored
    assert len(rows) == 10 and summary.flags == {"scored": 5, "unscored": 5}

    # Recovered after one retry: the stub's second answer is {"score": 3}.
    assert rows["f-error_once"].score == 3 and rows["f-rate_limited_once"].score == 3
    assert rows["f-slow"].score == 4
    # Fixed by the single repair request; both replies kept.
    fixed = rows["f-prose_then_fixed"]
    assert (fixed.score, fixed.calls, fixed.raw_output) == (2, 2, "Looks fine to me.")
    assert "fixed on repair" in (fixed.repair_output or "")

    def unscored(key: str) -> Judgment:
        row = rows[key]
        assert row.status == "unscored" and row.score is None
        return row

    assert unscored("f-timeout_always").reason.startswith("call failed: APITimeoutError")
    assert unscored("f-error_always").reason.startswith("call failed: HTTP 503")
    # A 200 whose body is not a chat completion: failed, with the body the stub sent
    # (tests.support.stub_openai._garbage_body) in the reason.
    assert unscored("f-garbage_body").reason == (
        "call failed: malformed completion: <html>upstream proxy error</html>"
    )
    prose = unscored("f-prose_always")
    assert prose.reason.startswith("unparsable after one repair")
    # The kind is stored with the row, so nothing downstream reads the reason's wording.
    kinds = {k: r.unscored_kind for k, r in rows.items() if r.status == "unscored"}
    assert kinds == {
        "f-timeout_always": "call_failed",
        "f-error_always": "call_failed",
        "f-garbage_body": "call_failed",
        "f-prose_always": "unparsable",
        "f-out_of_range": "unparsable",
    }
    # Three calls failed for good, so the run is not finished: it says what is missing.
    with Session(engine) as s:
        jrun = s.get(JudgeRun, summary.run_id)
    assert jrun is not None and jrun.status == "incomplete"
    assert jrun.status_detail == (
        "3 of 10 judgments missing (call_failed: 3); run the same judge command again to retry them"
    )
    assert prose.raw_output == prose.repair_output == "I think the answer is quite fair overall."
    # A score outside 1..5 is never clipped into range.
    oor = unscored("f-out_of_range")
    assert "score 10 is outside the 1-5 scale" in oor.reason and '"score": 10' in oor.raw_output

    # Bounded retries: max_retries=2 means at most 3 HTTP requests per logical call.
    times = stub.state.times
    per_key = {k: len(v) for k, v in times.items() if k.startswith("judge:")}
    assert max(per_key.values()) == 3
    assert per_key[next(k for k in per_key if ":timeout_always:" in k)] == 3
    assert per_key[next(k for k in per_key if ":error_always:" in k)] == 3
    # garbage_body is a 200 with HTML: not retried, the body is not a completion
    assert per_key[next(k for k in per_key if ":garbage_body:" in k)] == 1
    # Retry-After: 0.3 was honoured between the 429 and the retry.
    limited = times[next(k for k in per_key if ":rate_limited_once:" in k)]
    assert limited[1] - limited[0] >= 0.29
    # 10 first calls + 2 repairs (prose_*) + 1 repair (out_of_range) + retries:
    # error_once +1, rate_limited_once +1, timeout_always +2, error_always +2.
    assert stub.state.requests - before == 10 + 3 + 1 + 1 + 2 + 2

    # A rerun retries only the failed calls (3 items) and pays nothing for the rest.
    again = usecases.judge(engine, settings, usecases.JudgeRequest(generation_run_id=gen.run_id))
    assert again.tasks == 3 and again.model_calls == 3 and again.cached == 0
    assert len(judgments(engine)) == 10
    with Session(engine) as s:
        still = s.get(JudgeRun, summary.run_id)
    assert still is not None and still.status == "incomplete"  # those calls fail every time


def test_rerun_pays_nothing_and_new_samples_reuse_the_first(
    tmp_path: Path, engine: Engine, db_url: str, stub: StubServer
) -> None:
    from tests.support.factories import SAMPLE

    settings = make_settings(stub.base_url, db_url)
    with session_scope(engine) as session:
        import_items(session, SAMPLE, "sample")
    gen = usecases.generate(engine, settings, usecases.GenerateRequest(dataset="sample", limit=12))
    first = usecases.judge(engine, settings, usecases.JudgeRequest(generation_run_id=gen.run_id))
    # The first 12 sample items are S1 items: 12 answers, 12 ICS judgments.
    assert (gen.tasks, first.tasks, first.model_calls) == (12, 12, 12)
    requests = stub.state.requests
    assert (
        usecases.generate(
            engine, settings, usecases.GenerateRequest(dataset="sample", limit=12)
        ).tasks
        == 0
    )
    assert (
        usecases.judge(
            engine, settings, usecases.JudgeRequest(generation_run_id=gen.run_id)
        ).model_calls
        == 0
    )
    assert stub.state.requests == requests

    # A forced new generation run with identical settings is served from the cache.
    fresh = usecases.generate(
        engine, settings, usecases.GenerateRequest(dataset="sample", limit=12, new=True)
    )
    assert fresh.run_id != gen.run_id and (fresh.cached, fresh.model_calls) == (12, 0)

    # samples=3 is a new judge run; sample 0 has the same cache key as before.
    three = settings.model_copy(update={"judge": settings.judge.model_copy(update={"samples": 3})})
    summary = usecases.judge(engine, three, usecases.JudgeRequest(generation_run_id=gen.run_id))
    assert (summary.tasks, summary.cached, summary.model_calls) == (36, 12, 24)
    with Session(engine) as s:
        kept = s.exec(select(Response).where(Response.run_id == gen.run_id)).all()
    assert all(r.prompt_tokens == 10 and r.completion_tokens == 5 for r in kept)


def test_model_name_mismatch_is_refused(db_url: str, stub: StubServer) -> None:
    import pytest

    from judge.errors import EndpointError

    settings = make_settings(stub.base_url, db_url, model="gpt-imaginary")
    with pytest.raises(EndpointError, match="serves stub-model, not 'gpt-imaginary'"):
        context.make_client(settings, "test")


def test_unreachable_endpoint_names_the_url(db_url: str) -> None:
    import pytest

    from judge.errors import EndpointError
    from tests.support.factories import free_port

    url = f"http://127.0.0.1:{free_port()}/v1"
    settings = make_settings(url, db_url)
    with pytest.raises(EndpointError, match=f"cannot reach endpoint 'test' at {url}"):
        context.make_client(settings, "test")


def test_one_client_per_endpoint_settings_yet_the_model_checked_each_time(
    db_url: str, stub: StubServer
) -> None:
    """``make_client`` keeps one client per process for the same endpoint settings (building
    one costs about 50 ms of CPU, which a Celery worker paid for every part of a run), yet
    asks the endpoint for its models every time: a server restarted with another model is
    still refused. Other endpoint settings get a client of their own."""
    import pytest

    from judge.errors import EndpointError

    settings = make_settings(stub.base_url, db_url)
    first = context.make_client(settings, "test")
    assert context.make_client(settings, "test") is first
    endpoint = settings.endpoints["test"].model_copy(update={"timeout_s": 7.0})
    other = settings.model_copy(update={"endpoints": {**settings.endpoints, "test": endpoint}})
    second = context.make_client(other, "test")
    assert second is not first and second.config.timeout_s == 7.0
    stub.state.model = "another-model"
    with pytest.raises(EndpointError, match="serves another-model, not 'stub-model'"):
        context.make_client(settings, "test")
