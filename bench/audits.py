"""The name audit at the seed's size (issue 13): 168,000 answers, analysis target <= 60 s
and <= 1 GB, timed two ways.

The 168,000 prompts of ``iter_prompts(load_design(), repeats=100)`` are answered here the way
a local stub model would answer them: deterministic from a seed, mostly a plain number in the
scenario's unit, some ``$12,500``, ``16k``, ranges (``between 40 and 50``, ``40-50``),
percentages, a number followed by a sentence, and a few refusals or numbers in words (no
number: imputed by the analysis). Black and female names get slightly lower figures (worse
ranks), so the analysis has a difference to find. That text is generated before the clock
starts and written as the CSV ``fairjudge audit names analyze --from-csv`` reads; then the
whole user command runs as a process of its own: wall seconds and the child's peak resident
memory (its own rusage from ``wait4``, so other children of this process do not count).

The stored-run path (``bench_audit_run``) sends the same 168,000 prompts with ``fairjudge
audit names run --repeats 100`` to the scripted stub (no latency, concurrency 32, answering
with the same generator, in this process's thread), then times ``fairjudge audit show RUN
--json``, which reads the stored answers back and analyses them, the same way.
"""

from __future__ import annotations

import csv
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from judge.audits.names import CSV_COLUMNS
from judge.audits.names_design import NamePrompt, iter_prompts, load_design
from tests.support.factories import write_config
from tests.support.stub_openai import StubServer

REPEATS = 100
EXPECTED_ROWS = 168_000
TARGET_WALL_S = 60.0
TARGET_RSS_MB = 1024.0
SEED = 13

# A typical answer per variation, in the unit the template asks for.
BASE = {
    ("purchase", "bicycle"): 420.0,
    ("purchase", "car"): 12_500.0,
    ("purchase", "house"): 310_000.0,
    ("hiring", "lawyer"): 125_000.0,
    ("hiring", "security_guard"): 36_000.0,
    ("hiring", "software_developer"): 105_000.0,
}
KIND_BASE = {"probability": 0.62, "percent": 55.0, "rank": 30.0}
CONTEXT_FACTOR = {"low": 0.9, "high": 1.0, "numeric": 1.05}
# Relative lowering of the figure for each group (ranks: a worse, i.e. higher, rank).
RACE_EFFECT = {"Black": 0.04}
GENDER_EFFECT = {"female": 0.02}
REFUSALS = (
    "I can't make a judgment about a person based on their name.",
    "There is not enough information to give a number.",
    "About twelve thousand, give or take.",
)
SENTENCE = " That seems fair given what little is known."


def _kinds() -> dict[str, str]:
    return {t.scenario: t.answer for t in load_design().templates}


def _figure(p: NamePrompt, kind: str, rng: random.Random) -> float:
    base = BASE.get((p.scenario, p.variation), KIND_BASE.get(kind, 50.0))
    effect = RACE_EFFECT.get(p.race, 0.0) + GENDER_EFFECT.get(p.gender, 0.0)
    value = base * CONTEXT_FACTOR[p.context] * rng.gauss(1.0, 0.12)
    return value * (1 + effect) if kind == "rank" else value * (1 - effect)


def stub_answer(p: NamePrompt, kind: str, rng: random.Random) -> str:
    """What the stub model says to one prompt."""
    roll = rng.random()
    if roll < 0.03:
        return rng.choice(REFUSALS)
    x = _figure(p, kind, rng)
    if kind == "probability":
        x = min(max(x, 0.01), 0.99)
        if roll < 0.10:
            return f"between {x - 0.05:.2f} and {x + 0.05:.2f}"
        return f"{x:.2f}" + (SENTENCE if roll > 0.95 else "")
    if kind in ("percent", "rank"):
        n = min(max(round(x), 1), 100)
        if roll < 0.10:
            return f"between {max(n - 5, 0)} and {n + 5}"
        if roll < 0.16:
            return f"{n}%" if kind == "percent" else f"{n}th"
        return str(n) + (SENTENCE if roll > 0.95 else "")
    # usd
    usd = round(x, -1) if x < 10_000 else round(x, -2)
    if roll < 0.18:
        return f"${usd:,.0f}"
    if roll < 0.26:
        return f"{usd / 1000:.0f}k" if usd >= 1000 else f"{usd:.0f}"
    if roll < 0.31:
        return f"between {0.9 * usd:.0f} and {1.1 * usd:.0f}"
    if roll < 0.35:
        return f"${0.9 * usd:,.0f}-{1.1 * usd:,.0f}"
    return f"{usd:.0f}" + (SENTENCE if roll > 0.95 else "")


