"""FairJudge benchmarks (`make bench`): judge throughput, resume cost, embedded model speed.

1. Throughput: 2,000 judgments against the scripted stub with a fixed 200 ms latency at
   concurrency 32. Ideal: 32 / 0.2 s = 160 judgments per second; target >= 90 % of it.
2. Resume: the same finished 2,000-judgment run asked again; target 0 backend calls, <= 5 s.
3. Agreement: all judge-human coefficients, 1,000 bootstrap resamples, 100,000 pairs (<= 5 s).
4. Embedded model: judgments per minute through the whole judge path vs the model server's own
   speed on the same requests sent directly over HTTP.

The stub runs in its own process so its threads do not compete with the client for the GIL.
Results are printed and written to bench/results/latest.json.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np
from sqlmodel import Session, select

from judge.config import EmbeddedConfig, Settings
from judge.data.catalog import import_items
from judge.grading.rubrics import GRADE_SCHEMA, load_rubrics
from judge.models.embedded import EmbeddedServer
from judge.prompts import PromptBook
from judge.store.engine import make_engine, session_scope
from judge.store.queries import responses_by_item
from judge.store.tables import Item
from server import services
from tests.support.factories import SAMPLE, free_port

N_JUDGMENTS = 2000
CONCURRENCY = 32
LATENCY = 0.2


def start_stub(latency: float) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.support.stub_openai", str(port), str(latency)],
        stdout=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/v1"
    for _ in range(100):
        try:
            urllib.request.urlopen(f"{url}/models", timeout=1)
            return proc, url
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("stub did not start")


def stub_requests(url: str) -> int:
    with urllib.request.urlopen(f"{url}/stats", timeout=5) as reply:
        return int(json.load(reply)["requests"])


def settings_for(gen_url: str, judge_url: str, db_url: str, concurrency: int) -> Settings:
    endpoint = {
        "model": "stub-model",
        "structured_output": "json_object_schema",
        "concurrency": concurrency,
        "timeout_s": 30,
    }
    return Settings.model_validate(
        {
            "database_url": db_url,
            "endpoints": {
                "gen": {**endpoint, "base_url": gen_url},
                "judge": {**endpoint, "base_url": judge_url},
            },
            "generation": {"endpoint": "gen"},
            "judge": {"endpoint": "judge"},
        }
    )


def synthetic_items(path: Path, n: int) -> Path:
    with path.open("w") as f:
        for i in range(n):
            f.write(
                json.dumps(
                    {
                        "id": f"b{i}",
                        "stage": "S1",
                        "factor": "subject",
                        "scenario": "classroom_assessment",
                        "question": f"Benchmark question number {i}: are arts students less able?",
                        "expected_answer": "No; ability does not follow subject preference.",
                    }
                )
                + "\n"
            )
    return path


def bench_stub(tmp: Path) -> dict[str, float]:
    gen_proc, gen_url = start_stub(0.0)
    judge_proc, judge_url = start_stub(LATENCY)
    try:
        db_url = f"sqlite:///{tmp / 'bench.db'}"
        engine = make_engine(db_url)
        settings = settings_for(gen_url, judge_url, db_url, CONCURRENCY)
        with session_scope(engine) as session:
            import_items(session, synthetic_items(tmp / "items.jsonl", N_JUDGMENTS), "bench")
        gen = services.generate(engine, settings, "bench")
        start = time.perf_counter()
        first = services.judge(engine, settings, gen.run_id)
        elapsed = time.perf_counter() - start
        calls_before = stub_requests(judge_url)
        start = time.perf_counter()
        again = services.judge(engine, settings, gen.run_id)
        resume_s = time.perf_counter() - start
        backend_calls = stub_requests(judge_url) - calls_before
        assert first.flags == {"scored": N_JUDGMENTS}, first.flags
        ideal = CONCURRENCY / LATENCY
        return {
            "judgments": first.tasks,
            "judge_wall_s": round(elapsed, 2),
            "judgments_per_s": round(first.tasks / elapsed, 1),
            "ideal_per_s": ideal,
            "ratio_to_ideal": round(first.tasks / elapsed / ideal, 3),
            "resume_tasks": again.tasks,
            "resume_backend_calls": backend_calls,
            "resume_model_calls_reported": again.model_calls,
            "resume_wall_s": round(resume_s, 3),
        }
    finally:
        gen_proc.terminate()
        judge_proc.terminate()


def bench_embedded(tmp: Path, n_items: int = 8) -> dict[str, float]:
    config = EmbeddedConfig(port=free_port())
    server = EmbeddedServer(config, tmp / "state")
    server.start()
    try:
        db_url = f"sqlite:///{tmp / 'embedded.db'}"
        engine = make_engine(db_url)
        endpoint = {
            "base_url": server.base_url,
            "model": config.model_alias,
            "structured_output": "json_object_schema",
            "concurrency": 1,
        }
        settings = Settings.model_validate(
            {
                "database_url": db_url,
                "endpoints": {"embedded": endpoint},
                "generation": {"max_tokens": 64},
            }
        )
        with session_scope(engine) as session:
            import_items(session, SAMPLE, "sample")
        gen = services.generate(engine, settings, "sample", limit=n_items)
        start = time.perf_counter()
        summary = services.judge(engine, settings, gen.run_id)
        pipeline_s = time.perf_counter() - start
        # The same judge requests sent straight to the server, one at a time.
        book = PromptBook(settings.prompts_path())
        ics = load_rubrics(settings.prompts_path())["ICS"]
        with Session(engine) as s:
            answers = responses_by_item(s, gen.run_id)
            items = s.exec(select(Item).where(Item.id.in_(list(answers)))).all()  # type: ignore[union-attr]
            requests = [
                book.judge_prompt(
                    ics,
                    ics.render_texts(
                        i.fields, {p: r.raw_text or "" for p, r in answers[i.id].items()}
                    ),
                    variant="plain",
                )
                for i in items
                if i.stage in ("S1", "S4")
            ]
        start = time.perf_counter()
        for prompt in requests:
            body = json.dumps(
                {
                    "model": config.model_alias,
                    "messages": prompt.messages,
                    "temperature": 0.0,
                    "max_tokens": 320,
                    "response_format": {"type": "json_object", "schema": GRADE_SCHEMA},
                }
            ).encode()
            req = urllib.request.Request(
                f"{server.base_url}/chat/completions",
                data=body,
                headers={"Content-Type": "application/json"},
            )
            urllib.request.urlopen(req, timeout=300).read()
        direct_s = time.perf_counter() - start
        per_min_pipeline = summary.tasks / pipeline_s * 60
        per_min_direct = len(requests) / direct_s * 60
        return {
            "judgments": summary.tasks,
            "pipeline_wall_s": round(pipeline_s, 2),
            "pipeline_per_min": round(per_min_pipeline, 1),
            "direct_requests": len(requests),
            "direct_wall_s": round(direct_s, 2),
            "direct_per_min": round(per_min_direct, 1),
            "pipeline_vs_direct": round(per_min_pipeline / per_min_direct, 3),
            "model_calls": summary.model_calls,
        }
    finally:
        server.stop()


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


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # so `finally` blocks stop the servers this bench started


def main() -> None:
    signal.signal(signal.SIGTERM, _interrupt)
    out = Path(__file__).parent / "results"
    out.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        results = {"agreement": bench_agreement(), "stub": bench_stub(Path(tmp))}
        results["kills"] = bench_kills(Path(tmp))
        print(json.dumps(results, indent=2), flush=True)
        results["embedded"] = bench_embedded(Path(tmp))
    (out / "latest.json").write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
