"""A real FairJudge server (``fairjudge serve``: gunicorn plus its job worker) on a free port,
for tests and benchmarks that must talk to it over HTTP."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from email.message import Message
from pathlib import Path
from typing import Any

from tests.support.cli import Done, fairjudge
from tests.support.factories import FAIRJUDGE, free_port


class LiveServer:
    """``with LiveServer(config) as server:`` starts ``fairjudge serve`` (after ``db
    upgrade``) in its own process group, waits up to ``start_s`` for its health route, and
    makes an admin and a member key."""

    def __init__(
        self,
        config: Path,
        *,
        workers: int = 2,
        extra: tuple[str, ...] = (),
        start_s: float = 60.0,
    ) -> None:
        self.config, self.workers, self.extra, self.start_s = config, workers, extra, start_s
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = config.parent / f"serve-{self.port}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.admin_key = self.member_key = ""

    def cli(self, *args: str) -> Done:
        """``fairjudge --config CONFIG ARGS`` on the server's store, run in this process (the
        set-up commands, ``db upgrade`` and ``keys create``, need no process of their own);
        AssertionError with what it printed when it fails."""
        done = fairjudge("--config", self.config, *args)
        assert done.returncode == 0, f"fairjudge {' '.join(args)}: {done.stderr}"
        return done

    def start(self) -> LiveServer:
        self.cli("db", "upgrade")
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [
                    *FAIRJUDGE,
                    "--config",
                    str(self.config),
                    "serve",
                    "--port",
                    str(self.port),
                    "--workers",
                    str(self.workers),
                    *self.extra,
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: kill() reaches every process
            )
        deadline = time.monotonic() + self.start_s
        while True:
            try:
                if self.get("/api/v1/health", key=None)[0] == 200:
                    break
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the server did not start:\n{self.log.read_text()[-3000:]}")
            time.sleep(0.1)
        return self

    def make_keys(self) -> None:
        suffix = str(self.port)
        made = self.cli("keys", "create", "--name", f"admin-{suffix}", "--role", "admin", "--json")
        self.admin_key = json.loads(made.stdout)["key"]
        made = self.cli(
            "keys", "create", "--name", f"member-{suffix}", "--role", "member", "--json"
        )
        self.member_key = json.loads(made.stdout)["key"]

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` to the server's whole process group (web workers and job worker)."""
        assert self.proc is not None
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=30)

    def pids(self) -> list[int]:
        """The processes of the server's process group (gunicorn's arbiter and workers, the
        job worker), read from /proc (Linux)."""
        assert self.proc is not None
        group = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:  # ended meanwhile
                continue
            # Fields after the command name (in parentheses, may hold spaces): state ppid pgrp
            if int(stat[stat.rindex(")") + 2 :].split()[2]) == self.proc.pid:
                group.append(int(entry.name))
        return group

    def rss_bytes(self) -> int:
        """Resident memory of the whole process group now, in bytes (VmRSS summed)."""
        return sum(process_rss(pid) for pid in self.pids())

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.kill(signal.SIGTERM)

    def __enter__(self) -> LiveServer:
        self.start()
        self.make_keys()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def request(
        self, method: str, path: str, body: Any = None, *, key: str | None = ""
    ) -> tuple[int, Any]:
        """``(status, parsed JSON or text)``; ``key=""`` uses the member key, None sends none."""
        status, _, parsed = self.exchange(method, path, body, key=key)
        return status, parsed

    def exchange(
        self, method: str, path: str, body: Any = None, *, key: str | None = ""
    ) -> tuple[int, Message, Any]:
        """``(status, headers, parsed JSON or text)`` of one request (keys as ``request``)."""
        headers = {"Content-Type": "application/json"}
        key = self.member_key if key == "" else key
        if key:
            headers["Authorization"] = f"Bearer {key}"
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(req, timeout=60) as reply:
                status, got, raw = reply.status, reply.headers, reply.read()
        except urllib.error.HTTPError as exc:
            status, got, raw = exc.code, exc.headers, exc.read()
        try:
            return status, got, json.loads(raw)
        except ValueError:
            return status, got, raw.decode()

    def get(self, path: str, *, key: str | None = "") -> tuple[int, Any]:
        return self.request("GET", path, key=key)

    def post(self, path: str, body: Any = None, *, key: str | None = "") -> tuple[int, Any]:
        return self.request("POST", path, body, key=key)

    def wait_job(self, job_id: int, *, timeout: float = 120, until: tuple[str, ...] = ()) -> Any:
        """The job once it is finished, failed or cancelled (or in one of ``until``)."""
        deadline = time.monotonic() + timeout
        while True:
            status, job = self.get(f"/api/v1/jobs/{job_id}")
            assert status == 200, job
            if job["status"] in ("finished", "failed", "cancelled", *until):
                return job
            if time.monotonic() > deadline:
                raise TimeoutError(f"job {job_id} still {job['status']} after {timeout} s: {job}")
            time.sleep(0.1)


def process_rss(pid: int) -> int:
    """A process's resident memory in bytes (VmRSS); 0 once it has ended."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    line = next((x for x in status.splitlines() if x.startswith("VmRSS:")), "VmRSS: 0 kB")
    return int(line.split()[1]) * 1024


def answered_sample(config: Path) -> None:
    """The sample imported as ``fairmonitor_sample`` and answered by the config's endpoint
    (generation run 1 of a new store), in this process, before a server is started on it."""
    from judge.config import load_settings
    from judge.data.datasets import import_items
    from judge.store.engine import make_engine, session_scope
    from server import usecases
    from tests.support.factories import SAMPLE

    settings = load_settings(config)
    engine = make_engine(settings.database_url)
    try:
        with session_scope(engine) as session:
            import_items(session, SAMPLE, "fairmonitor_sample")
        usecases.generate(engine, settings, usecases.GenerateRequest(dataset="fairmonitor_sample"))
    finally:
        engine.dispose()


def stored_judgment_keys(url: str) -> list[tuple[int, str, int]]:
    """(item, rubric, sample) of every stored judgment, read with SQL, not through the API."""
    from sqlalchemy import create_engine
    from sqlmodel import Session, select

    from judge.store.tables import Judgment

    engine = create_engine(url)
    try:
        with Session(engine) as s:
            rows = s.exec(select(Judgment.item_id, Judgment.rubric, Judgment.sample_index)).all()
    finally:
        engine.dispose()
    return [tuple(r) for r in rows]  # type: ignore[misc]
