"""Every prompt of an audit design is a draw of its own: repeated texts get their own sample
index (so their own call and cache entry), an uninterrupted run pays no call twice, and a run
stored before that rule has its shared copies asked again on resume.

At a perfect score (level 20) both students' answer vectors are the 20 correct letters, so a
prompt's text depends only on the name pair and which name comes first: with the bundled
names (25 pairs) the level's 500 prompts are 25 x 2 = 50 distinct texts. The stub server
counts every request it gets; the responder always picks the group-A name.
"""

from __future__ import annotations

from collections import Counter

import pytest
from scipy import stats
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from judge.audits import stored
from judge.audits.base import DRAW, FOLLOWUP, MAIN, number_draws
from judge.audits.report import award_report
from judge.audits.runner import run_audit, stored_answers
from judge.audits.suites import SUITES, AwardSuite, BbiSuite, NameSuite
from judge.hashing import messages_hash
from judge.models.client import ModelClient
from judge.store.tables import AuditLabel
from tests.judge.audits.test_runner import always_group_a
from tests.support.factories import make_settings
from tests.support.stub_openai import StubServer


def _client(stub: StubServer, db_url: str, concurrency: int = 8) -> ModelClient:
    settings = make_settings(stub.base_url, db_url, max_retries=1, concurrency=concurrency)
    return ModelClient("test", settings.endpoint("test"))


def _calls(bodies: list[dict]) -> Counter[tuple[str, int]]:
    """Requests counted by what makes a call: (messages, seed = sample index)."""
    return Counter((messages_hash(b["messages"]), int(b.get("seed") or 0)) for b in bodies)


def test_level_20_sends_every_prompt_and_a_rerun_sends_nothing(db_url: str, engine: Engine) -> None:
    """Before: 500 answers stored from 96 requests (50 texts, 46 of them paid twice in
    flight at concurrency 4). Now: one request per prompt, each its own (text, sample)."""
    with StubServer(responder=always_group_a) as stub:
        client = _client(stub, db_url)
        summary = run_audit(engine, client, AwardSuite(levels=(20,)), temperature=0.0,
                            max_tokens=50)  # fmt: skip
        assert stub.state.requests == 500  # 125 vector pairs x 4 variants
        bodies = list(stub.state.bodies)
        again = run_audit(engine, client, AwardSuite(levels=(20,)), temperature=0.0,
                          max_tokens=50)  # fmt: skip
        assert stub.state.requests == 500  # the rerun made no call
    assert again.run_id == summary.run_id and again.main.tasks == 0
    calls = _calls(bodies)
    assert len(calls) == 500 and set(calls.values()) == {1}  # no call paid twice
    assert len({text for text, _ in calls}) == 50  # 25 name pairs x 2 orders (by hand)
    # Each text is asked 10 times (500 / 50), with the sample indices 0..9 as seeds.
    seeds = Counter(text for text, _ in calls)
    assert set(seeds.values()) == {10}
    assert {seed for _, seed in calls} == set(range(10))
    with Session(engine) as session:
        answers = stored_answers(session, summary.run_id)
    assert len({a.cache_key for a in answers}) == 500
    analysis = SUITES["award"].analyze(answers)
    level = analysis.choices.levels[0]
    # n of the binomial test = the prompt count; 500 of 500 for A: scipy's exact test.
    assert (level.level, level.binomial.trials, level.group_a) == (20, 500, 500)
    expected = stats.binomtest(500, 500, 0.5).pvalue
    assert level.binomial.p_value == pytest.approx(expected, rel=1e-9)
    draws = [(d.level, d.prompts, d.texts, d.calls, d.shared) for d in analysis.choices.draws]
    assert draws == [(20, 500, 50, 500, 0), (None, 500, 50, 500, 0)]
    table = award_report(analysis.choices).sections[0].tables[1]
    assert table.rows[0] == ["20", "500", "50", "500", "0"]


def test_followups_of_repeats_are_draws_of_their_own_too(db_url: str, engine: Engine) -> None:
    """Variants 0 and 2 of a level-20 pair have one text and come one after the other, so at
    concurrency 8 they were in flight together and both paid; their follow-ups (same first
    exchange) too. 25 pairs x 4 prompts, every one answered: 100 first turns + 100 "why?"."""
    with StubServer(responder=always_group_a) as stub:
        client = _client(stub, db_url)
        suite = AwardSuite(levels=(20,), pairs_per_level=25, followup=True)
        summary = run_audit(engine, client, suite, temperature=0.0, max_tokens=50)
        assert stub.state.requests == 200
        calls = _calls(stub.state.bodies)
        assert set(calls.values()) == {1}
        again = run_audit(engine, client, suite, temperature=0.0, max_tokens=50)
        assert stub.state.requests == 200
    assert again.followup is None
    with Session(engine) as session:
        answers = stored_answers(session, summary.run_id)
    by_turn = Counter(a.turn for a in answers)
    assert by_turn == {MAIN: 100, FOLLOWUP: 100}
    # A follow-up has the sample index of its first prompt: same DRAW mark on both turns.
    draw = {(a.key, a.turn): a.meta.get(DRAW, 0) for a in answers}
    assert all(draw[key, MAIN] == draw[key, FOLLOWUP] for key, turn in draw if turn == MAIN)
    assert len({a.cache_key for a in answers}) == 200


