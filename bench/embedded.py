"""The embedded model's judging against llama.cpp's own speed (issue 46): the same judge
prompts, the same model file, threads and context, timed three ways in one sitting.

(a) In-process: ``llama_cpp.Llama(...).create_chat_completion(**kwargs)`` in this process,
    where ``kwargs`` is what llama-cpp-python's server itself hands that method for the very
    request body (its request model fills in the sampling defaults the body leaves out:
    ``repeat_penalty``, ``top_k`` ...; ``response_format`` becomes a grammar inside the
    method, as in the server).
(b) Server, bare client: the embedded server started by FairJudge's own ``EmbeddedServer``,
    the same bodies sent with a bare ``openai`` client, one at a time.
(c) FairJudge: the ``judge`` use case (what ``fairjudge judge`` calls) on a fresh copy of the
    store, against the same server.

The prompts are real ICS rubric prompts: sample items of stages S1 and S4 with the sample's
model answer imported as the answer to judge. A first, untimed ``judge`` pass records the
bodies FairJudge posts (``ModelClient._post``), so (a) and (b) send byte-identical requests
(response_format with the grade schema, max_tokens, temperature, seed). Every timed (c) pass
records its bodies again and the bench checks they are the same.

Not timed: importing the items and answers, starting the server, loading the in-process
model, the warm-up pass, copying the store. Timed: each way's pass over all prompts, in
rounds whose order alternates (a b c, then c b a). Reported per way: seconds per judgment,
prompt and completion tokens per second of wall time (tokens from the replies' usage), the
time llama.cpp itself spent (its own perf counters in-process, its timing lines in the
server's log), the ratios (b)/(a) and (c)/(a), and whether every pass returned the same
completion texts as (a)'s first pass.

    python -m bench.embedded [N] [ROUNDS]
"""

from __future__ import annotations

import json
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from judge.config import EmbeddedConfig, Settings
from judge.models import client as model_client
from judge.models.embedded import EmbeddedServer, find_model_file
from tests.support.factories import SAMPLE, free_port

ORDERS = (("inprocess", "server", "judge"), ("judge", "server", "inprocess"))
"""Each round's order; rounds past the second repeat these."""
DATASET = "embedded-bench"
_TIMING = "prompt eval time"


@dataclass
class Pass:
    """One way's pass over all prompts."""

    way: str
    round: int
    wall_s: float = 0.0
    texts: list[str | None] = field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    llama_prompt_ms: float = 0.0
    llama_prompt_tokens: int = 0
    llama_eval_ms: float = 0.0
    llama_eval_tokens: int = 0
    process_cpu_s: float = 0.0
    """This process's CPU seconds during the pass, all threads (in-process: llama.cpp's own)."""


