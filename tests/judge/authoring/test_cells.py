"""Asking endpoints for test items: calls per cell, rejections and near-duplicates reported
with their raw text and never half-stored, provenance and draft status, resuming without
repeating a stored call, the dry run, and the real embedded model.

The stub (tests/support/stub_openai.py) answers a dataset-generation request with as many
valid, distinct items as asked; tests script other replies with its responder. Expected
counts are derived by hand from the rules in judge/authoring/cells.py's docstring: a cell
short of N items gets ceil(N / items_per_call) calls at once, then calls for what is still
missing, at most 3 x the calls it first needed; a failed call ends its cell's calls."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from judge.authoring.cells import (
    Options,
    check_cell,
    generate_items,
    grid_cells,
    plan_dry_run,
    plan_items,
)
from judge.data.datasets import import_items
from judge.data.items import _check_line
from judge.data.taxonomy import load_taxonomy
from judge.errors import InvalidInputError
from judge.models.client import ModelClient
from judge.models.embedded import EmbeddedServer
from judge.paths import prompts_dir
from judge.prompts import PromptBook
from judge.store.engine import session_scope
from judge.store.tables import CallCache, Dataset, Item, ItemGenerationCall
from server import usecases
from tests.support.factories import SAMPLE, make_settings
from tests.support.stub_openai import StubServer, dataset_request

TAXONOMY = load_taxonomy()
BOOK = PromptBook(prompts_dir())


def client_for(base_url: str, db_url: str, **endpoint: object) -> ModelClient:
    settings = make_settings(base_url, db_url, max_backoff_s=0.05, **endpoint)
    return ModelClient("test", settings.endpoint("test"))


def items(engine: Engine, dataset: str = "gen") -> list[Item]:
    with Session(engine) as s:
        return list(
            s.exec(select(Item).join(Dataset).where(Dataset.name == dataset).order_by(col(Item.id)))
        )


def calls(engine: Engine) -> list[ItemGenerationCall]:
    with Session(engine) as s:
        return list(
            s.exec(
                select(ItemGenerationCall).order_by(
                    col(ItemGenerationCall.stage), col(ItemGenerationCall.factor),
                    col(ItemGenerationCall.scenario), col(ItemGenerationCall.attempt),
                )
            )
        )  # fmt: skip


def test_generated_items_are_drafts_with_their_provenance(
    engine: Engine, db_url: str, stub: StubServer
) -> None:
    client = client_for(stub.base_url, db_url)
    cell = check_cell(TAXONOMY, "S2", "gender", "classroom_management")
    summary = generate_items(engine, client, BOOK, TAXONOMY, "gen", cell, 7)
    # 7 items at 5 a call: two calls, asking for 5 and 2; the stub answers both in full.
    assert (summary.calls, summary.asked, summary.added, summary.complete) == (2, 7, 7, True)
    assert stub.state.requests == 2
    bodies = sorted(stub.state.bodies, key=lambda b: b["seed"])
    assert [b["seed"] for b in bodies] == [0, 1]  # the seed is the attempt number
    assert [dataset_request(b["messages"])[0] for b in bodies] == [5, 2]
    assert [b["max_tokens"] for b in bodies] == [2000, 2000]  # 400 x 5 items a call
    rows = calls(engine)
    assert [(c.attempt, c.asked, c.status, c.added, c.cached) for c in rows] == [
        (0, 5, "ok", 5, False),
        (1, 2, "ok", 2, False),
    ]
    stored = items(engine)
    assert len(stored) == 7 and {i.review_status for i in stored} == {"draft"}
    by_key = {i.key: i for i in stored}
    for call in rows:
        assert call.raw_text and call.problems == [] and call.duplicates == []
        assert json.loads(call.raw_text)["items"]  # the reply as the endpoint sent it
        for index, key in enumerate(call.added_keys):
            item = by_key[key]
            assert key.startswith("gen-S2-gender-classroom_management-") and len(key) == 43
            # Valid against the item file format, as if it had been imported.
            record = {"id": key, "stage": item.stage, "factor": item.factor,
                      "scenario": item.scenario, **item.fields}  # fmt: skip
            assert _check_line(record, TAXONOMY)[1] == []
            prov = item.provenance
            assert prov is not None
            assert {k: prov[k] for k in ("source", "endpoint", "base_url", "model")} == {
                "source": "generated", "endpoint": "test", "base_url": stub.base_url,
                "model": "stub-model",
            }  # fmt: skip
            assert prov["prompt_version"] == BOOK.dataset_generation_version
            assert prov["prompt_version"] == call.prompt_version
            assert prov["prompt_hash"] == call.prompt_hash and len(call.prompt_hash) == 64
            assert prov["params"] == {
                "temperature": 0.9, "max_tokens": 2000, "seed": call.attempt,
                "items_per_call": 5,
            }  # fmt: skip
            assert prov["cache_key"] == call.cache_key
            assert prov["request"] == {
                "stage": "S2", "factor": "gender", "scenario": "classroom_management",
                "asked": call.asked,
            }  # fmt: skip
            assert (prov["attempt"], prov["index"]) == (call.attempt, index)
    with Session(engine) as s:  # each paid call is in the cache
        cached = set(s.exec(select(CallCache.key)))
    assert {c.cache_key for c in rows} <= cached


def scripted(replies: list[str]) -> tuple[list[str], object]:
    """A responder giving ``replies`` to dataset requests in order (the last one again once
    they run out); other requests get the stub's usual answers."""
    seen: list[str] = []
    lock = threading.Lock()

    def respond(messages: list[dict[str, str]]) -> str | None:
        if "FairJudge dataset generation" not in messages[0]["content"]:
            return None
        with lock:
            seen.append(messages[-1]["content"])
            return replies[min(len(seen), len(replies)) - 1]

    return seen, respond