def test_a_run_stored_with_shared_copies_asks_only_the_copies_again(
    db_url: str, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run stored before repeats were numbered (simulated by a runner that numbers
    nothing): 5 level-20 pairs use 5 name pairs, so 20 prompts are 10 texts and 10 answers
    are copies. Resuming it keeps the 10 first answers and asks the 10 copies (and their
    follow-ups) as calls of their own."""
    suite = AwardSuite(levels=(20,), pairs_per_level=5, followup=True)
    with StubServer(responder=always_group_a) as stub:
        client = _client(stub, db_url, concurrency=1)
        monkeypatch.setattr(stored, "number_draws", lambda tasks: iter(tasks))
        old = run_audit(engine, client, suite, temperature=0.0, max_tokens=50)
        assert stub.state.requests == 20  # 10 texts + their 10 follow-ups
        with Session(engine) as session:
            before = SUITES["award"].analyze(stored_answers(session, old.run_id))
        monkeypatch.undo()
        resumed = run_audit(engine, client, suite, temperature=0.0, max_tokens=50)
        assert stub.state.requests == 40  # the 10 copies and their 10 follow-ups
        run_audit(engine, client, suite, temperature=0.0, max_tokens=50)
        assert stub.state.requests == 40
    assert resumed.run_id == old.run_id
    assert resumed.main.tasks == 10 and resumed.followup is not None
    draws = before.choices.draws[-1]
    assert (draws.prompts, draws.texts, draws.calls, draws.shared) == (20, 10, 10, 10)
    notes = award_report(before.choices).sections[0].tables[1].notes
    assert any("10 answers are copies" in note for note in notes)
    with Session(engine) as session:
        answers = stored_answers(session, old.run_id)
        after = SUITES["award"].analyze(answers)
    assert Counter(a.turn for a in answers) == {MAIN: 20, FOLLOWUP: 20}
    draws = after.choices.draws[-1]
    assert (draws.prompts, draws.texts, draws.calls, draws.shared) == (20, 10, 20, 0)


def test_a_copy_whose_follow_up_has_a_class_is_kept(
    db_url: str, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Same old run; one copy's follow-up was classified by a person before the resume. That
    copy stays (its label points at it), the other 9 copies are asked again: 9 first turns
    and 9 follow-ups."""
    suite = AwardSuite(levels=(20,), pairs_per_level=5, followup=True)
    with StubServer(responder=always_group_a) as stub:
        client = _client(stub, db_url, concurrency=1)
        monkeypatch.setattr(stored, "number_draws", lambda tasks: iter(tasks))
        old = run_audit(engine, client, suite, temperature=0.0, max_tokens=50)
        monkeypatch.undo()
        copy_keys = [t.key for t in number_draws(suite.tasks()) if DRAW in t.meta]
        with Session(engine) as session:
            follow = {a.key: a for a in stored_answers(session, old.run_id, turn=FOLLOWUP)}
            labelled = follow[copy_keys[0]]
            session.add(AuditLabel(answer_id=labelled.id, run_id=old.run_id,
                                   source="human:a@example.org", status="labelled",
                                   label="justified"))  # fmt: skip
            session.commit()
        assert stub.state.requests == 20
        run_audit(engine, client, suite, temperature=0.0, max_tokens=50)
        assert stub.state.requests == 20 + 9 + 9
    with Session(engine) as session:
        answers = stored_answers(session, old.run_id)
        label = session.exec(select(AuditLabel)).one()
    assert label.answer_id == labelled.id  # the labelled answer is still there
    draws = SUITES["award"].analyze(answers).choices.draws[-1]
    assert (draws.prompts, draws.calls, draws.shared) == (20, 19, 1)


def test_designs_that_do_not_repeat_keep_their_calls() -> None:
    """The names and BBI designs already give each repeat its own sample index and never
    repeat a text otherwise, so numbering moves nothing (their cache keys stay as they were).
    Counts by hand: names 42 templates x 40 names = 1,680 texts (SPEC section 4), asked 3
    times here; BBI one text per batch, asked ``repeats`` times."""
    names = list(NameSuite(repeats=3).tasks())
    assert len(names) == 42 * 40 * 3
    assert len({messages_hash(t.messages) for t in names}) == 42 * 40
    assert list(number_draws(names)) == names
    bbi_suite = BbiSuite(repeats=5)
    bbi_tasks = list(bbi_suite.tasks())
    assert len({messages_hash(t.messages) for t in bbi_tasks}) == len(bbi_suite.batches)
    assert list(number_draws(bbi_tasks)) == bbi_tasks


def test_the_award_design_moves_exactly_its_level_20_repeats() -> None:
    """Default design: 450 of level 20's 500 prompts repeat an earlier text (500 - 50); each
    moved prompt gets the next free sample index of its text and says so in its meta."""
    tasks = list(AwardSuite().tasks())
    numbered = list(number_draws(tasks))
    moved = [t for t in numbered if DRAW in t.meta]
    assert sum(t.meta["level"] == 20 for t in moved) == 450
    pairs = {(messages_hash(t.messages), t.sample_index) for t in numbered}
    assert len(pairs) == len(numbered) == 2000
    assert all(t.meta[DRAW] == t.sample_index > 0 for t in moved)
    kept = [t for t in numbered if DRAW not in t.meta]
    assert all(t.sample_index == 0 for t in kept)  # their cache keys are unchanged