def sample_items(n: int) -> list[dict[str, Any]]:
    """The first ``n // 2`` S1 and the first ``n - n // 2`` S4 items of the sample (the two
    stages judged on ICS), in the sample's order."""
    want = {"S1": n // 2, "S4": n - n // 2}
    out: list[dict[str, Any]] = []
    for line in SAMPLE.read_text(encoding="utf-8").splitlines():
        item = json.loads(line)
        if want.get(item["stage"], 0) > 0:
            want[item["stage"]] -= 1
            out.append(item)
    return out


def prepare_store(tmp: Path, n: int) -> tuple[Path, int]:
    """A store holding ``n`` sample items and their imported answers; (file, generation run)."""
    from judge.data.datasets import import_items
    from judge.data.responses import import_responses
    from judge.store.engine import make_engine, session_scope

    items = sample_items(n)
    path = tmp / "items.jsonl"
    path.write_text("".join(json.dumps(i) + "\n" for i in items), encoding="utf-8")
    db = tmp / "template.db"
    engine = make_engine(f"sqlite:///{db}")
    with session_scope(engine) as session:
        import_items(session, path, DATASET)
    rows = [{"item_id": i["id"], "part": "answer", "text": i["expected_answer"]} for i in items]
    done = import_responses(engine, DATASET, rows, model="sample-answers")
    engine.dispose()
    return db, done.generation_run_id


def recording() -> tuple[list[tuple[dict[str, Any], Any]], Callable[[], None]]:
    """Record every (body, reply JSON) FairJudge's model client posts from now on; and the
    function that stops recording."""
    calls: list[tuple[dict[str, Any], Any]] = []
    original = model_client.ModelClient._post

    def post(self: model_client.ModelClient, body: dict[str, Any]) -> Any:
        response = original(self, body)
        calls.append((body, response.json()))
        return response

    model_client.ModelClient._post = post  # type: ignore[method-assign]

    def stop() -> None:
        model_client.ModelClient._post = original  # type: ignore[method-assign]

    return calls, stop


def judge_pass(
    tmp: Path, template: Path, gen_run: int, settings: Settings, name: str
) -> tuple[float, list[tuple[dict[str, Any], Any]]]:
    """The judge use case on a fresh copy of the store: wall seconds and the calls it posted."""
    from judge.store.engine import make_engine
    from server import usecases

    db = tmp / f"{name}.db"
    shutil.copyfile(template, db)
    engine = make_engine(f"sqlite:///{db}")
    run_settings = settings.model_copy(update={"database_url": f"sqlite:///{db}"})
    calls, stop = recording()
    try:
        start = time.perf_counter()
        usecases.judge(engine, run_settings, usecases.JudgeRequest(generation_run_id=gen_run))
        wall = time.perf_counter() - start
    finally:
        stop()
        engine.dispose()
    return wall, calls


def server_kwargs(body: dict[str, Any]) -> dict[str, Any]:
    """What llama-cpp-python's server passes to ``Llama.create_chat_completion`` for ``body``
    (llama_cpp/server/app.py, ``create_chat_completion``: the request model dumped less the
    fields it excludes)."""
    from llama_cpp.server.types import CreateChatCompletionRequest

    request = CreateChatCompletionRequest.model_validate(body)
    return request.model_dump(exclude={"n", "logit_bias_type", "user", "min_tokens"})


def _add_usage(p: Pass, usage: dict[str, Any] | None) -> None:
    usage = usage or {}
    p.prompt_tokens += int(usage.get("prompt_tokens") or 0)
    p.completion_tokens += int(usage.get("completion_tokens") or 0)


def _text(reply: dict[str, Any]) -> str | None:
    return reply["choices"][0]["message"].get("content")


def inprocess_pass(llama: Any, bodies: list[dict[str, Any]], p: Pass) -> None:
    import llama_cpp

    requests = [server_kwargs(b) for b in bodies]  # not timed: the server's parsing is (b)'s
    for kwargs in requests:
        llama_cpp.llama_perf_context_reset(llama.ctx)
        start = time.perf_counter()
        reply = llama.create_chat_completion(**kwargs)
        p.wall_s += time.perf_counter() - start
        perf = llama_cpp.llama_perf_context(llama.ctx)
        p.llama_prompt_ms += perf.t_p_eval_ms
        p.llama_prompt_tokens += perf.n_p_eval
        p.llama_eval_ms += perf.t_eval_ms
        p.llama_eval_tokens += perf.n_eval
        p.texts.append(_text(reply))
        _add_usage(p, reply.get("usage"))


def server_pass(base_url: str, bodies: list[dict[str, Any]], p: Pass) -> None:
    import openai

    client = openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0, timeout=300)
    for body in bodies:
        start = time.perf_counter()
        reply = client.chat.completions.create(**body)
        p.wall_s += time.perf_counter() - start
        p.texts.append(reply.choices[0].message.content)
        if reply.usage is not None:
            p.prompt_tokens += reply.usage.prompt_tokens
            p.completion_tokens += reply.usage.completion_tokens
    client.close()


def add_log_timings(p: Pass, log_text: str) -> None:
    """llama.cpp's own timing lines (``prompt eval time = MS ms / N tokens``, ``eval time =
    MS ms / N runs``) that the server logged during ``p``."""
    from judge.models.embedded import _EVAL_LINE, _PROMPT_LINE

    for line in log_text.splitlines():
        if match := _PROMPT_LINE.match(line):
            p.llama_prompt_ms += float(match[1])
            p.llama_prompt_tokens += int(match[2])
        elif match := _EVAL_LINE.match(line):
            p.llama_eval_ms += float(match[1])
            p.llama_eval_tokens += int(match[2])


def summary(p: Pass, n: int) -> dict[str, Any]:
    return {
        "round": p.round,
        "wall_s": round(p.wall_s, 2),
        "s_per_judgment": round(p.wall_s / n, 3),
        "prompt_tokens_per_s": round(p.prompt_tokens / p.wall_s, 1),
        "completion_tokens_per_s": round(p.completion_tokens / p.wall_s, 1),
        "process_cpu_s": round(p.process_cpu_s, 2),
        "llama_cpp_s": round((p.llama_prompt_ms + p.llama_eval_ms) / 1000, 2),
        "llama_cpp_prompt_tokens_evaluated": p.llama_prompt_tokens,
        "llama_cpp_prompt_tokens_per_s": round(1000 * p.llama_prompt_tokens / p.llama_prompt_ms, 1)
        if p.llama_prompt_ms
        else None,
        "llama_cpp_generated_tokens_per_s": round(1000 * p.llama_eval_tokens / p.llama_eval_ms, 1)
        if p.llama_eval_ms
        else None,
    }


