"""A provider's prompt cache, used and counted (issue 46): the judge's prompts open with what
every judgment of a rubric shares, each reply's cached prompt tokens are read, stored per call
and summed per run, and priced at the endpoint's cached-input price; the dry run says how many
prompt tokens a cache could serve.

The stub (tests.support.stub_openai, ``prompt_cache=True``) reports cached tokens as a
provider does: the longest opening a prompt shares with an earlier one, in whole blocks, from a
minimum length on. The expected counts are computed here from the request bodies the stub
received, with ``os.path.commonprefix`` (not FairJudge's code), and the costs by hand.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from sqlmodel import Session, select

from judge import paths
from judge.costs import estimate, judge_run_cost
from judge.grading.rubrics import load_rubrics
from judge.models.client import read_completion
from judge.prices import Prices
from judge.prompts import PromptBook
from judge.store.engine import make_engine
from judge.store.tables import CallCache, Judgment
from judge.vocab import FACTORS
from server.cli import cli
from tests.support.factories import SAMPLE, write_config
from tests.support.stub_openai import CACHE_BLOCK, CACHE_KEPT, CACHE_MIN, StubServer


def _reply(usage: dict[str, Any]) -> dict[str, Any]:
    return {"choices": [{"message": {"content": "x"}, "finish_reason": "stop"}], "usage": usage}


def test_a_reply_s_cached_prompt_tokens_are_read() -> None:
    def cached(usage: dict[str, Any]) -> int:
        done = read_completion(_reply(usage), logprobs=False, latency_s=0.0, attempts=1)
        assert done is not None  # an odd usage never makes a reply unreadable
        return done.cached_prompt_tokens

    details = {"cached_tokens": 64}
    assert cached({"prompt_tokens": 100, "prompt_tokens_details": details}) == 64
    assert cached({"prompt_tokens": 100}) == 0  # not reported: none cached
    assert cached({"prompt_tokens": 100, "prompt_tokens_details": None}) == 0
    assert cached({"prompt_tokens": 100, "prompt_tokens_details": [64]}) == 0
    assert cached({"prompt_tokens": 100, "prompt_tokens_details": {"cached_tokens": "64"}}) == 0
    # More cached than sent cannot be priced: it is held to the prompt's count.
    assert cached({"prompt_tokens": 50, "prompt_tokens_details": details}) == 50


def test_cost_with_cached_prompt_tokens_by_hand() -> None:
    prices = Prices(2.50, 10.00, batch_discount=0.5, cached_input_per_mtok=1.25)
    # 1,200 prompt tokens, 1,000 of them cached, 300 out:
    # (200 x 2.50 + 1,000 x 1.25 + 300 x 10.00) / M = (500 + 1,250 + 3,000) / M = 0.00475.
    assert prices.cost(1_200, 300, cached=1_000) == pytest.approx(0.00475, abs=1e-15)
    assert prices.cost(1_200, 300, cached=1_000, batch=True) == pytest.approx(0.002375)
    # No cached price set: cached tokens cost what other prompt tokens cost (0.006).
    plain = Prices(2.50, 10.00)
    assert plain.cost(1_200, 300, cached=1_000) == plain.cost(1_200, 300) == pytest.approx(0.006)
    with pytest.raises(ValueError, match="more than prompt_tokens"):
        prices.cost(100, 0, cached=101)


def test_the_estimate_counts_openings_shared_with_the_prompt_before() -> None:
    # Two prompts of 4,001 characters sharing their first 4,000; joined as a provider reads
    # them (NUL, role, NUL, content) the shared opening is 6 + 4,000 = 4,006 characters, at 4
    # characters a token floor(1,001.5) = 1,001 tokens; the first prompt has none before it.
    prompts = [[{"role": "user", "content": "a" * 4_000 + end}] for end in "12"]
    prices = Prices(2.50, 10.00, cached_input_per_mtok=0.25, cache_min_tokens=1_000)
    e = estimate(prompts, max_tokens=10, prices=prices)
    assert (e.prompt_tokens, e.cached_prompt_tokens) == (2_001, 1_001)
    # Prompts alone: (1,000 x 2.50 + 1,001 x 0.25) / M = 0.00275025.
    assert e.cost_min_cached == pytest.approx(0.00275025)
    assert e.cost_min == pytest.approx(2_001 * 2.50 / 1e6)
    # An opening shorter than the provider's minimum is not served: none counted.
    short = estimate(prompts, max_tokens=10, prices=Prices(2.5, 10.0, cache_min_tokens=1_024))
    assert short.cached_prompt_tokens == 0 and short.cost_max_cached is None


def test_a_rubric_s_prompts_share_their_opening_byte_for_byte() -> None:
    book = PromptBook(paths.prompts_dir())
    ics = load_rubrics(paths.prompts_dir())["ICS"]
    answers = ["Girls can do maths as well as boys.", "Nobody is good at maths.", "Yes."]
    prompts = [
        book.judge_prompt(ics, [("QUESTION", f"Question {n} about {FACTORS[n]}?"),
                                ("ANSWER", answer)], variant="default").messages
        for n, answer in enumerate(answers)
    ]  # fmt: skip
    assert len({json.dumps(p[0]) for p in prompts}) == 1  # one system message for all
    users = [p[1]["content"] for p in prompts]
    opening = os.path.commonprefix(users)
    # Everything a judgment of ICS shares comes before the texts: the task, the criterion,
    # every score level, the reply format and the note on fenced texts ...
    for shared in (ics.criterion.strip().splitlines()[0], *ics.levels, "Reply with a JSON"):
        assert shared in opening
    assert "Texts to compare" in opening
    # ... and nothing of an item: each user message goes on with its own texts.
    for n, user in enumerate(users):
        assert f"Question {n}" not in opening and f"Question {n}" in user[len(opening) :]
    # The shared part is most of the prompt (system message included).
    whole = [len(p[0]["content"]) + len(p[1]["content"]) for p in prompts]
    assert (len(prompts[0][0]["content"]) + len(opening)) / max(whole) > 0.8


def _expected_cached(bodies: list[dict[str, Any]]) -> list[int]:
    """The stub's rule, written again from its docstring: per request in arrival order, the
    longest opening shared with one of the previous CACHE_KEPT prompts (messages' contents
    joined by newlines), characters // 4, in CACHE_BLOCK blocks, 0 below CACHE_MIN."""
    seen: list[str] = []
    out = []
    for body in bodies:
        text = "\n".join(m.get("content", "") for m in body["messages"])
        shared = max((len(os.path.commonprefix([text, s])) for s in seen), default=0)
        tokens = shared // 4 // CACHE_BLOCK * CACHE_BLOCK
        out.append(tokens if tokens >= CACHE_MIN else 0)
        seen = [*seen, text][-CACHE_KEPT:]
    return out


