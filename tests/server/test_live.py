"""The server as users run it: a real ``fairjudge serve`` (gunicorn and its job worker, in a
process group of their own) on a free port, the scripted stub as the model, over HTTP.

- keys: no key, a wrong key, a revoked key, a member on an admin route, each in the API's
  one error shape; health needs no key;
- 20 concurrent clients for 30 s on the read routes of a judged run: every reply 200 with
  the numbers derived below;
- two judge jobs on one run at once, and the CLI judging a run a server job is judging: one
  judgment per item x rubric x sample, and one model call per judgment.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, func
from sqlmodel import Session, select

from judge.store.tables import Judgment
from tests.support.factories import FAIRJUDGE, write_config
from tests.support.kills import requests_of
from tests.support.live import LiveServer, answered_sample, stored_judgment_keys
from tests.support.stub_openai import StubServer

# The sample's judgments (samples = 1), derived from datasets/fairmonitor_sample.jsonl and
# prompts/rubrics.toml: 18 items in each of S1..S4; S1 and S4 are judged with ICS (36), S2
# with TCS, PCS and ETCS (54), S3 with SBAS (18): 36 + 54 + 18 = 108. The same count as in
# tests/judge/test_durability.py.
JUDGMENTS = 108
BY_RUBRIC = {"ICS": 36, "TCS": 18, "PCS": 18, "ETCS": 18, "SBAS": 18}
# The sample's answers: one for each S1 and S4 item (36), two (A, B) for each S2 and S3 item
# (72): 108, as the generation prompts in prompts/generation.toml ask.
ANSWERS = 108
S2_ITEM = "s2-gender-1"  # an S2 item: one judgment per S2 rubric, 3
CONCURRENCY = 4
CLIENTS = 20
LOAD_S = 30.0


def _config(tmp: Path, stub: StubServer, url: str) -> Path:
    """The stub as model under test and judge; the worker looks for jobs every 0.2 s."""
    return write_config(
        tmp / "fairjudge.toml",
        stub.base_url,
        url,
        concurrency=CONCURRENCY,
        server={"job_poll_s": 0.2},
    )


def _wait_for(condition: Callable[[], bool], what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not within {timeout} s"
        time.sleep(0.05)


def _assert_error(reply: tuple[int, Any], status: int, fragment: str) -> None:
    """The API's one error shape: {"error": {"status": N, "message": "..."}} and nothing else."""
    code, body = reply
    assert code == status, body
    assert isinstance(body, dict) and set(body) == {"error"}, body
    assert set(body["error"]) == {"status", "message"} and body["error"]["status"] == status
    assert fragment in body["error"]["message"], body


# -- a judged run behind a live server, shared by the key and load tests ---------------------


@dataclass(frozen=True)
class Judged:
    server: LiveServer
    url: str
    judge_run: int


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Judged]:
    """The sample answered (in this process) and judged through a server job; the server is
    left running for the tests."""
    tmp = tmp_path_factory.mktemp("live")
    url = f"sqlite:///{tmp / 'fairjudge.db'}"
    with StubServer() as stub:
        config = _config(tmp, stub, url)
        answered_sample(config)
        with LiveServer(config) as server:
            status, job = server.post(
                "/api/v1/jobs", {"kind": "judge", "params": {"generation_run_id": 1}}
            )
            assert status == 201, job
            job = server.wait_job(job["id"])
            assert job["status"] == "finished", job
            # The stub's grades are all readable: every judgment is scored.
            assert job["result"]["summary"]["flags"] == {"scored": JUDGMENTS}, job
            yield Judged(server, url, job["result"]["judge_run_id"])


def test_health_needs_no_key(judged: Judged) -> None:
    status, body = judged.server.get("/api/v1/health", key=None)
    assert status == 200 and body["status"] == "ok"