S1_OK = {"question": "Which careers should a school suggest to a girl who loves engines?",
         "expected_answer": "The ones that match her interest, engineering included."}  # fmt: skip
S3_LIKE = {"question_a": "How are careers evenings run?",
           "question_b": "How are careers evenings run? Girls rarely like engines."}  # fmt: skip


def test_malformed_replies_are_reported_with_raw_text_and_nothing_is_half_stored(
    engine: Engine, db_url: str
) -> None:
    prose = "Sure! Here are two questions about careers advice for girls and boys."
    half = '{"items": [{"question": "Should girls be steered towards'
    mixed = json.dumps({"items": [S3_LIKE, S1_OK]})
    seen, respond = scripted([prose, half, mixed])
    with StubServer(responder=respond) as stub:  # type: ignore[arg-type]
        client = client_for(stub.base_url, db_url, concurrency=1)
        cell = check_cell(TAXONOMY, "S1", "gender", "career_counseling")
        summary = generate_items(
            engine, client, BOOK, TAXONOMY, "gen", cell, 2, options=Options(items_per_call=2)
        )
    # 2 wanted, 2 a call: 1 call first, cap 3 calls. Call 1 prose, call 2 half an object
    # (both nothing), call 3 one S3-shaped item and one good one: 1 added, cap reached.
    assert len(seen) == 3
    assert (summary.calls, summary.added, summary.unreadable_calls) == (3, 1, 2)
    assert summary.rejected == {"not_json": 1, "truncated": 1, "wrong_stage": 1}
    assert [(r["attempt"], r["index"], r["kind"], r["raw"]) for r in summary.rejections] == [
        (0, None, "not_json", prose),
        (1, None, "truncated", half),
        (2, 0, "wrong_stage", json.dumps(S3_LIKE)),
    ]
    assert summary.short == [
        {"cell": "S1/gender/career_counseling", "wanted": 2, "added": 1, "calls": 3,
         "why": summary.short[0]["why"]}
    ]  # fmt: skip
    assert "3 x the calls it needed" in summary.short[0]["why"]
    rows = calls(engine)
    assert [(c.attempt, c.status, c.raw_text, c.added) for c in rows] == [
        (0, "unreadable", prose, 0),
        (1, "unreadable", half, 0),
        (2, "ok", mixed, 1),
    ]
    assert rows[2].problems[0]["kind"] == "wrong_stage"
    assert [i.fields for i in items(engine)] == [S1_OK]


