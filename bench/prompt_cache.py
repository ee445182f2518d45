"""The cost of 1,000 judgments at live, cached and batch prices (issue 46): one
``fairjudge judge`` command against the stub with its prompt cache on (the stub reports the
opening a prompt shares with an earlier one as cached tokens, as a provider does), at
illustrative prices (2.00 in, 0.50 cached in, 8.00 out per million, batch half price).

What the run paid is read back from the store: its prompt tokens, the cached ones among them,
and the cost live with the cached ones at the cached price, beside what the same tokens cost
with no cache (every prompt token at the input price) and at the batch price.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from bench import wire

PRICES = (
    "input_price_per_mtok = 2.0\noutput_price_per_mtok = 8.0\n"
    "cached_input_price_per_mtok = 0.5\nbatch_discount = 0.5\ncache_min_prompt_tokens = 64\n"
)


def bench_prompt_cache(tmp: Path, n: int = 1000) -> dict[str, Any]:
    """Judge ``n`` answers against the caching stub; the run's tokens and its three costs."""
    from sqlmodel import Session

    from judge.config import load_settings
    from judge.costs import judge_run_cost
    from judge.prices import Prices
    from judge.store.engine import make_engine

    gen = wire.StubProcess("tests.support.stub_openai", "0.0")
    judge = wire.StubProcess("tests.support.stub_openai", "0.0", "cache", name="the caching stub")
    try:
        base = wire.prepare(tmp, n, 32, gen.url, judge.url)
        config = Path(base[-1])
        text = config.read_text(encoding="utf-8")
        config.write_text(text.replace("[generation]", PRICES + "[generation]"), encoding="utf-8")
        took = wire.timed([*base, "judge", "1"])
    finally:
        gen.stop()
        judge.stop()
    settings = load_settings(str(config))
    prices = Prices.of(settings.endpoint("judge"))
    assert prices is not None
    engine = make_engine(settings.database_url)
    with Session(engine) as session:
        total = judge_run_cost(session, 1, prices).total
    engine.dispose()
    prompt, cached, out = total.prompt_tokens, total.cached_prompt_tokens, total.completion_tokens
    return {
        "judgments": total.judgments,
        "wall_s": round(took.wall_s, 2),
        "prompt_tokens": prompt,
        "cached_prompt_tokens": cached,
        "cached_share": round(cached / prompt, 3) if prompt else None,
        "completion_tokens": out,
        "cost_live_no_cache": prices.cost(prompt, out),
        "cost_live_cached": total.cost,
        "cost_batch": total.cost_batch,
        "prices": "2.00 in, 0.50 cached in, 8.00 out per million; batch half price",
    }


if __name__ == "__main__":  # python -m bench.prompt_cache [N]
    import json
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
        print(json.dumps(bench_prompt_cache(Path(folder), n), indent=2))