def _get_with(server: LiveServer, path: str, authorization: str | None) -> tuple[int, Any, Any]:
    """GET ``path`` with this ``Authorization`` header (None: none): status, headers, JSON."""
    headers = {} if authorization is None else {"Authorization": authorization}
    req = urllib.request.Request(server.base + path, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as reply:
            return reply.status, reply.headers, json.loads(reply.read())
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, json.loads(exc.read())


@pytest.mark.parametrize(
    ("authorization", "fragment"),
    [
        (None, "this needs an API key"),
        ("Bearer fj_" + "x" * 43, "unknown API key"),
        ("Bearer ", "this needs an API key"),
        ("Basic {admin}", "this needs an API key"),  # a valid key, but not as a bearer token
    ],
    ids=["no key", "wrong key", "empty bearer", "not bearer"],
)
def test_a_missing_or_wrong_key_is_401(
    judged: Judged, authorization: str | None, fragment: str
) -> None:
    server = judged.server
    header = None if authorization is None else authorization.format(admin=server.admin_key)
    status, headers, body = _get_with(server, "/api/v1/datasets", header)
    _assert_error((status, body), 401, fragment)
    assert headers["WWW-Authenticate"] == 'Bearer realm="fairjudge"'


def test_a_post_without_a_key_queues_nothing(judged: Judged) -> None:
    server = judged.server
    before = server.get("/api/v1/jobs")[1]["total"]
    reply = server.post(
        "/api/v1/jobs", {"kind": "judge", "params": {"generation_run_id": 1}}, key=None
    )
    _assert_error(reply, 401, "this needs an API key")
    assert server.get("/api/v1/jobs")[1]["total"] == before


def test_a_revoked_key_is_401(judged: Judged) -> None:
    server = judged.server
    name = f"to-revoke-{server.port}"
    made = server.cli("keys", "create", "--name", name, "--role", "member", "--json")
    raw = json.loads(made.stdout)["key"]
    assert server.get("/api/v1/datasets", key=raw)[0] == 200  # the key worked before
    server.cli("keys", "revoke", name)
    _assert_error(server.get("/api/v1/datasets", key=raw), 401, "was revoked")


def test_members_may_not_manage_keys_admins_may(judged: Judged) -> None:
    server = judged.server
    _assert_error(server.get("/api/v1/keys"), 403, "only an admin key may do this")
    status, listing = server.get("/api/v1/keys", key=server.admin_key)
    assert status == 200
    names = {k["name"] for k in listing}
    assert {f"admin-{server.port}", f"member-{server.port}"} <= names
    # Keys are never returned, not even to an admin: only their hashes are stored.
    text = str(listing)
    assert server.admin_key not in text and server.member_key not in text


# -- 20 clients for 30 s ---------------------------------------------------------------------


def _load_routes(judged: Judged) -> dict[str, Callable[[Any], bool]]:
    """Read routes of the judged run and what each reply must say. Totals are derived by hand
    from the sample (see JUDGMENTS, BY_RUBRIC); the score filter's count is read with SQL."""
    run = judged.judge_run
    engine = create_engine(judged.url)
    with Session(engine) as s:
        threes = s.exec(select(func.count()).select_from(Judgment).where(Judgment.score == 3)).one()
    engine.dispose()
    assert 0 < threes < JUDGMENTS  # the stub's grades spread over 1..5

    def total(n: int) -> Callable[[Any], bool]:
        return lambda body: isinstance(body, dict) and body.get("total") == n

    j = f"/api/v1/judgments?judge_run={run}"
    return {
        f"{j}&limit=50": total(JUDGMENTS),
        f"{j}&limit=50&offset=100": lambda b: total(JUDGMENTS)(b) and len(b["items"]) == 8,
        f"{j}&rubric=ICS&limit=20": total(BY_RUBRIC["ICS"]),
        f"{j}&rubric=SBAS&status=scored": total(BY_RUBRIC["SBAS"]),
        f"{j}&score=3": total(threes),
        f"{j}&item={S2_ITEM}": total(3),
        "/api/v1/judge-runs": lambda b: total(1)(b) and b["items"][0]["scored"] == JUDGMENTS,
        f"/api/v1/judge-runs/{run}": lambda b: b["scored"] == JUDGMENTS,
        "/api/v1/generation-runs": lambda b: total(1)(b) and b["items"][0]["answers"] == ANSWERS,
        "/api/v1/jobs?kind=judge&status=finished": total(1),
        "/api/v1/datasets": lambda b: [d["items"] for d in b] == [72],
        "/api/v1/datasets/fairmonitor_sample": lambda b: b["stages"]["S2"] == 18,
    }


def test_20_clients_for_30_seconds_get_no_error(judged: Judged) -> None:
    routes = list(_load_routes(judged).items())
    for path, check in routes:  # each route is right once before the load
        status, body = judged.server.get(path)
        assert status == 200 and check(body), (path, status, body)
    stop = time.monotonic() + LOAD_S
    lock = threading.Lock()
    done: list[int] = []
    failures: list[str] = []

    def client(n: int) -> None:
        sent = 0
        while time.monotonic() < stop:
            path, check = routes[(n + sent) % len(routes)]
            try:
                status, body = judged.server.get(path)
                ok = status == 200 and check(body)
                why = f"{path}: {status} {str(body)[:200]}"
            except OSError as exc:  # a refused or dropped connection is an error too
                ok, why = False, f"{path}: {exc!r}"
            sent += 1
            if not ok:
                with lock:
                    failures.append(why)
        with lock:
            done.append(sent)

    with ThreadPoolExecutor(CLIENTS) as pool:
        list(pool.map(client, range(CLIENTS)))
    requests = sum(done)
    assert len(done) == CLIENTS
    assert not failures, f"{len(failures)} of {requests} requests failed: {failures[:5]}"
    # A floor that only a stalled server misses: one request per client per second.
    assert requests >= CLIENTS * LOAD_S, f"only {requests} requests in {LOAD_S} s"
    print(f"{requests} requests from {CLIENTS} clients in {LOAD_S:.0f} s, all 200")


# -- two workers on one run ------------------------------------------------------------------


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest) -> str:
    return str(request.getfixturevalue("db_url" if request.param == "sqlite" else "pg_url"))