def test_cached_prompt_tokens_are_stored_summed_and_priced(tmp_path: Path, db_url: str) -> None:
    items = tmp_path / "s1.jsonl"
    s1 = [line for line in SAMPLE.read_text(encoding="utf-8").splitlines() if '"S1"' in line]
    items.write_text("\n".join(s1[:4]) + "\n", encoding="utf-8")
    with StubServer(prompt_cache=True) as stub:
        config = write_config(tmp_path / "c.toml", stub.base_url, db_url)
        text = config.read_text(encoding="utf-8").replace(
            "max_backoff_s = 0.1\n",
            "max_backoff_s = 0.1\ninput_price_per_mtok = 2.0\noutput_price_per_mtok = 8.0\n"
            "cached_input_price_per_mtok = 0.5\ncache_min_prompt_tokens = 64\n",
        )
        config.write_text(text, encoding="utf-8")

        def run(*args: str) -> str:
            result = CliRunner().invoke(cli, ["--config", str(config), *args])
            assert result.exit_code == 0, (result.output, result.exception)
            return result.stdout

        run("dataset", "import", str(items))
        run("generate", "s1")
        before = len(stub.state.bodies)
        dry = json.loads(run("judge", "1", "--dry-run", "--json"))
        assert len(stub.state.bodies) == before  # the dry run sent nothing
        judged = run("judge", "1")
        bodies = stub.state.bodies[before:]
    expected = _expected_cached(bodies)
    # Concurrency 1: the first judge prompt has nothing before it; the next ones share the
    # system message and the rubric's opening with the one before (more than CACHE_MIN).
    assert expected[0] == 0 and all(e >= CACHE_MIN for e in expected[1:])
    prompt = sum(len("\n".join(m["content"] for m in b["messages"])) // 4 for b in bodies)
    engine = make_engine(db_url)
    with Session(engine) as session:
        rows = session.exec(select(Judgment).where(Judgment.judge_run_id == 1)).all()
        assert sum(j.cached_prompt_tokens for j in rows) == sum(expected)
        assert sum(j.prompt_tokens for j in rows) == prompt
        keys = {j.cache_key for j in rows}
        cached_calls = session.exec(select(CallCache).where(CallCache.key.in_(keys))).all()  # type: ignore[attr-defined]
        assert sum(c.cached_prompt_tokens for c in cached_calls) == sum(expected)
        cost = judge_run_cost(session, 1, Prices(2.0, 8.0, cached_input_per_mtok=0.5))
    engine.dispose()
    completion = 5 * len(bodies)  # the stub's 5 completion tokens a reply
    by_hand = ((prompt - sum(expected)) * 2.0 + sum(expected) * 0.5 + completion * 8.0) / 1e6
    assert cost.total.cached_prompt_tokens == sum(expected)
    assert cost.total.cost == pytest.approx(by_hand)
    assert f"({sum(expected):,} from the prompt cache)" in judged
    assert f"cost: {by_hand:.4f}" in judged
    # The dry run foresaw a shared opening for every prompt after the first, at most what
    # was served in the end is not promised (its token count is an estimate from characters).
    estimate_json = dry["estimate"]
    assert estimate_json["cached_prompt_tokens"] > 0
    assert estimate_json["cost_max_cached"] < estimate_json["cost_max"]