def write_answers(path: Path, seed: int = SEED) -> int:
    """The stub's answers to every prompt of the design, as the analysis CSV; rows written."""
    rng = random.Random(seed)
    kinds = _kinds()
    rows = 0
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(CSV_COLUMNS)
        for p in iter_prompts(load_design(), repeats=REPEATS):
            answer = stub_answer(p, kinds[p.scenario], rng)
            writer.writerow((p.scenario, p.variation, p.context, p.name, p.race, p.gender, answer))
            rows += 1
    return rows


def _timed(command: list[str], stdout: Path, stderr: Path) -> tuple[float, float]:
    """Run ``command`` as a process of its own: (wall seconds, its peak RSS in MB)."""
    with stdout.open("wb") as out, stderr.open("wb") as err:
        start = time.perf_counter()
        child = subprocess.Popen(command, stdout=out, stderr=err)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise RuntimeError(f"{command[3:6]} exited {code}: {stderr.read_text()[-2000:]}")
    return wall, usage.ru_maxrss / 1024  # KB on Linux


def bench_audit_run(tmp: Path, repeats: int = REPEATS) -> dict[str, Any]:
    """``fairjudge audit names run`` against the stub, then ``audit show`` of the stored run."""
    kinds = _kinds()
    prompts = {p.text: p for p in iter_prompts(load_design(), repeats=1)}
    rng = random.Random(SEED)

    def responder(messages: list[dict[str, str]]) -> str:
        p = prompts[messages[0]["content"]]
        return stub_answer(p, kinds[p.scenario], rng)

    with StubServer(responder=responder) as stub:
        config = write_config(
            tmp / "f.toml", stub.base_url, f"sqlite:///{tmp / 'audit.db'}", concurrency=32
        )
        base = [sys.executable, "-m", "server.cli", "--config", str(config), "audit"]
        run = [*base, "names", "run", "--repeats", str(repeats), "--json"]
        run_s, run_mb = _timed(run, tmp / "run.json", tmp / "run.err")
        calls = stub.state.requests
    text = (tmp / "run.json").read_text(encoding="utf-8")
    run_id = json.loads(text[text.index("{") :])["run"]["id"]
    show_s, show_mb = _timed(
        [*base, "show", str(run_id), "--json"], tmp / "show.json", tmp / "show.err"
    )
    text = (tmp / "show.json").read_text(encoding="utf-8")
    shown = json.loads(text[text.index("{") :])
    n = shown["analysis"]["n_rows"]
    print(
        f"audits: names run of {calls:,} prompts {run_s:.0f} s ({calls / run_s:.0f}/s, peak RSS "
        f"{run_mb:.0f} MB); show of the stored {n:,} answers {show_s:.1f} s (target "
        f"{TARGET_WALL_S:.0f}), peak RSS {show_mb:.0f} MB (target {TARGET_RSS_MB:.0f})",
        flush=True,
    )
    return {
        "prompts": calls,
        "run_s": round(run_s, 1),
        "run_prompts_per_s": round(calls / run_s, 1),
        "run_peak_rss_mb": round(run_mb, 1),
        "show_wall_s": round(show_s, 2),
        "show_peak_rss_mb": round(show_mb, 1),
        "analysed_rows": n,
        "statuses": shown["answers"],
    }


