"""Schemathesis, every check it has, against a real ``fairjudge serve`` (gunicorn) over HTTP,
on SQLite and on PostgreSQL: the served OpenAPI document must tell the truth about every reply,
and no request, however malformed, may get a server error.

The jobs schemathesis queues do run on the server's worker, but the stub endpoint's quota is
one call a minute (``requests_per_minute``, set once the store is filled): unthrottled, they
ran in the background for the rest of the test, a names audit job being the full design of
168,000 calls to the stub, and took a core from the rest of the suite while checking nothing
of the HTTP contract. Jobs that run to the end are tested in tests/server/jobs and
tests/server/test_live.py.

The store holds the sample (72 items), the stub's answers to its 18 S1 items and their judge
run, so that reads find rows. Every operation runs with a member key (admin-only ones end in
403 once their request is valid); the admin-only operations run again with an admin key.
Label Studio is not running (campaign routes answer 424, as documented).

Two checks are told what else counts as expected, in a config file written below, each for
a reason the document states:

- ``positive_data_acceptance`` (a request the schema allows must be accepted): also 400,
  the status of rules a JSON schema cannot express (a rubric file that is not valid TOML,
  an option the chosen audit suite does not have, an item key the dataset lacks), and 424,
  Label Studio or an endpoint being down;
- ``negative_data_rejection`` (a request the schema forbids must be refused): also 413
  and 414, which refuse it before it is read.

Bounded to fit in ``make test``: 50 examples per operation and phase, a fixed seed (the same
requests on every run, so a failure in CI fails on a laptop too). The phases are shared out
between the two databases rather than all run on both: the examples phase runs on both; the
coverage phase (boundary and malformed values of every parameter, the request's own shape:
what the HTTP layer answers before any query) runs on SQLite only, where it took 330 of the
480 s of the whole SQLite run (2026-12-03); fuzzing and the stateful phase (links between
operations) run on PostgreSQL, where ids and text are strictest. All four on SQLite ran past
the 540 s limit on a loaded machine.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest

from judge.config import load_settings
from judge.data.datasets import import_items
from judge.store.engine import make_engine, session_scope
from server import usecases
from tests.support.factories import SAMPLE, write_config
from tests.support.live import LiveServer
from tests.support.stub_openai import StubServer

pytestmark = pytest.mark.timeout(600)

EXAMPLES = 50
SEED = 20261127
ADMIN_TAGS = ("keys", "endpoints")
"""The tags of the operations only an admin may use (server/api/keys.py, endpoints.py)."""
CONFIG = """
[checks.positive_data_acceptance]
expected-statuses = ["2xx", "400", "401", "403", "404", "409", "424"]
[checks.negative_data_rejection]
expected-statuses = ["400", "401", "403", "404", "405", "406", "409", "413", "414", "415",
                     "422", "424"]
"""


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
)
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    folder = tmp_path_factory.mktemp(f"schemathesis-{request.param}")
    if request.param == "sqlite":
        url = f"sqlite:///{folder / 'fairjudge.db'}"
    else:
        url = str(request.getfixturevalue("pg_url_module"))
    with StubServer() as stub:
        config = write_config(folder / "fairjudge.toml", stub.base_url, url)
        # Label Studio of its own that never runs: campaign routes must not reach another
        # test's server.
        with config.open("a", encoding="utf-8") as f:
            f.write(f'[labelstudio]\nport = 9\nhome = "{folder / "labelstudio"}"\n')
        live = LiveServer(config)
        live.cli("db", "upgrade")
        settings = load_settings(config)
        engine = make_engine(settings.database_url)
        try:
            with session_scope(engine) as session:
                import_items(session, SAMPLE, "sample")
            gen = usecases.generate(
                engine, settings, usecases.GenerateRequest(dataset="sample", limit=18)
            )
            usecases.judge(engine, settings, usecases.JudgeRequest(generation_run_id=gen.run_id))
        finally:
            engine.dispose()
        # From here on the stub takes one call a minute (see the module's docstring).
        text = config.read_text(encoding="utf-8")
        assert text.count("\nconcurrency = 1\n") == 1, text
        config.write_text(
            text.replace("\nconcurrency = 1\n", "\nconcurrency = 1\nrequests_per_minute = 1\n"),
            encoding="utf-8",
        )
        with live:
            yield live


def schemathesis(server: LiveServer, key: str, *options: str) -> subprocess.CompletedProcess[str]:
    config = server.config.parent / "schemathesis.toml"
    config.write_text(CONFIG, encoding="utf-8")
    command = [
        *(sys.executable, "-m", "schemathesis.cli"),
        *("--config-file", str(config)),
        "run",
        f"{server.base}/api/v1/openapi.json",
        *("--checks", "all"),
        *("--header", f"Authorization: Bearer {key}"),
        *("--max-examples", str(EXAMPLES)),
        *("--seed", str(SEED)),
        *("--request-timeout", "30"),
        # Deterministic: the same requests on every run, and no example database written.
        "--generation-deterministic",
        *options,
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=540)


def verdict(run: subprocess.CompletedProcess[str]) -> str:
    """The run's failures and summary, for the assertion message."""
    text = run.stdout + run.stderr
    start = text.find("FAILURES")
    return text[start:] if start >= 0 else text[-6000:]


def test_every_operation_holds_to_the_document_for_a_member(server: LiveServer) -> None:
    if "postgresql" in server.config.read_text():
        phases = "examples,fuzzing,stateful"
    else:
        phases = "examples,coverage"
    run = schemathesis(server, server.member_key, "--phases", phases)
    assert run.returncode == 0, verdict(run)
    # The run reached every operation: its summary counts them (44 in the document today;
    # at least the 40 that were there when this test was written).
    assert "Tested:" in run.stdout, run.stdout[-2000:]
    tested = int(run.stdout.split("Tested:")[1].split()[0])
    assert tested >= 40, run.stdout[-2000:]


def test_admin_operations_hold_to_the_document_for_an_admin(server: LiveServer) -> None:
    tags = [option for tag in ADMIN_TAGS for option in ("--include-tag", tag)]
    run = schemathesis(server, server.admin_key, "--phases", "coverage,fuzzing", *tags)
    assert run.returncode == 0, verdict(run)
