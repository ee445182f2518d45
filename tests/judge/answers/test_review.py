"""Which items a generation run asks, by expert review status: drafts and rejected items are
left out by default and counted in the run's status line, ``include_drafts`` adds the drafts,
``accepted_only`` keeps only accepted items, and a run is never resumed with options that
leave out items it already answered. Through the stub endpoint, counting its requests."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, func, select

from judge.answers.collect import generate
from judge.data.datasets import import_items
from judge.errors import InvalidInputError, NotFoundError
from judge.models.client import ModelClient
from judge.prompts import PromptBook
from judge.runs import RunSummary
from judge.store.engine import session_scope
from judge.store.tables import GenerationRun, Item, Response
from tests.support.factories import SAMPLE, make_settings
from tests.support.stub_openai import StubServer

# The 18 S1 items of the bundled sample: one prompt ("answer") each, so items = requests.
# Review statuses set by hand below; the 13 others stay None (never reviewed).
STATUSES = {
    "s1-gender-1": "accepted",
    "s1-gender-2": "edited",
    "s1-race_culture-1": "rejected",
    "s1-race_culture-2": "draft",
    "s1-learning_style-1": "draft",
}


@pytest.fixture
def dataset(tmp_path: Path, engine: Engine) -> str:
    lines = [x for x in SAMPLE.read_text().splitlines() if json.loads(x)["stage"] == "S1"]
    path = tmp_path / "s1.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with session_scope(engine) as session:
        import_items(session, path, "s1")
    set_statuses(engine, STATUSES)
    return "s1"


def set_statuses(engine: Engine, statuses: dict[str, str | None]) -> None:
    with session_scope(engine) as session:
        for item in session.exec(select(Item).where(col(Item.key).in_(statuses))):
            item.review_status = statuses[item.key]
            session.add(item)


def run(
    engine: Engine, stub: StubServer, db_url: str, **options: bool
) -> tuple[RunSummary, GenerationRun]:
    settings = make_settings(stub.base_url, db_url)
    client = ModelClient("test", settings.endpoint("test"))
    summary = generate(
        engine,
        client,
        PromptBook(settings.prompts_path()),
        "s1",
        temperature=0.0,
        max_tokens=32,
        **options,
    )
    with Session(engine) as s:
        stored = s.get(GenerationRun, summary.run_id)
        assert stored is not None
    return summary, stored


def asked_keys(engine: Engine, run_id: int) -> set[str]:
    with Session(engine) as s:
        return set(
            s.exec(
                select(Item.key)
                .join(Response, col(Response.item_id) == Item.id)
                .where(Response.run_id == run_id)
            )
        )


def generation_requests(stub: StubServer) -> int:
    """Requests the stub received from the model under test's side (the judge's carry a
    system message; none are made here)."""
    return sum(
        not any(m.get("role") == "system" for m in body["messages"]) for body in stub.state.bodies
    )


def test_drafts_and_rejected_are_left_out_and_counted(
    engine: Engine, stub: StubServer, db_url: str, dataset: str
) -> None:
    summary, stored = run(engine, stub, db_url)
    # 18 items - 1 rejected - 2 drafts = 15 asked (accepted, edited and never reviewed).
    assert summary.tasks == 15 and generation_requests(stub) == 15
    assert asked_keys(engine, summary.run_id) == (
        set(read_keys()) - {"s1-race_culture-1", "s1-race_culture-2", "s1-learning_style-1"}
    )
    assert stored.status == "finished"
    assert stored.status_detail == (
        "3 item(s) left out by review status (2 draft, 1 rejected): drafts are asked only "
        "with --include-drafts, rejected items never"
    )

    # --include-drafts resumes the same run and asks the 2 drafts only; rejected stays out.
    more, stored = run(engine, stub, db_url, include_drafts=True)
    assert more.run_id == summary.run_id
    assert more.tasks == 2 and generation_requests(stub) == 17
    assert "s1-race_culture-1" not in asked_keys(engine, summary.run_id)
    assert stored.status_detail == (
        "1 item(s) left out by review status (1 rejected): rejected items never"
    )

    # The run now holds the drafts' answers: resuming it without --include-drafts would let
    # its judge runs judge them, so it is refused before any request.
    with pytest.raises(InvalidInputError, match=r"2 item\(s\).*\(2 draft\).*--include-drafts"):
        run(engine, stub, db_url)
    assert generation_requests(stub) == 17

    # A new run without the drafts is what --new gives.
    fresh, _ = run(engine, stub, db_url, new=True)
    assert fresh.run_id != summary.run_id and fresh.tasks == 15


def test_accepted_only_keeps_accepted_items_and_says_what_it_left_out(
    engine: Engine, stub: StubServer, db_url: str, dataset: str
) -> None:
    summary, stored = run(engine, stub, db_url, accepted_only=True)
    assert summary.tasks == 1 and asked_keys(engine, summary.run_id) == {"s1-gender-1"}
    # 17 left out: the 2 drafts, the edited one, the rejected one and 13 never reviewed.
    assert stored.status_detail == (
        "17 item(s) left out by --accepted-only (2 draft, 1 edited, 1 rejected, 13 unreviewed)"
    )


def test_an_item_rejected_after_it_was_answered_stops_the_run_from_resuming(
    engine: Engine, stub: StubServer, db_url: str, dataset: str
) -> None:
    summary, _ = run(engine, stub, db_url)
    set_statuses(engine, {"s1-gender-1": "rejected"})
    with pytest.raises(InvalidInputError, match=r"1 item\(s\).*\(1 rejected\).*--new"):
        run(engine, stub, db_url)
    assert generation_requests(stub) == summary.tasks


def test_no_run_is_created_for_options_that_ask_nothing(
    engine: Engine, stub: StubServer, db_url: str, dataset: str
) -> None:
    with pytest.raises(InvalidInputError, match="contradict"):
        run(engine, stub, db_url, accepted_only=True, include_drafts=True)
    set_statuses(engine, dict.fromkeys(read_keys(), "draft"))
    with pytest.raises(NotFoundError, match=r"no item to ask: 18 draft.*--drafts"):
        run(engine, stub, db_url)
    with Session(engine) as s:
        assert s.exec(select(func.count()).select_from(GenerationRun)).one() == 0
    # The same drafts asked on purpose.
    summary, stored = run(engine, stub, db_url, include_drafts=True)
    assert summary.tasks == 18 and stored.status_detail is None


def read_keys() -> list[str]:
    return [
        json.loads(x)["id"]
        for x in SAMPLE.read_text().splitlines()
        if json.loads(x)["stage"] == "S1"
    ]
