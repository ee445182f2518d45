"""BBQ (issue 45), timed as users run it, whole commands as processes of their own.

``bench_bbq_analyze``: ``fairjudge audit bbq analyze --from-file`` on the authors' 11,956
UnifiedQA-11B predictions (the shared data, read by path), once per prediction field: wall
and CPU seconds (target <= 5 s each, start-up included).

``bench_bbq_run``: ``fairjudge audit bbq run`` of the 11,956 prompts against the scripted
stub (200 ms a reply, concurrency 32, every reply a letter), and ``fairjudge judge`` of 2,000
answers against the same stub in the same run: each command's ratio to the ideal
(concurrency / latency calls a second), the audit's beside judge's (target >= 0.9 of it).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from bench.wire import timed, write_config, write_items
from tests.support.factories import BBQ_PREDICTIONS, FAIRJUDGE
from tests.support.stub_openai import StubServer

BBQ = BBQ_PREDICTIONS
N_ITEMS = 11_956
TARGET_ANALYZE_S = 5.0


def bench_bbq_analyze(tmp: Path) -> dict[str, Any]:
    """``audit bbq analyze --from-file`` on the shared predictions, each field once."""
    out: dict[str, Any] = {"target_wall_s": TARGET_ANALYZE_S}
    for field in ("race", "arc", "qonly"):
        command = [
            *FAIRJUDGE,
            "audit",
            "bbq",
            "analyze",
            "--from-file",
            str(BBQ),
            "--predictions",
            field,
            "--json",
        ]
        done = timed(command)
        figures = json.loads(done.stdout)
        if figures["overall"]["items"] != N_ITEMS:
            raise RuntimeError(f"analyze read {figures['overall']['items']} items, not {N_ITEMS}")
        out[field] = {
            "wall_s": round(done.wall_s, 2),
            "cpu_s": round(done.cpu_s, 2),
            "s_amb": round(figures["overall"]["s_amb"]["value"], 4),
            "s_dis": round(figures["overall"]["s_dis"]["value"], 4),
        }
        print(
            f"bbq: analyze --predictions {field} {done.wall_s:.2f} s (target "
            f"{TARGET_ANALYZE_S:.0f})",
            flush=True,
        )
    return out


def _reply(messages: list[dict[str, str]]) -> str | None:
    """A letter for a BBQ prompt; the stub's own answers (echo, valid grades) otherwise."""
    return "B" if "Answer with the letter" in messages[-1]["content"] else None


def _config(path: Path, url: str, db_url: str, concurrency: int) -> Path:
    """bench.wire's config (gen and judge on the stub) plus the model under test's endpoint."""
    write_config(path, url, url, db_url, concurrency)
    with path.open("a", encoding="utf-8") as f:
        f.write(
            f'[endpoints.under_test]\nbase_url = "{url}"\nmodel = "stub-model"\n'
            f"concurrency = {concurrency}\n"
        )
    return path


def bench_bbq_run(
    tmp: Path,
    n: int | None = None,
    judgments: int = 2000,
    concurrency: int = 32,
    latency: float = 0.2,
) -> dict[str, Any]:
    """``audit bbq run`` (the first ``n`` items; None: all) and ``judge`` beside it."""
    ideal = concurrency / latency
    with StubServer(latency=latency, responder=_reply) as stub:
        config = _config(
            tmp / "bbq.toml", stub.base_url, f"sqlite:///{tmp / 'bbq.db'}", concurrency
        )
        base = [*FAIRJUDGE, "--config", str(config)]
        items = write_items(tmp / "items.jsonl", judgments)
        for step in (["dataset", "import", str(items)], ["generate", "items"]):
            subprocess.run([*base, *step], check=True, capture_output=True)
        judged = timed([*base, "judge", "1"])
        before = stub.state.requests
        limit = ["--limit", str(n)] if n else []
        audit = timed(
            [
                *base,
                "audit",
                "bbq",
                "run",
                "--data",
                str(BBQ),
                "--endpoint",
                "under_test",
                *limit,
                "--json",
            ]
        )
        calls = stub.state.requests - before
    shown = json.loads(audit.stdout)
    judge_ratio = judgments / judged.wall_s / ideal
    audit_ratio = calls / audit.wall_s / ideal
    print(
        f"bbq: run of {calls:,} prompts {audit.wall_s:.1f} s, ratio {audit_ratio:.3f} "
        f"(judge {judge_ratio:.3f})",
        flush=True,
    )
    return {
        "prompts": calls,
        "concurrency": concurrency,
        "latency_s": latency,
        "ideal_per_s": ideal,
        "answers": shown["answers"],
        "wall_s": round(audit.wall_s, 2),
        "ratio_to_ideal": round(audit_ratio, 3),
        "cpu_ms_per_prompt": round(audit.cpu_s / max(calls, 1) * 1000, 2),
        "judge_wall_s": round(judged.wall_s, 2),
        "judge_ratio_to_ideal": round(judge_ratio, 3),
        "audit_over_judge": round(audit_ratio / judge_ratio, 3),
    }
