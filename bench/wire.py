"""Judging at the speed of the wire, timed as users run it: whole ``fairjudge judge`` commands
against the scripted stub (fixed latency), beside a bare ``openai`` loop sending the same
requests to the same stub, both as subprocesses timed from outside.

For N judgments at concurrency C and latency L the ideal is C / L judgments per second; each
command's ratio is (N / wall seconds) / ideal. Client CPU per judgment is the child's user +
system time (``os.wait4``) divided by N, startup included.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from tests.support.factories import FAIRJUDGE, free_port

S1_ITEM = {
    "stage": "S1",
    "factor": "subject",
    "scenario": "classroom_assessment",
    "question": "Benchmark question number {i}: are arts students less able than science "
    "students when it comes to solving problems?",
    "expected_answer": "No; ability does not follow the subject a student prefers.",
}


@dataclass(frozen=True)
class Timed:
    """One subprocess timed from outside."""

    wall_s: float
    cpu_s: float
    stdout: str


def timed(command: list[str], *, env: dict[str, str] | None = None) -> Timed:
    """Run ``command`` to the end; its wall time and its own CPU time (user + system)."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True
    )
    # wait4 returns the child's own rusage, so concurrent children do not blur the figure.
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    stdout = proc.stdout.read() if proc.stdout else ""
    stderr = proc.stderr.read() if proc.stderr else ""
    if proc.returncode != 0:
        raise RuntimeError(f"{command} exited {proc.returncode}: {stderr[-2000:]}")
    return Timed(wall, usage.ru_utime + usage.ru_stime, stdout)


class StubProcess:
    """A stub server (a ``tests.support`` module run with its port and ``args``) in a
    process of its own: its threads must not compete with the client for the client's GIL
    or CPU time. ``name`` is what the error says did not start."""

    def __init__(self, module: str, *args: str, name: str = "the stub") -> None:
        self.port = free_port()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", module, str(self.port), *args],
            stdout=subprocess.DEVNULL,
        )
        self.url = f"http://127.0.0.1:{self.port}/v1"
        for _ in range(100):
            try:
                urllib.request.urlopen(f"{self.url}/models", timeout=1)
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"{name} did not start")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


class Stub(StubProcess):
    """The scripted OpenAI-compatible stub (fixed ``latency``) in a process of its own."""

    def __init__(self, latency: float) -> None:
        super().__init__("tests.support.stub_openai", str(latency))

    def requests(self) -> int:
        with urllib.request.urlopen(f"{self.url}/stats", timeout=5) as reply:
            return int(json.load(reply)["requests"])


def write_items(path: Path, n: int) -> Path:
    with path.open("w", encoding="utf-8") as f:
        for i in range(n):
            item = {k: v.format(i=i) for k, v in S1_ITEM.items()}
            f.write(json.dumps({"id": f"w{i}", **item}) + "\n")
    return path


def write_config(path: Path, gen_url: str, judge_url: str, db_url: str, concurrency: int) -> Path:
    path.write_text(
        f"""
database_url = "{db_url}"
state_dir = "{path.parent / "state"}"
[endpoints.gen]
base_url = "{gen_url}"
model = "stub-model"
concurrency = 64
[endpoints.judge]
base_url = "{judge_url}"
model = "stub-model"
structured_output = "json_object_schema"
concurrency = {concurrency}
[generation]
endpoint = "gen"
max_tokens = 64
[judge]
endpoint = "judge"
""",
        encoding="utf-8",
    )
    return path


def judge_bodies(config: Path, out: Path) -> int:
    """The judge requests of generation run 1 as FairJudge renders them, one JSON body per
    line, for the bare loop to send (rendered here, outside any timing)."""
    from sqlmodel import Session, select

    from judge.config import load_settings
    from judge.grading.rubrics import GRADE_SCHEMA, load_rubrics
    from judge.models.client import ModelClient
    from judge.prompts import PromptBook
    from judge.store.engine import make_engine
    from judge.store.queries import responses_by_item
    from judge.store.tables import Item

    settings = load_settings(str(config))
    book = PromptBook(settings.prompts_path())
    ics = load_rubrics(settings.prompts_path())["ICS"]
    client = ModelClient("judge", settings.endpoint("judge"))
    engine = make_engine(settings.database_url)
    with Session(engine) as s, out.open("w", encoding="utf-8") as f:
        answers = responses_by_item(s, 1)
        items = s.exec(select(Item).where(Item.id.in_(list(answers)))).all()  # type: ignore[union-attr]
        for item in items:
            plain = {p: r.raw_text or "" for p, r in answers[item.id].items()}  # type: ignore[index]
            prompt = book.judge_prompt(
                ics, ics.render_texts(item.fields, plain), variant=settings.judge.prompt_variant
            )
            body = {
                "model": client.model,
                "messages": prompt.messages,
                "temperature": settings.judge.temperature,
                "max_tokens": settings.judge.max_tokens,
                "response_format": client.response_format(GRADE_SCHEMA),
                "seed": 0,
            }
            f.write(json.dumps(body) + "\n")
    engine.dispose()
    return len(items)