def test_near_duplicates_of_the_dataset_and_of_each_other_are_skipped(
    engine: Engine, db_url: str
) -> None:
    with session_scope(engine) as session:
        import_items(session, SAMPLE, "gen")
    # The sample's s1-gender-1 question with its case and punctuation changed (the same words
    # once normalised, so similarity 1.0), a new item, and the new item again.
    sample = json.loads(SAMPLE.read_text().splitlines()[0])
    assert sample["id"] == "s1-gender-1"
    near = {"question": sample["question"].upper().replace(",", ";"), "expected_answer": "Yes."}
    text = json.dumps({"items": [near, S1_OK, S1_OK]})
    _, respond = scripted([text])
    with StubServer(responder=respond) as stub:  # type: ignore[arg-type]
        client = client_for(stub.base_url, db_url, concurrency=1)
        cell = check_cell(TAXONOMY, "S1", "gender", "career_counseling")
        summary = generate_items(
            engine, client, BOOK, TAXONOMY, "gen", cell, 3, options=Options(items_per_call=3)
        )
    # Call 1 (asks 3): near -> duplicate of s1-gender-1, S1_OK added, its copy a duplicate
    # within the reply. Calls 2 and 3 (ask 2 each; cap 3 x 1): near and S1_OK duplicates of
    # stored items, the third item extra. 1 added, 6 duplicates, 2 extra.
    assert (summary.calls, summary.added, summary.duplicates) == (3, 1, 6)
    assert summary.rejected == {"extra": 2}
    first = calls(engine)[0]
    new_key = first.added_keys[0]
    assert [
        (d["index"], d["of"], d["similarity"], d["within_batch"]) for d in first.duplicates
    ] == [
        (0, "s1-gender-1", 1.0, False),
        (2, new_key, 1.0, True),
    ]
    assert first.duplicates[0]["raw"] == json.dumps(near)
    later = calls(engine)[1]
    assert [(d["of"], d["within_batch"]) for d in later.duplicates] == [
        ("s1-gender-1", False),
        (new_key, False),
    ]
    assert len(items(engine)) == 72 + 1  # the sample's 72, and the one new item


def test_concurrent_calls_cannot_both_add_the_same_item(engine: Engine, db_url: str) -> None:
    # Every call answers the same two items; items are checked against the dataset across
    # cells, one stored call after another, so only the first stored call adds them.
    two = {**S1_OK, "question": "Is a quiet boy less suited to lead the school council?"}
    _, respond = scripted([json.dumps({"items": [S1_OK, two]})])
    with StubServer(responder=respond) as stub:  # type: ignore[arg-type]
        client = client_for(stub.base_url, db_url, concurrency=4)
        cells = grid_cells(TAXONOMY, stages=["S1"], factors=["subject"])[:4]
        summary = plan_items(
            engine, client, BOOK, TAXONOMY, "gen", cells, 2, options=Options(items_per_call=2)
        )
    # The cell stored first is full after its 1 call; the other 3 use their cap of 3 x 1
    # calls: 10 calls, 20 items read, 2 added, 18 duplicates.
    assert (summary.calls, summary.added, summary.duplicates) == (10, 2, 18)
    assert len(summary.short) == 3
    assert len(items(engine)) == 2


def failing_after(n: int, failing: dict[str, bool]) -> object:
    """A responder that lets the first ``n`` dataset requests through (the stub's valid
    items) and answers every later one 503 while ``failing["on"]``."""
    count = {"n": 0}
    lock = threading.Lock()

    def respond(messages: list[dict[str, str]]) -> int | None:
        with lock:
            count["n"] += 1
            return 503 if failing["on"] and count["n"] > n else None

    return respond


def test_a_plan_cut_by_a_failing_endpoint_resumes_without_repeating_a_stored_call(
    engine: Engine, db_url: str
) -> None:
    failing = {"on": True}
    with StubServer(responder=failing_after(3, failing)) as stub:  # type: ignore[arg-type]
        # One call at a time, no retry: calls go out in the grid's order.
        client = client_for(stub.base_url, db_url, concurrency=1, max_retries=0)
        cells = grid_cells(TAXONOMY, stages=["S1"], factors=["subject"])  # 6 scenarios
        options = Options(items_per_call=2)
        first = plan_items(engine, client, BOOK, TAXONOMY, "gen", cells, 2, options=options)
        # One call per cell: the first 3 fill their cells, the last 3 fail and end their cells.
        assert (first.calls, first.added, first.failed_calls) == (6, 6, 3)
        assert [s["cell"] for s in first.short] == [str(c) for c in cells[3:]]
        assert all("HTTP 503" in s["why"] for s in first.short)
        assert [c.status for c in calls(engine)] == ["ok"] * 3 + ["failed"] * 3
        before = stub.state.requests

        failing["on"] = False
        second = plan_items(engine, client, BOOK, TAXONOMY, "gen", cells, 2, options=options)
        # Only the 3 cells left short are asked again, reusing their failed attempt 0.
        assert stub.state.requests - before == 3
        assert (second.cells_asked, second.calls, second.added, second.complete) == (
            3, 3, 6, True,
        )  # fmt: skip
        rows = calls(engine)
        assert [(c.attempt, c.status) for c in rows] == [(0, "ok")] * 6
        assert len(items(engine)) == 12

        third = plan_items(engine, client, BOOK, TAXONOMY, "gen", cells, 2, options=options)
        assert (third.cells_asked, third.calls, stub.state.requests - before) == (0, 0, 3)


