"""Costs: price arithmetic by hand, a judge run's cost summed in a real SQLite store, the
dry-run estimate, the --max-cost budget (sequence and threads), and price settings."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from pydantic import ValidationError
from sqlalchemy.engine import Engine
from sqlmodel import Session

from judge.budgets import (
    TEMPLATE_TOKENS_PER_CALL,
    TEMPLATE_TOKENS_PER_MESSAGE,
    Budget,
    prompt_token_bound,
)
from judge.config import EndpointConfig, load_settings
from judge.costs import (
    Measure,
    Usage,
    estimate,
    judge_run_cost,
    measured_completion_tokens,
    measured_tokens_per_char,
)
from judge.errors import ConfigError, InvalidInputError, NotFoundError
from judge.prices import Prices
from judge.store.tables import Dataset, GenerationRun, Item, JudgeRun, Judgment, Response

# 2.50 per million in, 10.00 per million out (a common list price for a large model).
PRICES = Prices(2.50, 10.00, batch_discount=0.5)


# -- prices ---------------------------------------------------------------------------------


def test_cost_by_hand() -> None:
    # 1,200 prompt tokens at 2.50/M = 0.003; 300 completion tokens at 10.00/M = 0.003;
    # together 0.006, and half of it (0.003) through a batch API with a 50 % discount.
    assert PRICES.cost(1_200, 300) == pytest.approx(0.006, abs=1e-15)
    assert PRICES.cost(1_200, 300, batch=True) == pytest.approx(0.003, abs=1e-15)
    # The discount applies to batch calls only.
    assert PRICES.cost(1_200, 300, batch=False) == pytest.approx(0.006, abs=1e-15)
    # 1,000,000 in + 1,000,000 out = 2.50 + 10.00 = 12.50.
    assert Prices(2.50, 10.00).cost(1_000_000, 1_000_000) == pytest.approx(12.5)
    assert PRICES.cost(0, 0) == 0


def test_prices_of_an_endpoint() -> None:
    base = {"base_url": "http://x/v1", "model": "m"}
    assert Prices.of(EndpointConfig(**base)) is None
    # One price alone gives no cost: half a price would be a wrong number.
    assert Prices.of(EndpointConfig(**base, input_price_per_mtok=1.0)) is None
    assert Prices.of(EndpointConfig(**base, output_price_per_mtok=1.0)) is None
    both = EndpointConfig(
        **base, input_price_per_mtok=0.15, output_price_per_mtok=0.6, batch_discount=0.5
    )
    assert Prices.of(both) == Prices(0.15, 0.6, 0.5)
    # A free local model is priced 0, which is not "unknown".
    free = EndpointConfig(**base, input_price_per_mtok=0, output_price_per_mtok=0)
    assert Prices.of(free) == Prices(0, 0)


@pytest.mark.parametrize(
    "bad",
    [
        {"input_price_per_mtok": -0.01, "output_price_per_mtok": 1},
        {"input_price_per_mtok": 1, "output_price_per_mtok": -1},
        {"input_price_per_mtok": float("nan"), "output_price_per_mtok": 1},
        {"input_price_per_mtok": 1, "output_price_per_mtok": float("inf")},
        {"batch_discount": 1.0},
        {"batch_discount": 1.5},
        {"batch_discount": -0.1},
    ],
)
def test_endpoint_rejects_negative_prices_and_a_discount_of_one_or_more(bad: dict) -> None:
    with pytest.raises(ValidationError) as caught:
        EndpointConfig(base_url="http://x/v1", model="m", **bad)
    assert {e["loc"][0] for e in caught.value.errors()} <= set(bad)


def test_config_file_names_the_bad_price(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(
        '[endpoints.embedded]\nbase_url = "http://x/v1"\nmodel = "m"\n'
        "input_price_per_mtok = -2.5\nbatch_discount = 1\n"
    )
    with pytest.raises(ConfigError) as caught:
        load_settings(path)
    assert "endpoints.embedded.input_price_per_mtok" in str(caught.value)
    assert "endpoints.embedded.batch_discount" in str(caught.value)


def test_prices_validate_their_arguments() -> None:
    with pytest.raises(ValueError, match="input_per_mtok"):
        Prices(-1, 1)
    with pytest.raises(ValueError, match="batch_discount"):
        Prices(1, 1, batch_discount=1)
    with pytest.raises(ValueError, match="prompt_tokens"):
        PRICES.cost(-1, 0)


# -- a judge run's cost in a real store ------------------------------------------------------


def _store(engine: Engine) -> tuple[int, int]:
    """A dataset of items a and b, one generation run, and two judge runs; returns the
    first judge run's id and the generation run's id."""
    with Session(engine) as s:
        ds = Dataset(name="d")
        s.add(ds)
        s.flush()
        assert ds.id is not None
        items = {}
        for key in ("a", "b"):
            item = Item(
                dataset_id=ds.id, key=key, stage="S1", factor="f", scenario="s", content_hash=key
            )
            s.add(item)
            items[key] = item
        grun = GenerationRun(
            dataset_id=ds.id,
            endpoint_name="e",
            base_url="http://x/v1",
            model="m",
            temperature=0,
            max_tokens=32,
            template_version="t",
        )
        s.add(grun)
        s.flush()
        assert grun.id is not None
        runs = []
        for h in ("h1", "h2"):
            jrun = JudgeRun(
                generation_run_id=grun.id,
                endpoint_name="judge",
                base_url="http://x/v1",
                model="judge-m",
                prompt_variant="plain",
                temperature=0,
                samples=1,
                aggregation="mean",
                max_tokens=300,
                config_hash=h,
            )
            s.add(jrun)
            runs.append(jrun)
        s.flush()
        first, other = (r.id for r in runs)
        assert first is not None and other is not None
        # (run, item, rubric, calls, prompt tokens, completion tokens)
        rows = [
            (first, "a", "R1", 1, 1_000, 100),
            (first, "a", "R2", 2, 3_000, 250),  # a repair: two calls
            (first, "b", "R1", 1, 1_200, 300),
            (first, "b", "R2", 1, 0, 0),  # the call failed: no tokens reported
            (other, "a", "R1", 1, 99_999, 99_999),  # another run: never counted
        ]
        for run_id, key, rubric, calls, prompt, completion in rows:
            item_id = items[key].id
            assert item_id is not None
            s.add(
                Judgment(
                    judge_run_id=run_id,
                    item_id=item_id,
                    rubric=rubric,
                    status="scored",
                    score=3,
                    template_version="t",
                    prompt_hash="p",
                    model="judge-m",
                    cache_key=f"{run_id}{key}{rubric}",
                    calls=calls,
                    prompt_tokens=prompt,
                    completion_tokens=completion,
                )
            )
        s.commit()
        return first, grun.id


def test_judge_run_cost_by_run_rubric_and_item(engine: Engine) -> None:
    run_id, _ = _store(engine)
    # 40 % off through a batch API: every batch figure is 0.6 x its live figure.
    prices = Prices(2.50, 10.00, batch_discount=0.4)
    with Session(engine) as s:
        result = judge_run_cost(s, run_id, prices)
    # Sums of the first run's four rows, by hand:
    # total: calls 1+2+1+1 = 5, prompt 1000+3000+1200+0 = 5200, completion 100+250+300 = 650;
    #   cost 5200 x 2.50/M + 650 x 10.00/M = 0.013 + 0.0065 = 0.0195; batch 0.6 x = 0.0117
    approx = pytest.approx
    assert result.total == Usage(4, 5, 5_200, 650, approx(0.0195), approx(0.0117))
    # R1: a + b: calls 2, prompt 2200, completion 400 -> 0.0055 + 0.004 = 0.0095 (0.0057)
    # R2: a + b: calls 3, prompt 3000, completion 250 -> 0.0075 + 0.0025 = 0.0100 (0.0060)
    assert result.by_rubric == {
        "R1": Usage(2, 2, 2_200, 400, approx(0.0095), approx(0.0057)),
        "R2": Usage(2, 3, 3_000, 250, approx(0.0100), approx(0.0060)),
    }
    # a: calls 3, prompt 4000, completion 350 -> 0.0100 + 0.0035 = 0.0135 (0.0081)
    # b: calls 2, prompt 1200, completion 300 -> 0.0030 + 0.0030 = 0.0060 (0.0036)
    assert result.by_item == {
        "a": Usage(2, 3, 4_000, 350, approx(0.0135), approx(0.0081)),
        "b": Usage(2, 2, 1_200, 300, approx(0.0060), approx(0.0036)),
    }
    payload = result.to_json()
    assert payload["total"]["cost"] == approx(0.0195)
    assert payload["total"]["cost_batch"] == approx(0.0117)
    assert payload["by_item"]["b"]["prompt_tokens"] == 1_200
    assert payload["prices"] == {
        "input_per_mtok": 2.5,
        "output_per_mtok": 10.0,
        "batch_discount": 0.4,
        "cached_input_per_mtok": None,
        "cache_min_tokens": 1024,
    }
    assert (payload["endpoint"], payload["model"]) == ("judge", "judge-m")
    assert "batch_discount (0.4)" in result.note


def test_judge_run_cost_without_prices_says_what_to_set(engine: Engine) -> None:
    run_id, _ = _store(engine)
    with Session(engine) as s:
        result = judge_run_cost(s, run_id, None)
        with pytest.raises(NotFoundError):
            judge_run_cost(s, 999, None)
    assert result.total == Usage(4, 5, 5_200, 650, None)
    assert all(u.cost is None for u in result.by_item.values())
    assert "input_price_per_mtok and output_price_per_mtok under [endpoints.judge]" in result.note


def test_measured_ratio_and_reply_length_from_the_store(engine: Engine) -> None:
    _, grun_id = _store(engine)
    with Session(engine) as s:
        # The store's judgments of judge-m: 4 with a reply (the failed call and the other
        # run's judgment aside: 3 + 1), fewer than MIN_MEASURED (10).
        assert measured_completion_tokens(s, "judge-m") is None
        assert measured_tokens_per_char(s, "m") is None  # no answers yet
        item = s.get(Item, 1)
        assert item is not None and item.id is not None
        # 12 answers of model m: 100 characters each, 30 prompt tokens -> 360 / 1200 = 0.3;
        # one error answer with no tokens reported is left out.
        for i in range(13):
            s.add(
                Response(
                    run_id=grun_id,
                    item_id=item.id,
                    part=f"p{i}",
                    prompt="x" * 100,
                    flag="ok" if i < 12 else "error",
                    prompt_tokens=30 if i < 12 else 0,
                    cache_key=str(i),
                )
            )
        s.commit()
        ratio = measured_tokens_per_char(s, "m")
        assert ratio is not None and ratio.value == pytest.approx(0.3)
        assert "from 12 prompts m answered" in ratio.rule
        assert measured_tokens_per_char(s, "judge-m") is None


# -- the estimate ---------------------------------------------------------------------------


def test_estimate_by_hand() -> None:
    one = [{"role": "system", "content": "s" * 200}, {"role": "user", "content": "u" * 600}]
    prompts = [one, one, one]
    e = estimate(prompts, max_tokens=100, prices=Prices(2.50, 10.00))
    # 3 calls x 800 characters = 2400 characters; at 4 characters per token, 600 tokens.
    assert (e.calls, e.prompt_chars, e.prompt_tokens) == (3, 2_400, 600)
    # Bound: 3 calls x 100 = 300 completion tokens; no typical length was given.
    assert (e.completion_tokens_max, e.completion_tokens_typical) == (300, None)
    # 600 x 2.50/M = 0.0015 for the prompts; + 300 x 10.00/M = 0.003 -> 0.0045 at most.
    assert e.cost_min == pytest.approx(0.0015)
    assert e.cost_max == pytest.approx(0.0045)
    assert e.cost_typical is None
    assert "assumed: 4 characters per token" in e.note

    typical = Measure(40, "measured: 40.0 completion tokens per call over 50 judgments")
    ratio = Measure(0.3, "measured: 0.300 tokens per character from 12 prompts")
    e = estimate(
        iter(prompts),
        max_tokens=100,
        prices=Prices(2.50, 10.00, 0.5),
        tokens_per_char=ratio,
        completion_tokens=typical,
        batch=True,
    )
    # 2400 x 0.3 = 720 prompt tokens; typical 3 x 40 = 120 completion tokens.
    assert (e.prompt_tokens, e.completion_tokens_typical) == (720, 120)
    # Half price (batch): (720 x 2.50 + 120 x 10.00) / M / 2 = (1800 + 1200) / M / 2 = 0.0015;
    # at most (1800 + 300 x 10.00) / M / 2 = 4800 / M / 2 = 0.0024.
    assert e.cost_typical == pytest.approx(0.0015)
    assert e.cost_max == pytest.approx(0.0024)
    assert ratio.rule in e.note and typical.rule in e.note
    assert e.to_json()["prices"] == {
        "input_per_mtok": 2.5,
        "output_per_mtok": 10.0,
        "batch_discount": 0.5,
        "cached_input_per_mtok": None,
        "cache_min_tokens": 1024,
    }


def test_estimate_without_prices_and_bad_arguments() -> None:
    e = estimate([], max_tokens=10, prices=None)
    assert (e.calls, e.prompt_tokens, e.cost_min, e.cost_max) == (0, 0, None, None)
    assert "No cost" in e.note
    with pytest.raises(InvalidInputError, match="max_tokens"):
        estimate([], max_tokens=0, prices=None)
    with pytest.raises(InvalidInputError, match="tokens_per_char"):
        estimate([], max_tokens=1, prices=None, tokens_per_char=Measure(0, "x"))


# -- the budget ----------------------------------------------------------------------------

CALL = 0.006  # 1,200 in + 300 out at 2.50/10.00 per million, as in test_cost_by_hand


def test_budget_stops_at_the_call_that_would_pass_it() -> None:
    budget = Budget(0.03, Prices(2.50, 10.00))
    made = 0
    while budget.reserve(CALL):
        budget.settle(CALL, Prices(2.50, 10.00).cost(1_200, 300))
        made += 1
    # 0.03 / 0.006 = 5 calls exactly; the 6th would bring the total to 0.036 > 0.03.
    # (5 x 0.006 in floats is not exactly 0.03: the budget allows that rounding.)
    assert made == 5
    assert budget.spent == pytest.approx(0.03)
    assert budget.exhausted and budget.refused == 1 and budget.reserved == 0


def test_budget_counts_calls_in_flight_and_settles_real_costs() -> None:
    budget = Budget(0.05, Prices(2.50, 10.00))
    assert budget.reserve(0.02)  # held 0.02
    assert budget.reserve(0.02)  # held 0.04
    assert not budget.reserve(0.02)  # 0.04 + 0.02 = 0.06 > 0.05: not made
    assert budget.exhausted
    budget.settle(0.02, 0.006)  # the call cost 0.006: spent 0.006, held 0.02
    assert budget.spent == pytest.approx(0.006) and budget.reserved == pytest.approx(0.02)
    # 0.006 + 0.02 + 0.001 would fit, but the first refusal stops the run for good.
    assert not budget.reserve(0.001)
    budget.settle(0.02, 0)  # a failed call costs nothing
    assert budget.spent == pytest.approx(0.006) and budget.reserved == 0
    assert budget.refused == 2
    assert budget.to_json() == {
        "max_cost": 0.05,
        "spent": pytest.approx(0.006),
        "reserved": 0,
        "refused": 2,
        "exhausted": True,
    }
    with pytest.raises(ValueError, match="only"):
        budget.settle(0.01, 0)  # nothing is reserved any more


def test_budget_of_zero_allows_only_free_calls() -> None:
    budget = Budget(0, Prices(2.50, 10.00))
    assert budget.reserve(0)  # a cache hit costs nothing
    budget.settle(0, 0)
    assert not budget.reserve(1e-9)


def test_budget_reservation_is_a_worst_case() -> None:
    budget = Budget(1, Prices(2.50, 10.00))
    messages = [{"role": "system", "content": "é" * 100}, {"role": "user", "content": "x" * 800}]
    # Bytes: 100 x 2 ("é" is 2 bytes in UTF-8) + 800 = 1000; margins 2 x 8 + 64 = 80.
    assert (TEMPLATE_TOKENS_PER_MESSAGE, TEMPLATE_TOKENS_PER_CALL) == (8, 64)
    assert prompt_token_bound(messages) == 1_080
    # 1,080 x 2.50/M + 300 x 10.00/M = 0.0027 + 0.003 = 0.0057.
    assert budget.reservation(messages, max_tokens=300) == pytest.approx(0.0057)


def test_budget_is_safe_across_threads() -> None:
    # 16 threads race for calls reserved at 0.001 that then cost 0.0004, under 0.1.
    budget = Budget(0.1, Prices(1, 1))
    made = []
    start = threading.Barrier(16)

    def worker() -> None:
        start.wait()
        mine = 0
        while budget.reserve(0.001):
            budget.settle(0.001, 0.0004)
            mine += 1
        made.append(mine)

    threads = [threading.Thread(target=worker) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # Settling for less frees room, so more than 100 reservations succeed before the first
    # refusal; what is certain: never more held + spent than 0.1, nothing left reserved,
    # and spent = 0.0004 x calls made.
    calls = sum(made)
    assert budget.reserved == 0
    assert budget.spent == pytest.approx(0.0004 * calls)
    assert budget.spent <= 0.1 + 1e-12
    assert budget.refused == 16  # each thread's loop ends on exactly one refusal


def test_budget_threads_reserving_without_settling_take_exactly_what_fits() -> None:
    # With nothing settled, what is held only grows: 0.1 / 0.001 = exactly 100 reservations
    # succeed, whatever the interleaving of 16 threads x 20 attempts (320 > 100).
    budget = Budget(0.1, Prices(1, 1))
    granted = []
    lock = threading.Lock()
    start = threading.Barrier(16)

    def worker() -> None:
        start.wait()
        for _ in range(20):
            ok = budget.reserve(0.001)
            with lock:
                granted.append(ok)

    threads = [threading.Thread(target=worker) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert granted.count(True) == 100
    assert budget.reserved == pytest.approx(0.1)
    assert budget.refused == 220


def test_budget_without_prices_says_what_to_set() -> None:
    with pytest.raises(ConfigError) as caught:
        Budget(5, None, endpoint="openai")
    message = str(caught.value)
    assert "input_price_per_mtok and output_price_per_mtok under [endpoints.openai]" in message
    assert "fairjudge.toml" in message
    with pytest.raises(InvalidInputError, match="--max-cost"):
        Budget(-1, PRICES)
    with pytest.raises(ValueError, match="estimated_cost"):
        Budget(1, PRICES).reserve(-0.5)