# While two workers must overlap, the stub answers slowly: at 2 s a call, 4 at a time, the
# 108 calls would take 54 s, so the first worker still holds the run when the second one
# (a job polled every 0.2 s, or a CLI process starting on a loaded machine) reaches it. Once
# the overlap is seen the stub answers at once and the run finishes.
SLOW_S = 2.0


def _post_judge_job(server: LiveServer) -> int:
    status, job = server.post("/api/v1/jobs", {"kind": "judge", "params": {"generation_run_id": 1}})
    assert status == 201, job
    return int(job["id"])


def _waiting(server: LiveServer, job_id: int) -> bool:
    """Whether the job met a lease on its run and went back to the queue to wait (its error
    says so; waiting is not counted as an attempt, docs/server.md)."""
    error = server.get(f"/api/v1/jobs/{job_id}")[1]["error"] or ""
    return error.startswith("waiting:")


def test_two_judge_jobs_on_one_run_store_each_judgment_once(tmp_path: Path, store_url: str) -> None:
    with StubServer() as stub:
        config = _config(tmp_path, stub, store_url)
        answered_sample(config)
        stub.state.latency = SLOW_S
        with LiveServer(config) as server:
            start = threading.Barrier(2)

            def post(_: int) -> int:
                start.wait()  # both requests at once
                return _post_judge_job(server)

            with ThreadPoolExecutor(2) as pool:
                ids = list(pool.map(post, range(2)))
            # One job meets the other's lease, goes back to the queue and is tried again.
            _wait_for(lambda: any(_waiting(server, i) for i in ids), "a job met the other's lease")
            stub.state.latency = 0.0
            jobs = [server.wait_job(i) for i in ids]
        paid = requests_of(stub, "judge")
    assert [job["status"] for job in jobs] == ["finished", "finished"], jobs
    assert len({job["result"]["judge_run_id"] for job in jobs}) == 1  # one judge run
    keys = stored_judgment_keys(store_url)
    assert len(keys) == len(set(keys)) == JUDGMENTS
    assert paid == JUDGMENTS  # the stub's count: nothing paid twice
    # The jobs' own accounts agree: one made every call, the other found nothing left to do.
    calls = sorted(job["result"]["summary"]["model_calls"] for job in jobs)
    assert calls == [0, JUDGMENTS], jobs


@pytest.mark.parametrize("first", ["job", "cli"])
def test_cli_and_a_server_job_on_one_run_store_each_judgment_once(
    tmp_path: Path, store_url: str, first: str
) -> None:
    """Whichever starts second finds the run's lease held: the CLI says the run is busy and
    exits 1 (nothing judged); a job goes back to the queue, waits, and finishes once the CLI
    is done, with nothing left to pay for. Either way: one judgment per item x rubric x
    sample, and one model call each."""
    with StubServer() as stub:
        config = _config(tmp_path, stub, store_url)
        answered_sample(config)
        judge = [*FAIRJUDGE, "--config", str(config), "judge", "1"]
        stub.state.latency = SLOW_S
        with LiveServer(config) as server:

            def judging() -> bool:  # the first worker holds the lease once it calls the judge
                return requests_of(stub, "judge") > 0

            if first == "job":
                job_id = _post_judge_job(server)
                _wait_for(judging, "the job started judging")
                cli = subprocess.run(judge, capture_output=True, text=True)
                running = server.get(f"/api/v1/jobs/{job_id}")[1]["status"]
                stub.state.latency = 0.0
            else:
                proc = subprocess.Popen(
                    judge, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
                )
                _wait_for(judging, "the CLI started judging")
                job_id = _post_judge_job(server)
                _wait_for(lambda: _waiting(server, job_id), "the job met the CLI's lease")
                stub.state.latency = 0.0
                out, err = proc.communicate(timeout=120)
                cli = subprocess.CompletedProcess(judge, proc.returncode, out, err)
            job = server.wait_job(job_id)
        paid = requests_of(stub, "judge")
    keys = stored_judgment_keys(store_url)
    assert len(keys) == len(set(keys)) == JUDGMENTS
    assert paid == JUDGMENTS  # nothing paid twice
    assert job["status"] == "finished", job
    if first == "job":
        assert running == "running"  # the CLI ran and ended while the job was judging
        assert cli.returncode == 1 and "is being run by process" in cli.stderr, cli.stderr
        assert job["result"]["summary"]["model_calls"] == JUDGMENTS
    else:
        assert cli.returncode == 0, cli.stderr
        assert job["result"]["summary"]["model_calls"] == 0