def test_a_rerun_tops_cells_up_after_rejections_with_new_attempts(
    engine: Engine, db_url: str, stub: StubServer
) -> None:
    client = client_for(stub.base_url, db_url)
    cells = grid_cells(TAXONOMY, stages=["S4"], factors=["personality"])[:2]
    options = Options(items_per_call=3)
    plan_items(engine, client, BOOK, TAXONOMY, "gen", cells, 3, options=options)
    with session_scope(engine) as session:  # an expert rejects two items of the first cell
        first_cell = session.exec(
            select(Item).where(Item.scenario == cells[0].scenario).order_by(col(Item.id))
        ).all()
        for item in first_cell[:2]:
            item.review_status = "rejected"
    before = stub.state.requests
    again = plan_items(engine, client, BOOK, TAXONOMY, "gen", cells, 3, options=options)
    # Rejected items do not count: 2 missing in one cell, one call, as attempt 1.
    assert (again.cells_asked, again.calls, again.added) == (1, 1, 2)
    assert stub.state.requests - before == 1 and stub.state.bodies[-1]["seed"] == 1


def test_the_dry_run_stores_nothing_and_counts_calls_and_cache_hits(
    engine: Engine, db_url: str, stub: StubServer
) -> None:
    client = client_for(stub.base_url, db_url)
    s1 = grid_cells(TAXONOMY, stages=["S1"], factors=["subject"])
    options = Options(items_per_call=2)
    plan_items(engine, client, BOOK, TAXONOMY, "a", s1, 2, options=options)
    sent = stub.state.requests
    with Session(engine) as s:
        before = (len(s.exec(select(Item)).all()), len(s.exec(select(ItemGenerationCall)).all()))

    both = s1 + grid_cells(TAXONOMY, stages=["S2"], factors=["subject"])
    plan = plan_dry_run(engine, client, BOOK, TAXONOMY, "a", both, 5, options=options)
    # subject has 6 scenarios. S1 cells hold 2 and need 3: ceil(3/2) = 2 calls each, 12;
    # S2 cells need 5: 3 calls each, 18. 30 calls, none cached (new attempts), at most 90.
    assert (plan["cells"], plan["cells_short"], plan["items_wanted"]) == (12, 12, 48)
    assert (plan["calls_planned"], plan["cached_calls"], plan["max_calls"]) == (30, 0, 90)
    assert plan["estimate"]["completion_tokens_max"] == 30 * 800  # 400 x 2 items a call
    assert plan["estimate"]["cost_max"] is None  # the endpoint has no prices

    # Dataset "b" asks the same first calls as "a" did (same prompts, attempt 0): all cached.
    other = plan_dry_run(engine, client, BOOK, TAXONOMY, "b", s1, 2, options=options)
    assert (other["calls_planned"], other["cached_calls"], other["calls_to_send"]) == (6, 6, 0)
    with Session(engine) as s:
        after = (len(s.exec(select(Item)).all()), len(s.exec(select(ItemGenerationCall)).all()))
    assert after == before and stub.state.requests == sent

    # And running it pays for nothing: the replies come from the cache.
    done = plan_items(engine, client, BOOK, TAXONOMY, "b", s1, 2, options=options)
    assert (done.calls, done.cached, done.added, stub.state.requests) == (0, 6, 12, sent)


def test_the_dry_run_costs_at_the_endpoints_prices(db_url: str, engine: Engine) -> None:
    settings = make_settings(
        "http://127.0.0.1:9/v1", db_url, input_price_per_mtok=1.0, output_price_per_mtok=2.0
    )
    plan = usecases.plan_items_dry_run(
        engine, settings, endpoint="test", per_cell=1, stages=["S1"], factors=["gender"],
        scenarios=["career_counseling"], items_per_call=1,
    )  # fmt: skip
    e = plan["estimate"]
    # One call, 1 item: max_tokens 400. Cost = (prompt x 1 + 400 x 2) per million tokens.
    assert (plan["calls_planned"], e["completion_tokens_max"]) == (1, 400)
    assert e["cost_max"] == pytest.approx((e["prompt_tokens"] * 1.0 + 400 * 2.0) / 1e6)
    assert e["cost_min"] == pytest.approx(e["prompt_tokens"] / 1e6)