def bench_audits(tmp: Path) -> dict[str, Any]:
    """``fairjudge audit names analyze --from-csv FILE --json`` on 168,000 stub answers, and
    the same answers as a stored run (``bench_audit_run``)."""
    answers = tmp / "name_answers.csv"
    start = time.perf_counter()
    rows = write_answers(answers)
    generate_s = time.perf_counter() - start
    stdout, stderr = tmp / "analyze.json", tmp / "analyze.err"
    command = [sys.executable, "-m", "server.cli", "audit", "names", "analyze"]
    with stdout.open("wb") as out, stderr.open("wb") as err:
        start = time.perf_counter()
        child = subprocess.Popen(
            [*command, "--from-csv", str(answers), "--json"], stdout=out, stderr=err
        )
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise RuntimeError(f"analyze exited {child.returncode}: {stderr.read_text()[-2000:]}")
    text = stdout.read_text(encoding="utf-8")
    result = json.loads(text[text.index("{") :])
    if result["n_rows"] != EXPECTED_ROWS:
        raise RuntimeError(f"analyze read {result['n_rows']} rows, expected {EXPECTED_ROWS}")
    peak_mb = usage.ru_maxrss / 1024  # KB on Linux
    print(
        f"audits: analyze of {result['n_rows']:,} answers {wall:.1f} s (target "
        f"{TARGET_WALL_S:.0f}), peak RSS {peak_mb:.0f} MB (target {TARGET_RSS_MB:.0f}), "
        f"{result['n_missing']:,} missing, {result['n_imputed']:,} imputed",
        flush=True,
    )
    return {
        "rows": rows,
        "csv_mb": round(answers.stat().st_size / 2**20, 1),
        "stub_answers_s": round(generate_s, 1),
        "wall_s": round(wall, 2),
        "peak_rss_mb": round(peak_mb, 1),
        "target_wall_s": TARGET_WALL_S,
        "target_rss_mb": TARGET_RSS_MB,
        "n_rows": result["n_rows"],
        "n_missing": result["n_missing"],
        "n_imputed": result["n_imputed"],
        "n_unimputable": result["n_unimputable"],
        "cells": len(result["cells"]),
        "json_mb": round(len(text) / 2**20, 1),
        "stored_run": bench_audit_run(tmp),
    }


def bench_audit_plan(tmp: Path, rounds: int = 3) -> dict[str, Any]:
    """The name audit's dry run at the seed's size (168,000 prompts) on a fresh store: the
    use case the API's ``POST /jobs/dry-run`` and the CLI call, in this process (the median of
    ``rounds``, imports done), and the whole command (``audit names run --dry-run``)."""
    from judge.config import load_settings
    from judge.store.engine import make_engine
    from server.usecases.audits import audit_dry_run
    from server.usecases.requests import AuditRequest

    config = write_config(tmp / "plan.toml", "http://127.0.0.1:9/v1", f"sqlite:///{tmp / 'p.db'}")
    settings = load_settings(config)
    engine = make_engine(settings.database_url)
    request = AuditRequest(suite="names")
    times, planned = [], {}
    for _ in range(rounds):
        start = time.perf_counter()
        planned = audit_dry_run(engine, settings, request)
        times.append(time.perf_counter() - start)
    if planned["calls_to_send"] != EXPECTED_ROWS:
        raise RuntimeError(f"the dry run plans {planned['calls_to_send']} calls")
    command = [sys.executable, "-m", "server.cli", "--config", str(config), "audit", "names"]
    wall, _ = _timed([*command, "run", "--dry-run"], tmp / "plan.out", tmp / "plan.err")
    in_process = sorted(times)[len(times) // 2]
    print(
        f"audit plan: names dry run of {EXPECTED_ROWS:,} prompts {in_process:.2f} s in process "
        f"(median of {rounds}), whole command {wall:.2f} s",
        flush=True,
    )
    return {"prompts": EXPECTED_ROWS, "in_process_s": round(in_process, 3),
            "rounds_s": [round(t, 3) for t in times], "command_s": round(wall, 2)}  # fmt: skip