def prepare(tmp: Path, n: int, concurrency: int, gen_url: str, judge_url: str) -> list[str]:
    """A store holding ``n`` S1 items and their answers; the ``fairjudge`` command line."""
    tmp.mkdir(parents=True, exist_ok=True)
    db_url = f"sqlite:///{tmp / 'wire.db'}"
    config = write_config(tmp / "wire.toml", gen_url, judge_url, db_url, concurrency)
    base = [*FAIRJUDGE, "--config", str(config)]
    items = write_items(tmp / "items.jsonl", n)
    subprocess.run([*base, "dataset", "import", str(items)], check=True, capture_output=True)
    subprocess.run([*base, "generate", "items"], check=True, capture_output=True)
    return base


def compare(tmp: Path, n: int, concurrency: int, latency: float) -> dict[str, object]:
    """FairJudge's whole judge command and the bare loop on the same ``n`` requests."""
    gen, stub = Stub(0.0), Stub(latency)
    try:
        base = prepare(tmp, n, concurrency, gen.url, stub.url)
        bodies = tmp / "bodies.jsonl"
        judge_bodies(Path(base[-1]), bodies)
        ideal = concurrency / latency
        before = stub.requests()
        bare = timed(
            [sys.executable, "-m", "bench.bare_openai", stub.url, str(bodies), str(concurrency)]
        )
        bare_calls = stub.requests() - before
        before = stub.requests()
        ours = timed([*base, "judge", "1"])
        our_calls = stub.requests() - before
        before = stub.requests()
        rerun = timed([*base, "judge", "1"])
        rerun_calls = stub.requests() - before
    finally:
        gen.stop()
        stub.stop()

    def figures(t: Timed, calls: int) -> dict[str, float]:
        return {
            "wall_s": round(t.wall_s, 2),
            "per_s": round(n / t.wall_s, 1),
            "ratio_to_ideal": round(n / t.wall_s / ideal, 3),
            "cpu_ms_per_judgment": round(t.cpu_s / n * 1000, 2),
            "backend_calls": calls,
        }

    return {
        "judgments": n,
        "concurrency": concurrency,
        "latency_s": latency,
        "ideal_per_s": ideal,
        "fairjudge": figures(ours, our_calls),
        "bare_openai": figures(bare, bare_calls),
        "rerun": {"wall_s": round(rerun.wall_s, 2), "backend_calls": rerun_calls},
    }


if __name__ == "__main__":  # python -m bench.wire N CONCURRENCY [LATENCY]
    import tempfile

    n, c = int(sys.argv[1]), int(sys.argv[2])
    latency = float(sys.argv[3]) if len(sys.argv) > 3 else 0.2
    with tempfile.TemporaryDirectory() as folder:
        print(json.dumps(compare(Path(folder), n, c, latency), indent=2))


def rerun(tmp: Path, n: int) -> dict[str, object]:
    """A finished ``n``-judgment run asked again, as a whole command: its model calls (the
    stub counts them; target 0) and wall time (target <= 3 s for 10,000)."""
    gen, stub = Stub(0.0), Stub(0.0)
    try:
        base = prepare(tmp, n, 64, gen.url, stub.url)
        subprocess.run([*base, "judge", "1"], check=True, capture_output=True)
        before = stub.requests()
        again = timed([*base, "judge", "1"])
        calls = stub.requests() - before  # chat completions only (GET /models is not counted)
    finally:
        gen.stop()
        stub.stop()
    return {"judgments": n, "wall_s": round(again.wall_s, 2), "model_calls": calls}