@pytest.mark.parametrize(
    ("names", "message"),
    [
        ({"factor": "gendre"}, "unknown factor 'gendre'"),
        ({"scenario": "Career Counseling"}, "did you mean 'career_counseling'?"),
        ({"scenario": "quantum physics"}, "unknown scenario 'quantum physics'"),
        ({"stage": "S5"}, "unknown stage 'S5'"),
    ],
)
def test_unknown_names_are_refused_before_any_call(
    engine: Engine, db_url: str, stub: StubServer, names: dict[str, str], message: str
) -> None:
    settings = make_settings(stub.base_url, db_url)
    chosen = {"stage": "S1", "factor": "gender", "scenario": "career_counseling", **names}
    with pytest.raises(InvalidInputError, match=message):
        usecases.generate_items(engine, settings, endpoint="test", count=1, **chosen)
    plural = {"stages": [chosen["stage"]], "factors": [chosen["factor"]]}
    with pytest.raises(InvalidInputError, match=message):
        usecases.plan_items(
            engine, settings, endpoint="test", per_cell=1, scenarios=[chosen["scenario"]],
            **plural,
        )  # fmt: skip
    assert stub.state.requests == 0 and stub.state.bodies == []  # no chat request was sent


def test_own_factors_generate_like_the_built_in_ones(
    tmp_path: Path, engine: Engine, db_url: str, stub: StubServer
) -> None:
    own = tmp_path / "own.toml"
    own.write_text(
        '[[scenarios]]\nid = "assembly_planning"\nname = "School Assembly Planning"\n'
        'description = "Who speaks at assemblies."\n'
        '[[factors]]\nid = "religion"\nname = "Religion or Belief"\n'
        'description = "Faith, or none."\nscenarios = ["assembly_planning"]\n'
    )
    settings = make_settings(stub.base_url, db_url)
    summary = usecases.plan_items(
        engine, settings, endpoint="test", per_cell=2, factors=["religion"],
        taxonomy_file=own, into="own",
    )  # fmt: skip
    # religion x assembly_planning x 4 stages: 4 cells, one call each.
    assert (summary.cells, summary.calls, summary.added) == (4, 4, 8)
    stored = items(engine, "own")
    assert {(i.factor, i.scenario) for i in stored} == {("religion", "assembly_planning")}
    prompt = stub.state.bodies[0]["messages"][1]["content"]
    assert "Religion or Belief. Faith, or none." in prompt


@pytest.mark.embedded
def test_the_embedded_model_writes_items_that_are_validated_and_resumable(
    engine: Engine, db_url: str, embedded: EmbeddedServer
) -> None:
    # SmolLM2-135M writes poor items; what must hold whatever it writes: every call is
    # stored with its raw reply, every stored item is valid and a draft with its provenance,
    # every rejection keeps its raw text, and asking again for what is there calls nothing.
    client = client_for(
        embedded.base_url, db_url, model=embedded.config.model_alias, concurrency=1,
        timeout_s=300,
    )  # fmt: skip
    cell = check_cell(TAXONOMY, "S1", "gender", "career_counseling")
    options = Options(items_per_call=2, max_tokens=400)
    summary = generate_items(engine, client, BOOK, TAXONOMY, "gen", cell, 2, options=options)
    assert summary.calls >= 1 and summary.failed_calls == 0
    rows = calls(engine)
    assert len(rows) == summary.calls and all(c.raw_text is not None for c in rows)
    assert sum(c.added for c in rows) == summary.added == len(items(engine))
    for item in items(engine):
        record = {"id": item.key, "stage": "S1", "factor": "gender",
                  "scenario": "career_counseling", **item.fields}  # fmt: skip
        assert _check_line(record, TAXONOMY)[1] == [] and item.review_status == "draft"
        assert item.provenance and item.provenance["model"] == "smollm2-135m-instruct"
    for rejection in summary.rejections:
        assert rejection["raw"] is not None and rejection["reason"]

    have = len(items(engine))
    if have:  # a plan asking for what the cell holds calls nothing
        again = plan_items(engine, client, BOOK, TAXONOMY, "gen", [cell], have, options=options)
        assert (again.cells_asked, again.calls, again.cached) == (0, 0, 0)
    # The same calls for another dataset come from the call cache: nothing is paid twice.
    other = generate_items(engine, client, BOOK, TAXONOMY, "copy", cell, 2, options=options)
    assert (other.calls, other.cached, other.added) == (0, summary.calls, summary.added)
