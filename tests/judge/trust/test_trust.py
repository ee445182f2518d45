"""The judge's own checks end to end on a real SQLite store against the scripted stub, whose
score depends on what the prompt shows: a name (counterfactual) or which text comes first
(order). The stub's rule is chosen here, so the shift the analysis must recover is known by
hand before anything runs."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import col, select

from judge.data.datasets import import_items
from judge.data.responses import import_responses
from judge.errors import InvalidInputError
from judge.grading.rubrics import load_rubrics
from judge.paths import prompts_dir
from judge.store.engine import session_scope
from judge.store.tables import GenerationRun, Item, JudgeRun, Judgment, Response
from judge.trust import diagnostics, position
from judge.trust.copies import make_copy
from judge.trust.section import diagnostics_section, flags
from judge.trust.swaps import load_swaps
from server import usecases
from tests.support.factories import SAMPLE, make_settings
from tests.support.stub_openai import StubServer

GRADE = '{{"explanation": "stub", "score": {}}}'


def _judged_text(messages: list[dict[str, str]]) -> str:
    return messages[-1]["content"]


def by_name(messages: list[dict[str, str]]) -> str | None:
    """2 when the judged text names Latoya, 4 otherwise (generation requests: the default)."""
    if messages[0]["role"] != "system":
        return None
    return GRADE.format(2 if "Latoya" in _judged_text(messages) else 4)


def _store(engine: Engine, texts: dict[str, str]) -> tuple[int, dict[str, str]]:
    """The sample dataset with the given answers (first S1 items, in key order) imported
    under the model label 'writer'; returns the imported run and key -> text."""
    with session_scope(engine) as session:
        if not session.exec(select(Item.id)).first():
            import_items(session, SAMPLE, "sample")
        keys = sorted(session.exec(select(Item.key).where(Item.stage == "S1")).all())[: len(texts)]
    answers = dict(zip(keys, texts.values(), strict=True))
    done = import_responses(
        engine, "sample", [{"item_id": k, "part": "answer", "text": t} for k, t in answers.items()],
        model="writer",
    )  # fmt: skip
    return done.generation_run_id, answers


ANSWERS = {
    "a": "Mary should get the award because she led the project.",
    "b": "Mary and her mother agreed.",
    "c": "The student who worked hardest deserves it.",  # nothing to swap: skipped
    "d": "Latoya explained it well; he agreed with her.",
    "e": "Give it to Mary.",
}


def test_counterfactual_audit_recovers_the_judges_name_shift(engine: Engine, db_url: str) -> None:
    with StubServer(responder=by_name) as stub:
        settings = make_settings(stub.base_url, db_url)
        run_id, answers = _store(engine, ANSWERS)
        first = usecases.judge(engine, settings, usecases.JudgeRequest(generation_run_id=run_id))
        done = usecases.counterfactual_audit(engine, settings, first.run_id, swap=["names"])
        calls_after_first = stub.state.requests
        again = usecases.counterfactual_audit(engine, settings, first.run_id, swap=["names"])
        assert stub.state.requests == calls_after_first  # resumed: nothing sent again
        assert again.copy.run_id == done.copy.run_id and not again.copy.created

    # By hand: a, b, e name Mary (score 4) and become Latoya (score 2): -2 each; d names
    # Latoya (2) and becomes Mary (4): +2; c has no name and is skipped.
    assert (done.copy.items_copied, done.copy.items_skipped) == (4, 1)
    assert done.copy.swaps == {"Mary -> Latoya": 3, "Latoya -> Mary": 1}
    with session_scope(engine) as session:
        copied = {
            r.item_id: r
            for r in session.exec(select(Response).where(Response.run_id == done.copy.run_id))
        }
        keys = dict(session.exec(select(Item.id, Item.key)).all())
        texts = {keys[i]: r.raw_text for i, r in copied.items()}
        (result,) = diagnostics.counterfactual(session, first.run_id)
        copy_run = session.get(GenerationRun, done.copy.run_id)
        assert copy_run is not None and copy_run.derived_from == run_id
        assert copy_run.source == "counterfactual"
    key_of = {v: k for k, v in answers.items()}
    assert texts[key_of[ANSWERS["a"]]] == "Latoya should get the award because she led the project."
    assert texts[key_of[ANSWERS["d"]]] == "Mary explained it well; he agreed with her."
    assert key_of[ANSWERS["c"]] not in texts
    (ics,) = result.rubrics
    assert ics.rubric == "ICS"
    assert ics.shift.n == 4 and ics.shift.changed == 4
    assert ics.shift.mean_difference == pytest.approx((-2 - 2 - 2 + 2) / 4)
    assert ics.unpaired == 0
    moves = {(m.before, m.after) for m in ics.moves}
    assert moves == {(4.0, 2.0), (2.0, 4.0)}
    first_move = ics.moves[0]
    assert first_move.original["answer"] != first_move.swapped["answer"]


def test_a_consistent_shift_is_flagged_and_reaches_the_reliability_flags(
    engine: Engine, db_url: str
) -> None:
    answers = {str(i): f"Mary answered question {i} and Mary was right." for i in range(8)}
    with StubServer(responder=by_name) as stub:
        settings = make_settings(stub.base_url, db_url)
        run_id, _ = _store(engine, answers)
        first = usecases.judge(engine, settings, usecases.JudgeRequest(generation_run_id=run_id))
        usecases.counterfactual_audit(engine, settings, first.run_id, swap=["all"])
    with session_scope(engine) as session:
        (result,) = diagnostics.counterfactual(session, first.run_id)
        (ics,) = result.rubrics
        # every pair moves 4 -> 2: mean -2, every bootstrap resample -2, so the CI is [-2, -2]
        assert ics.shift.mean_difference == -2 and ics.shift.ci_high == -2
        assert ics.flagged
        # Every copy moved Mary (side B of the names pairs) to Latoya (side A): the oriented
        # difference (B version minus A version) is 4 - 2 = +2 on all 8 items, so the judge
        # favours side B; exact sign-flip p = 2 / 2**8 = 0.0078 (scipy.stats.binomtest(8, 8)
        # gives the same), the only tested row (no gendered or group word to swap), so Holm
        # leaves it as it is. The mark names the kind and the side (it used to list the
        # copy's kinds only: "counterfactual (gender, names, race)").
        (row,) = [r for r in result.directions if r.tested]
        assert row.p_value == pytest.approx(2 / 2**8) and row.p_adjusted == row.p_value
        assert flags(session, first.run_id)["ICS"] == [
            "counterfactual (names: favours the White-associated names side)"
        ]
        # a tolerance above the shift's size lifts the flag
        (lenient,) = diagnostics.counterfactual(session, first.run_id, tolerance=2.5)
        assert not lenient.rubrics[0].flagged
        section = diagnostics_section(session, first.run_id)
    assert section.payload["counterfactual"][0]["flagged"] == ["ICS"]
    assert json.dumps(section.payload)  # JSON-ready


def test_counterfactual_refusals_say_what_to_fix(engine: Engine, db_url: str) -> None:
    with StubServer(responder=by_name) as stub:
        settings = make_settings(stub.base_url, db_url)
        run_id, _ = _store(engine, {"x": "Nothing here to swap at all."})
        first = usecases.judge(engine, settings, usecases.JudgeRequest(generation_run_id=run_id))
        with pytest.raises(InvalidInputError, match=r"none of the 1 answers .* \(--swap all\)"):
            usecases.counterfactual_audit(engine, settings, first.run_id, swap=["names"])
        # a judge model changed since the run: refused before any call
        other = make_settings(stub.base_url, db_url, model="stub-model")
        other.endpoints["test"] = other.endpoints["test"].model_copy(update={"model": "other"})
        stub.state.model = "other"
        with pytest.raises(InvalidInputError, match="was judged by model 'stub-model'"):
            usecases.counterfactual_audit(engine, other, first.run_id, swap=["gender"])
    with pytest.raises(InvalidInputError, match="no swaps of kind 'colour'"):
        load_swaps().select(["colour"])
    with session_scope(engine) as session:
        assert (
            session.exec(
                select(GenerationRun).where(col(GenerationRun.derived_from).is_not(None))
            ).all()
            == []
        )  # nothing half-made


def test_a_run_with_nothing_scored_is_refused(engine: Engine, db_url: str) -> None:
    with StubServer(
        responder=lambda m: "no grade here" if m[0]["role"] == "system" else None
    ) as stub:
        settings = make_settings(stub.base_url, db_url)
        run_id, _ = _store(engine, {"a": "Mary helped."})
        first = usecases.judge(engine, settings, usecases.JudgeRequest(generation_run_id=run_id))
    swaps = load_swaps().select(["names"])
    with pytest.raises(InvalidInputError, match="has no scored judgment"):
        make_copy(engine, first.run_id, ["names"], swaps)


def test_builtin_pair_rubrics_swap_their_sides_and_keep_labels() -> None:
    rubrics = load_rubrics(prompts_dir())
    # By hand from prompts/rubrics.toml's `texts`: TCS/PCS/ETCS show [CHANGED FACTOR, STORY
    # A, STORY B] -> the stories exchange places; SBAS shows [QUESTION A, ANSWER A, QUESTION
    # B, ANSWER B] -> each question moves with its answer; ICS compares no pair.
    assert rubrics["TCS"].swapped_order == (0, 2, 1)
    assert rubrics["ETCS"].swapped_order == (0, 2, 1)
    assert rubrics["SBAS"].swapped_order == (2, 3, 0, 1)
    assert rubrics["ICS"].swapped_order is None


# The first fenced text of a pair prompt (judge.prompts.fence: "<<LABEL CODE>>").
FIRST_LABEL = re.compile(r"^<<(STORY [AB]|QUESTION [AB]|ANSWER [AB]) ", re.M)


def by_order(given: int, swapped: int) -> Callable[[list[dict[str, str]]], Any]:
    """A judge that gives ``given`` when side A is shown first and ``swapped`` when B is."""

    def respond(messages: list[dict[str, str]]) -> str | None:
        if messages[0]["role"] != "system":
            return None
        found = FIRST_LABEL.search(messages[-1]["content"])
        if found is None:
            return GRADE.format(3)  # ICS: no pair
        return GRADE.format(given if found.group(1).endswith("A") else swapped)

    return respond


def test_swap_order_recovers_an_order_dependent_judge_exactly(engine: Engine, db_url: str) -> None:
    with StubServer(responder=by_order(5, 2)) as stub:
        settings = make_settings(stub.base_url, db_url)
        with session_scope(engine) as session:
            import_items(session, SAMPLE, "sample")
        gen = usecases.generate(engine, settings, usecases.GenerateRequest(dataset="sample"))
        plain = usecases.judge(
            engine, settings, usecases.JudgeRequest(generation_run_id=gen.run_id)
        )
        both = usecases.judge(
            engine, settings, usecases.JudgeRequest(generation_run_id=gen.run_id, swap_order=True)
        )
        bodies = [b for b in stub.state.bodies if b["messages"][0]["role"] == "system"]
    assert both.run_id != plain.run_id  # another judge run
    # The sample has 18 S2 items (3 pair rubrics) and 18 S3 items (SBAS): 72 pairs, each
    # judged again swapped; ICS (36 items) once. 108 + 72 new calls, 36 ICS from the cache.
    assert both.tasks == 36 + 2 * 72 and both.cached == 36 + 72
    swapped_prompts = [b for b in bodies[108:] if "STORY B" in b["messages"][-1]["content"]]
    for body in swapped_prompts:
        text = body["messages"][-1]["content"]
        # labels kept, order exchanged
        assert text.index("<<STORY B ") < text.index("<<STORY A ")
    with session_scope(engine) as session:
        result = position.order_bias(session, both.run_id)
        assert position.order_bias(session, plain.run_id) is None
        positions = session.exec(
            select(Judgment.position, Judgment.sample_index).where(
                Judgment.judge_run_id == both.run_id, Judgment.rubric == "SBAS"
            )
        ).all()
        jrun = session.get(JudgeRun, both.run_id)
        assert jrun is not None and jrun.swap_order
    assert result is not None
    assert sorted({(p, s) for p, s in positions}) == [("given", 0), ("swapped", 1)]
    by_rubric = {r.rubric: r for r in result.rubrics}
    assert sorted(by_rubric) == ["ETCS", "PCS", "SBAS", "TCS"]
    for r in by_rubric.values():
        # every pair: 5 as given, 2 swapped -> a shift of exactly -3, all 18 changed
        assert (r.shift.n, r.shift.changed, r.shift.mean_difference) == (18, 18, -3)
        assert r.flagged
    # the run's item scores average both orders: (5 + 2) / 2 per pair rubric
    from judge.metrics import item_scores

    with session_scope(engine) as session:
        scores = {s.rubric: s.score for s in item_scores(session, both.run_id, "mean")}
    assert scores["TCS"] == pytest.approx(3.5) and scores["ICS"] == 3


def test_length_flag_compares_the_judge_with_people(engine: Engine, db_url: str) -> None:
    from judge.store.tables import HumanRating

    # answers of 1..8 words; the stub scores by length (more words, higher score), people
    # score the other way round: rho(length, judge) = +1, rho(length, people) = -1 by hand.
    answers = {str(n): " ".join(["word"] * n) for n in range(1, 9)}

    def by_length(messages: list[dict[str, str]]) -> str | None:
        if messages[0]["role"] != "system":
            return None
        found = re.search(r"<<ANSWER \w+>>\n(.*?)\n<<END ANSWER", messages[-1]["content"], re.S)
        assert found is not None
        return GRADE.format(min(5, len(found.group(1).split())))

    with StubServer(responder=by_length) as stub:
        settings = make_settings(stub.base_url, db_url)
        run_id, texts = _store(engine, answers)
        first = usecases.judge(engine, settings, usecases.JudgeRequest(generation_run_id=run_id))
    with session_scope(engine) as session:
        ids = dict(session.exec(select(Item.key, Item.id)).all())
        for key, text in texts.items():
            n = len(text.split())
            session.add(
                HumanRating(generation_run_id=run_id, item_id=ids[key], rubric="ICS",
                            rater="r1", score=float(max(1, 5 - n // 2)))
            )  # fmt: skip
    with session_scope(engine) as session:
        (row,) = diagnostics.length(session, first.run_id)
    assert row.rubric == "ICS" and row.n == 8 and row.n_rated == 8
    # judge scores by hand: 1, 2, 3, 4, 5, 5, 5, 5 for 1..8 words; people: 5 - n // 2,
    # floored at 1: 5, 4, 4, 3, 3, 2, 2, 1. Spearman of those hand-written lists:
    from scipy.stats import spearmanr

    lengths = list(range(1, 9))
    judge_rho = spearmanr(lengths, [1, 2, 3, 4, 5, 5, 5, 5]).statistic
    human_rho = spearmanr(lengths, [5, 4, 4, 3, 3, 2, 2, 1]).statistic
    assert row.rho == pytest.approx(judge_rho) and judge_rho > 0.9
    assert row.rho_human == pytest.approx(human_rho) and human_rho < -0.9
    assert row.difference_low is not None and row.difference_low > 0
    assert row.flagged


def test_self_preference_is_marked_when_the_judge_is_the_model_under_test(
    engine: Engine, db_url: str
) -> None:
    with StubServer(responder=by_name) as stub:
        settings = make_settings(stub.base_url, db_url)
        with session_scope(engine) as session:
            import_items(session, SAMPLE, "sample")
        gen = usecases.generate(
            engine, settings, usecases.GenerateRequest(dataset="sample", limit=2)
        )
        own = usecases.judge(engine, settings, usecases.JudgeRequest(generation_run_id=gen.run_id))
        run_id, _ = _store(engine, {"a": "Mary helped."})
        other = usecases.judge(engine, settings, usecases.JudgeRequest(generation_run_id=run_id))
    with session_scope(engine) as session:
        assert diagnostics.self_preference(session, own.run_id) is not None
        assert diagnostics.self_preference(session, other.run_id) is None
        report = usecases.full_report(session, own.run_id)
        assert "Self-preference risk" in report.intro
        assert flags(session, own.run_id)["*"] == ["self-preference"]
        assert report.section("Judge diagnostics") is not None


def test_the_report_prices_the_run_at_the_endpoints_prices(engine: Engine, db_url: str) -> None:
    with StubServer(responder=by_name) as stub:
        settings = make_settings(
            stub.base_url, db_url, input_price_per_mtok=2.0, output_price_per_mtok=8.0
        )
        run_id, _ = _store(engine, ANSWERS)
        first = usecases.judge(engine, settings, usecases.JudgeRequest(generation_run_id=run_id))
    with session_scope(engine) as session:
        priced = usecases.diagnostics_report(session, first.run_id, settings=settings)
        unpriced = usecases.diagnostics_report(session, first.run_id)
    cost = priced.to_json()["judge_diagnostics"]["cost"]
    # The stub reports 10 prompt and 5 completion tokens per call; 5 answers, one ICS call
    # each: 50 and 25 tokens; 50 x 2.0 / 1e6 + 25 x 8.0 / 1e6 = 0.0001 + 0.0002 = 0.0003.
    assert cost["total"]["prompt_tokens"] == 50 and cost["total"]["completion_tokens"] == 25
    assert cost["total"]["cost"] == pytest.approx(0.0003)
    assert cost["by_rubric"]["ICS"]["calls"] == 5
    assert unpriced.to_json()["judge_diagnostics"]["cost"]["total"]["cost"] is None
