"""FairJudge benchmarks (`make bench`), timing whole commands as users run them.

1. Wire (bench/wire.py): 2,000 judgments against the scripted stub (fixed 200 ms latency) at
   concurrency 32 and 128, the whole ``fairjudge judge`` command beside a bare ``openai``
   loop sending the same requests in the same run: ratio to the ideal (concurrency / latency)
   and client CPU per judgment. Target: >= 0.9 of the ideal and >= the bare loop's ratio.
2. Rerun: a finished 10,000-judgment run asked again: 0 model calls, <= 3 s.
3. Startup: ``fairjudge --help`` and light commands, median of 5 starts (target <= 0.3 s).
4. Demo: ``fairjudge demo`` after the install, timed from outside, with its steps (<= 5 min).
5. Embedded (bench/embedded.py): the same ICS judge prompts on the embedded model in-process
   (llama-cpp-python's ``Llama``), through its server with a bare openai client and through
   the ``judge`` use case, same threads and context, alternating order: seconds per judgment,
   tokens/s, the ratios to in-process (target: within 10 %) and the outputs compared.
6. Agreement: all judge-human coefficients, 1,000 bootstrap resamples, 100,000 pairs (<= 5 s).
7. Kills: ``kill -9`` of a judge command at random moments; calls paid twice (<= concurrency
   per kill).
8. Label Studio (bench/labelstudio.py): ``campaign create`` of 12,632 tasks (<= 30 s), ``campaign
   pull`` of 9,882 ratings of 2,234 items by 5 annotators (<= 30 s) and a second pull with
   nothing new (<= 5 s).
9. Server (bench/server.py): ``fairjudge serve`` over HTTP: 100,000 answers imported through
   the API in batches of 5,000 (<= 60 s, peak server RSS <= 500 MB), 2,000 judged by a server
   job against the stub (>= 0.9 of the ideal 160/s), p50/p99 of listing judgments under 20
   concurrent clients.
10. Audits (bench/audits.py): ``fairjudge audit names analyze --from-csv`` on the name
    audit's 168,000 answers from a local stub, a whole process: wall time (<= 60 s) and
    peak RSS (<= 1 GB); then the same 168,000 prompts sent by ``audit names run`` to the stub
    and ``audit show`` of the stored run, timed the same way.
    Part ``audit_plan``: the names dry run of the 168,000 prompts in process (the API's
    dry-run route) and as a whole command.
11. Judge trust (bench/trust.py): ``fairjudge checks counterfactual`` on 2,000 judged
    answers against the stub (200 ms, concurrency 32), a whole command: ratio to the ideal,
    beside ``fairjudge judge``'s ratio on the same answers in the same run (target: the
    audit's >= 0.9 of judge's).
12. Dataset generation (bench/generate.py): ``fairjudge dataset plan`` writing 1,000 items
    with the stub as the item writer (200 ms, concurrency 32, 5 items a call), a whole
    command: items per second as a ratio to the ideal; also 10,000 items, where start-up
    weighs less.
13. Dedupe (bench/dedupe.py): the near-duplicate pass over 12,632 item texts, in batches of
    10 as a plan checks them and all at once (<= 30 s), with the planted duplicates found.
14. Judge-assisted statistics (bench/stats_ppi.py): prediction-powered estimates for 100,000
    judged items with 2,000 human ratings (<= 1 s) and the alt-test on 3 annotators x 1,200
    items (<= 1 s).
15. Celery (bench/celery.py): one judge job of 10,000 judgments (stub at 200 ms) on 1, 2 and
    4 ``fairjudge worker`` processes sharing a run, the endpoint's quota 32 calls per worker
    kept in Redis: throughput, and its ratio to one worker's (targets: >= 1.8 x with two,
    >= 3 x with four); beside it the bare openai loop as 1, 2 and 4 processes on the same
    requests, the machine's ceiling for those ratios.
16. Batch API (bench/batch.py): ``judge RUN --batch`` of 10,000 calls through the batch stub:
    wall time outside the stub's simulated window, and client CPU per call.
17. Dashboard (bench/dashboard.py): time to first byte and full load (Chromium's navigation
    timing) of every page on a 10,000-judgment run with 3 raters: first load, median and
    worst of later loads.
18. Client reply (bench/client_reply.py): the client's CPU per call reading a reply as
    openai's ``ChatCompletion`` and as plain JSON (what it does now), one thread.
19. Fresh pages (bench/fresh_pages.py): after each write path (``ratings import``, an API post
    of ratings, a CLI ``judge``, a judge job) on the 10,000-judgment store with 3 raters, the
    seconds until the worker's warmer has kept the written run's pages, then the first and
    second load of every page of that run and of the big one (target: first loads < 1 s).
20. Chance (bench/chance.py): Gwet's AC1 and Cohen's kappa (the whole judge-human call) with
    1,000 bootstrap resamples on 100,000 pairs, on a 1-5 scale and on a 90 %-pass rubric
    (target <= 1 s each).
21. Qualify (bench/qualify.py): ``checks qualify``'s use case on a 10,000-judgment run
    with 3 x 2,000 ratings, 1,000 bootstrap resamples: the whole qualification, read to
    stored record (target <= 5 s), and a run's standing.
22. Prompt cache (bench/prompt_cache.py): 1,000 judgments against the stub with its prompt
    cache on: prompt tokens, the cached ones, and the run's cost live with no cache, live with
    the cached tokens at the cached price, and at the batch price.
23. BBQ (bench/bbq.py): ``audit bbq analyze --from-file`` on the authors' 11,956 UnifiedQA
    predictions, each of the three fields (target <= 5 s each, a whole process); ``audit bbq
    run`` of the 11,956 prompts against the stub (200 ms, concurrency 32): ratio to the ideal,
    beside ``judge``'s in the same run (target >= 0.9 of it).
24. Gates (bench/gates.py): ``fairjudge gate`` on a file of 50 gates over 5 judge runs, a
    whole command with JUnit XML (target <= 2 s): wall and CPU seconds.
25. Paired (bench/paired.py): the paired table of two 10,000-judgment runs of the same items
    with 1,000 bootstrap resamples (target <= 2 s).
26. Pairwise (bench/pairwise.py): ``fairjudge judgments import`` of Shi et al.'s 27 record
    files (5,184 judgments) into a fresh store, a whole process (target <= 10 s), and
    ``judgments position --json`` of the stored judges.
27. Judge pairs (bench/judge_pairs.py): ``fairjudge judge-pairs`` against the stub (200 ms,
    concurrency 16): ratio to the ideal beside ``judge``'s with as many calls; the rerun.

Results are printed as they come and written to bench/results/latest.json. ``python -m
bench.run wire rerun`` runs only the named parts.
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from bench import wire
from bench.agreement_route import bench_agreement_route
from bench.audits import bench_audit_plan, bench_audits
from bench.bbq import bench_bbq_analyze, bench_bbq_run
from bench.chance import bench_chance
from bench.dedupe import dedupe_bench
from bench.gates import bench_gates
from bench.generate import generate_bench
from bench.judge_pairs import bench_judge_pairs
from bench.labelstudio import bench_labelstudio
from bench.pairwise import bench_pairwise
from bench.qualify import bench_qualify
from bench.server import bench_server
from bench.stats_ppi import bench_stats_ppi
from bench.trust import bench_trust
from tests.support.factories import FAIRJUDGE, SAMPLE, free_port

# The Label Studio venv `fairjudge labelstudio start` (and the tests) install and reuse.
LABELSTUDIO_VENV = Path(__file__).resolve().parents[1] / ".fairjudge" / "labelstudio" / "venv"
N_JUDGMENTS = 2000
LATENCY = 0.2


def bench_wire(tmp: Path) -> dict[str, Any]:
    return {
        f"concurrency_{c}": wire.compare(tmp / f"c{c}", N_JUDGMENTS, c, LATENCY) for c in (32, 128)
    }


def bench_rerun(tmp: Path) -> dict[str, Any]:
    return wire.rerun(tmp / "rerun", 10_000)


def bench_startup(tmp: Path, starts: int = 5) -> dict[str, Any]:
    """Median wall seconds of whole ``fairjudge`` processes that need no heavy library."""
    db = f"sqlite:///{tmp / 'startup.db'}"
    subprocess.run([*FAIRJUDGE, "--db", db, "runs"], check=True, capture_output=True)
    commands = {
        "--help": ["--help"],
        "judge --help": ["judge", "--help"],
        "model status": ["--config", str(tmp / "none.toml"), "model", "status"],
        "runs": ["--db", db, "runs"],
    }
    (tmp / "none.toml").write_text(
        f'state_dir = "{tmp / "state"}"\n[embedded]\nport = {free_port()}\n'
    )
    out = {}
    for name, args in commands.items():
        walls = []
        for _ in range(starts):
            start = time.perf_counter()
            # `model status` exits 1 when no server runs: that is its answer, not a failure
            done = subprocess.run([*FAIRJUDGE, *args], capture_output=True)
            assert done.returncode in (0, 1), done.stderr
            walls.append(time.perf_counter() - start)
        out[name] = round(statistics.median(walls), 3)
    return {"median_wall_s": out, "starts": starts}


def bench_demo(tmp: Path) -> dict[str, Any]:
    """``fairjudge demo`` on a fresh store and port, timed from outside; its steps from its
    own --json summary."""
    config = tmp / "demo.toml"
    port = free_port()
    config.write_text(
        f'''database_url = "sqlite:///{tmp / "demo.db"}"
state_dir = "{tmp / "demo-state"}"
[embedded]
port = {port}
[endpoints.embedded]
base_url = "http://127.0.0.1:{port}/v1"
model = "smollm2-135m-instruct"
structured_output = "json_object_schema"
timeout_s = 300
'''
    )
    start = time.perf_counter()
    done = subprocess.run(
        [*FAIRJUDGE, "--config", str(config), "demo", "--json", "--out", str(tmp / "demo")],
        check=True,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - start
    summary = json.loads(done.stdout[done.stdout.index("{") :])
    return {"wall_s": round(wall, 1), "summary": summary}


def bench_agreement(n_pairs: int = 100_000, n_bootstrap: int = 1000) -> dict[str, float]:
    """All judge-human coefficients with a 1,000-resample bootstrap on 100,000 pairs: judge
    scores 1-5, human scores the mean of three raters. Target <= 5 s."""
    from judge.stats.coefficient import BootstrapOptions
    from judge.stats.pairs import judge_vs_human

    rng = np.random.default_rng(0)
    judge = rng.integers(1, 6, n_pairs).astype(float)
    human = np.clip(judge[:, None] + rng.integers(-2, 3, (n_pairs, 3)), 1, 5).mean(axis=1)
    start = time.perf_counter()
    result = judge_vs_human(judge, human, options=BootstrapOptions(n_bootstrap, seed=0))
    elapsed = time.perf_counter() - start
    return {
        "pairs": n_pairs,
        "bootstrap": n_bootstrap,
        "wall_s": round(elapsed, 3),
        "coefficients": len(result.coefficients),
    }


def bench_kills(tmp: Path, kills: int = 5, concurrency: int = 4) -> dict[str, float]:
    """kill -9 of `fairjudge judge` at 5 random moments of the sample's 108 judgments (stub at
    50 ms, concurrency 4), then a rerun: calls paid twice; target <= concurrency per kill."""
    import random

    from tests.support.factories import FAIRJUDGE, write_config
    from tests.support.kills import kill_at_random_moments, requests_of
    from tests.support.stub_openai import StubServer

    with StubServer(latency=0.05) as stub:
        db_url = f"sqlite:///{tmp / 'kills.db'}"
        config = write_config(tmp / "kills.toml", stub.base_url, db_url, concurrency=concurrency)
        base = [*FAIRJUDGE, "--config", str(config)]
        subprocess.run([*base, "dataset", "import", str(SAMPLE)], check=True, capture_output=True)
        subprocess.run([*base, "generate", "fairmonitor_sample"], check=True, capture_output=True)
        landed = kill_at_random_moments(
            [*base, "judge", "1"], lambda: requests_of(stub, "judge"), random.Random(9), kills
        )
        subprocess.run([*base, "judge", "1"], check=True, capture_output=True)
        paid = requests_of(stub, "judge")
    tasks = 108
    return {
        "kills": landed,
        "judgments": tasks,
        "paid_calls": paid,
        "paid_twice": paid - tasks,
        "bound": concurrency * landed,
    }


def bench_celery(tmp: Path) -> dict[str, Any]:
    from bench.celery import bench_celery as run

    return run(tmp)


def _fresh_pages_bench(tmp: Path) -> dict[str, Any]:
    from bench.fresh_pages import bench_fresh_pages as run

    return run(tmp)


def _dashboard_bench(tmp: Path) -> dict[str, Any]:
    from bench.dashboard import bench_dashboard as run

    return run(tmp)


def _batch_bench(tmp: Path) -> dict[str, Any]:
    from bench.batch import batch_bench

    return batch_bench(tmp)


def _client_reply_bench() -> dict[str, Any]:
    from bench.client_reply import bench_client_reply

    return bench_client_reply()


def _prompt_cache_bench(tmp: Path) -> dict[str, Any]:
    from bench.prompt_cache import bench_prompt_cache

    return bench_prompt_cache(tmp)


def _embedded_bench(tmp: Path) -> dict[str, Any]:
    from bench.embedded import bench_embedded

    return bench_embedded(tmp)


def _paired_bench() -> dict[str, Any]:
    from bench.paired import bench_paired

    return bench_paired()


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # so `finally` blocks stop the servers this bench started


PARTS: dict[str, Callable[[Path], dict[str, Any]]] = {
    "startup": bench_startup,
    "wire": bench_wire,
    "rerun": bench_rerun,
    "agreement": lambda tmp: bench_agreement(),
    "kills": bench_kills,
    "demo": bench_demo,
    "embedded": _embedded_bench,
    "labelstudio": lambda tmp: bench_labelstudio(tmp, LABELSTUDIO_VENV),
    "server": bench_server,
    "agreement_route": bench_agreement_route,
    "audits": bench_audits,
    "audit_plan": bench_audit_plan,
    "trust": bench_trust,
    "generate": lambda tmp: {
        f"items_{n}": generate_bench(tmp / str(n), n=n, concurrency=32, latency=LATENCY)
        for n in (1000, 10_000)
    },
    "dedupe": lambda tmp: dedupe_bench(),
    "stats_ppi": lambda tmp: bench_stats_ppi(),
    "celery": bench_celery,
    "batch": lambda tmp: _batch_bench(tmp),
    "dashboard": lambda tmp: _dashboard_bench(tmp),
    "fresh_pages": lambda tmp: _fresh_pages_bench(tmp),
    "client_reply": lambda tmp: _client_reply_bench(),
    "chance": lambda tmp: bench_chance(),
    "qualify": bench_qualify,
    "prompt_cache": lambda tmp: _prompt_cache_bench(tmp),
    "bbq": lambda tmp: {"analyze": bench_bbq_analyze(tmp), "run": bench_bbq_run(tmp)},
    "paired": lambda tmp: _paired_bench(),
    "gates": bench_gates,
    "pairwise": bench_pairwise,
    "judge_pairs": bench_judge_pairs,
}


def main() -> None:
    signal.signal(signal.SIGTERM, _interrupt)
    wanted = sys.argv[1:] or list(PARTS)
    unknown = [w for w in wanted if w not in PARTS]
    if unknown:
        raise SystemExit(f"unknown part(s) {unknown}; choose from {list(PARTS)}")
    out = Path(__file__).parent / "results"
    out.mkdir(exist_ok=True)
    results: dict[str, Any] = {"machine": {"cpus": os.cpu_count()}}
    with tempfile.TemporaryDirectory() as tmp:
        for name in wanted:
            folder = Path(tmp) / name
            folder.mkdir()
            results[name] = PARTS[name](folder)
            print(json.dumps({name: results[name]}, indent=2), flush=True)
    (out / "latest.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