def bench_embedded(tmp: Path, n: int = 8, rounds: int = 2) -> dict[str, Any]:
    """``n`` ICS judge prompts timed in-process, through the server and through ``judge``,
    ``rounds`` rounds in alternating order; see the module's docstring."""
    import llama_cpp

    config = EmbeddedConfig(port=free_port())
    threads = config.n_threads_batch or config.n_threads
    # Both sides read the prompt with the same threads (0 would mean every core on the server
    # and llama-cpp-python's own default in-process).
    config = config.model_copy(update={"n_threads_batch": threads})
    template, gen_run = prepare_store(tmp, n)
    server = EmbeddedServer(config, tmp / "state")
    server.start()
    llama = None
    try:
        settings = Settings.model_validate(
            {
                "database_url": f"sqlite:///{template}",
                "endpoints": {
                    "embedded": {
                        "base_url": server.base_url,
                        "model": config.model_alias,
                        "structured_output": "json_object_schema",
                        "concurrency": 1,
                        "timeout_s": 300,
                    }
                },
            }
        )
        llama = llama_cpp.Llama(
            model_path=str(find_model_file(config)),
            n_ctx=config.n_ctx,
            n_threads=config.n_threads,
            n_threads_batch=threads,
            logits_all=config.logits_all,
            verbose=False,
        )
        _say(f"server up, model loaded; warm-up judge pass of {n} prompts")
        _, warm = judge_pass(tmp, template, gen_run, settings, "warm-up")
        bodies = [body for body, _ in warm]
        for body in bodies[:2]:  # the in-process model's warm-up
            llama.create_chat_completion(**server_kwargs(body))
        passes: list[Pass] = []
        same_bodies = True
        for r in range(rounds):
            for way in ORDERS[r % len(ORDERS)]:
                p = Pass(way, r + 1)
                log_start = server.log_file.stat().st_size
                cpu_start = time.process_time()
                if way == "inprocess":
                    inprocess_pass(llama, bodies, p)
                elif way == "server":
                    server_pass(server.base_url, bodies, p)
                else:
                    p.wall_s, calls = judge_pass(tmp, template, gen_run, settings, f"r{r}")
                    same_bodies &= [b for b, _ in calls] == bodies
                    p.texts = [_text(reply) for _, reply in calls]
                    for _, reply in calls:
                        _add_usage(p, reply.get("usage"))
                p.process_cpu_s = time.process_time() - cpu_start
                if way != "inprocess":
                    with server.log_file.open("rb") as log:
                        log.seek(log_start)
                        add_log_timings(p, log.read().decode("utf-8", errors="replace"))
                passes.append(p)
                _say(f"{way} round {r + 1}: {p.wall_s:.1f} s")
        return report(passes, bodies, same_bodies, config)
    finally:
        if llama is not None:
            llama.close()
        server.stop()


def _say(text: str) -> None:
    print(f"[embedded] {text}", file=sys.stderr, flush=True)


def report(
    passes: list[Pass], bodies: list[dict[str, Any]], same_bodies: bool, config: EmbeddedConfig
) -> dict[str, Any]:
    n = len(bodies)
    reference = next(p for p in passes if p.way == "inprocess").texts
    wall = {w: sum(p.wall_s for p in passes if p.way == w) for w in ORDERS[0]}
    return {
        "judgments": n,
        "rounds": max(p.round for p in passes),
        "threads": {"n_threads": config.n_threads, "n_threads_batch": config.n_threads_batch},
        "n_ctx": config.n_ctx,
        "request": {k: v for k, v in bodies[0].items() if k not in ("messages",)},
        "passes": {f"{p.way}_{p.round}": summary(p, n) for p in passes},
        "s_per_judgment": {w: round(wall[w] / (n * len(passes) / 3), 3) for w in wall},
        "server_over_inprocess": round(wall["server"] / wall["inprocess"], 3),
        "judge_over_inprocess": round(wall["judge"] / wall["inprocess"], 3),
        "judge_over_server": round(wall["judge"] / wall["server"], 3),
        "median_prompt_chars": statistics.median(
            len("".join(m["content"] for m in b["messages"])) for b in bodies
        ),
        "judge_sent_the_recorded_bodies": same_bodies,
        "texts_equal_to_inprocess": {
            f"{p.way}_{p.round}": sum(a == b for a, b in zip(p.texts, reference, strict=True))
            for p in passes
        },
    }


if __name__ == "__main__":  # python -m bench.embedded [N] [ROUNDS]
    import signal
    import tempfile

    from bench.run import _interrupt

    signal.signal(signal.SIGTERM, _interrupt)  # so `finally` stops the model server
    with tempfile.TemporaryDirectory() as folder:
        args = [int(a) for a in sys.argv[1:3]]
        print(json.dumps(bench_embedded(Path(folder), *args), indent=2))
