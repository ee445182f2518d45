"""The baseline FairJudge is measured against: a bare ``openai`` AsyncOpenAI loop that sends
the same judge requests to the same endpoint with the same concurrency, and does nothing
else (no store, no cache, no parsing). Run as a subprocess and timed from outside:

    python -m bench.bare_openai BASE_URL REQUESTS_JSONL CONCURRENCY
"""

from __future__ import annotations

import asyncio
import json
import sys

import openai


async def send_all(base_url: str, bodies: list[dict[str, object]], concurrency: int) -> int:
    # openai's default retries, like FairJudge's client: the stub drops an occasional
    # connection at concurrency 128 (the stub counts every attempt).
    client = openai.AsyncOpenAI(base_url=base_url, api_key="unused", max_retries=2)
    gate = asyncio.Semaphore(concurrency)

    async def one(body: dict[str, object]) -> None:
        async with gate:
            await client.chat.completions.create(**body)  # type: ignore[call-overload]

    await asyncio.gather(*(one(b) for b in bodies))
    await client.close()
    return len(bodies)


def main() -> None:
    base_url, path, concurrency = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with open(path, encoding="utf-8") as f:
        bodies = [json.loads(line) for line in f]
    done = asyncio.run(send_all(base_url, bodies, concurrency))
    print(done)


if __name__ == "__main__":
    main()
