"""Shared fixtures: a real temporary SQLite store (a copy of a template built once per
session, see tests/support/stores.py), the scripted stub endpoint, and the real embedded
model server (started once per test session on a free port)."""

from __future__ import annotations

import importlib
import importlib.util
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import Engine

from judge.models.embedded import EmbeddedServer
from judge.store.engine import make_engine
from tests.support import stores
from tests.support.factories import (
    BBQ_PREDICTIONS,
    SAMPLE,
    SHARED_DATA,
    embedded_threads,
    free_port,
    make_settings,
    require_shared,
)
from tests.support.stub_openai import StubServer

__all__ = ["SAMPLE", "SHARED_DATA", "free_port", "make_settings"]


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'fairjudge.db'}"


@pytest.fixture
def engine(db_url: str, empty_template: Path) -> Iterator[Engine]:
    """The store at ``db_url``: a copy of the empty migrated template (the file is new to
    the test, so it is the test's own)."""
    path = stores.sqlite_path(db_url)
    if path is not None and not path.exists():
        stores.copy_store(empty_template, path)
    engine = make_engine(db_url)
    yield engine
    engine.dispose()


@pytest.fixture
def migrated_db_url(db_url: str, empty_template: Path) -> str:
    """``db_url`` with the store already there: a copy of the empty migrated template (for
    fixtures that open the store themselves and never look at how it was made)."""
    path = stores.sqlite_path(db_url)
    assert path is not None, "db_url names a SQLite file"
    if not path.exists():  # else ``engine`` copied the same template there first
        stores.copy_store(empty_template, path)
    return db_url


@pytest.fixture(scope="session")
def empty_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store migrated to the newest revision, no rows: built once, copied by ``engine``."""
    return stores.build_empty(tmp_path_factory.mktemp("templates") / "empty.db")


@pytest.fixture(scope="session")
def sample_template(tmp_path_factory: pytest.TempPathFactory, empty_template: Path) -> Path:
    """The empty template with the shipped sample imported as dataset ``sample``."""
    return stores.build_sample(tmp_path_factory.mktemp("templates") / "sample.db", empty_template)


@pytest.fixture(scope="session")
def judged_s1_template(
    tmp_path_factory: pytest.TempPathFactory, sample_template: Path
) -> stores.Judged:
    """The sample's 18 S1 items answered and judged through the stub (``limit=18``)."""
    path = tmp_path_factory.mktemp("templates") / "judged_s1.db"
    return stores.build_judged(path, sample_template, limit=18)


@pytest.fixture(scope="session")
def judged_sample_template(
    tmp_path_factory: pytest.TempPathFactory, sample_template: Path
) -> stores.Judged:
    """All 72 sample items answered and judged through the stub."""
    path = tmp_path_factory.mktemp("templates") / "judged_sample.db"
    return stores.build_judged(path, sample_template, limit=None)


@pytest.fixture
def bbq_data() -> Path:
    """The BBQ authors' predictions in ../shared/data: skipped without them on a developer's
    machine, failed in CI (``require_shared``)."""
    require_shared(BBQ_PREDICTIONS.is_dir(), BBQ_PREDICTIONS, "The shared BBQ data")
    return BBQ_PREDICTIONS


@pytest.fixture
def stub() -> Iterator[StubServer]:
    with StubServer() as server:
        yield server


@pytest.fixture(scope="session")
def embedded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedServer]:
    """The real llama-cpp-python server with SmolLM2-135M, as `make install` sets it up."""
    if importlib.util.find_spec("llama_cpp") is None:
        if os.environ.get("CI", "").lower() in ("true", "1"):
            pytest.fail("llama-cpp-python is not installed; `make install` must install it in CI")
        pytest.skip("llama-cpp-python is not installed; run make install")
    from judge.config import EmbeddedConfig

    config = EmbeddedConfig(
        port=free_port(), n_threads=embedded_threads(), n_threads_batch=embedded_threads()
    )
    server = EmbeddedServer(config, tmp_path_factory.mktemp("state"))
    server.start()
    yield server
    server.stop()


PG_ADMIN_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A fresh PostgreSQL database on the machine's server, dropped afterwards.

    Without a reachable server the test is skipped on a developer's machine but fails in CI
    (``CI=true``), where PostgreSQL is always started: a skip there would hide a broken setup.
    """
    with fresh_pg_database() as url:
        yield url


@pytest.fixture(scope="module")
def pg_url_module() -> Iterator[str]:
    """``pg_url`` shared by one module's tests (for a server started once per module)."""
    with fresh_pg_database() as url:
        yield url


@contextmanager
def fresh_pg_database() -> Iterator[str]:
    import uuid

    from sqlalchemy import create_engine, text
    from sqlalchemy.exc import OperationalError

    name = f"fairjudge_test_{uuid.uuid4().hex[:10]}"
    admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
    except OperationalError as exc:
        admin.dispose()
        why = f"PostgreSQL is not reachable on 127.0.0.1:5432 ({exc.orig})"
        if os.environ.get("CI", "").lower() in ("true", "1"):
            pytest.fail(f"{why}; CI must run the PostgreSQL tests")
        pytest.skip(why)
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


# Tests that share a session's server run in one xdist worker, so that `make test` (three
# workers) starts one Label Studio and one embedded model, not two of each. xdist's own
# `loadgroup` reads `xdist_group` markers into node ids, which pytest 9 no longer lets a plugin
# change, so the grouping is ours: the scheduler below groups node ids by module, with the
# modules listed here put in their server's group. The list is checked against the fixtures
# and markers each collected test really uses (pytest_collection_modifyitems): a module that
# starts using a server and is not listed stops the run with its name.
SERVER_MODULES: dict[str, tuple[str, ...]] = {
    "labelstudio": (
        "tests/annotation/labelstudio/test_audit_campaign.py",
        "tests/annotation/labelstudio/test_campaign_quality.py",
        "tests/annotation/labelstudio/test_campaigns.py",
        "tests/annotation/labelstudio/test_export_timeout.py",
        "tests/annotation/labelstudio/test_first_start.py",
        "tests/annotation/labelstudio/test_rating_scope.py",
        "tests/annotation/labelstudio/test_review_drafts.py",
        "tests/annotation/labelstudio/test_service.py",
        "tests/server/api/test_campaigns_api.py",
        "tests/server/cli/test_campaign_cli.py",
        "tests/server/cli/test_campaign_quality_cli.py",
        "tests/server/cli/test_campaign_strata_cli.py",
        "tests/server/cli/test_labelstudio_cli.py",
        "tests/server/cli/test_pull_messages.py",
        "tests/server/cli/test_rubric_campaign_cli.py",
        "tests/server/dashboard/test_campaign_page.py",
    ),
    "embedded": (
        "tests/judge/authoring/test_cells.py",
        "tests/judge/models/test_client_logprobs.py",
        "tests/server/cli/test_audit_run_cli.py",
        "tests/server/cli/test_cli.py",
        "tests/server/test_services_embedded.py",
    ),
}
GROUP_OF_MODULE = {m: group for group, modules in SERVER_MODULES.items() for m in modules}
FIRST_IN_GROUP = ("tests/annotation/labelstudio/test_first_start.py",)
"""Modules that run first in their server group: Label Studio's first start migrates a fresh
database and leaves it as the template the session's server then starts from."""
SLOW_MODULES = (
    "tests/server/api/test_schemathesis_live.py",
    "tests/server/test_live.py",
    "tests/server/test_restart.py",
    "tests/server/test_worker_watch.py",
    "tests/server/cli/test_interrupt.py",
    "tests/judge/test_durability.py",
)
"""Modules of a minute or more each (real servers and processes, measured with
``--durations``), handed out right after the server groups: started last, one of them would
keep a worker busy alone at the end of the run."""


SPLIT_BY_PARAMETER = ("tests/server/api/test_schemathesis_live.py",)
"""Modules whose tests go out in one scope per first parameter (the database), not one per
module: the schemathesis runs take minutes on each database, and apart they run side by
side."""


def _module(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def _uses_server(item: pytest.Item) -> str | None:
    """The server group whose fixture or marker ``item`` uses, if any."""
    names = set(getattr(item, "fixturenames", ())) | {m.name for m in item.iter_markers()}
    return next((group for group in SERVER_MODULES if group in names), None)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Check SERVER_MODULES against what the collected tests use, then put the server
    groups' tests first and SLOW_MODULES next: they take longest, and the scheduler hands
    groups out in collection order (``--no-loadscope-reorder``), so each starts early while
    the quick modules fill in around them. The order inside each group is kept."""
    used: dict[str, str] = {}
    for item in items:
        group = _uses_server(item)
        if group is not None:
            used.setdefault(_module(item.nodeid), group)
    # One direction only: a run of a few tests of a listed module (one test, -k) may use
    # no server at all, and that says nothing about the module.
    wrong = sorted(
        f"{module}: uses {group}, listed as {GROUP_OF_MODULE.get(module)}"
        for module, group in used.items()
        if GROUP_OF_MODULE.get(module) != group
    )
    if wrong:
        raise pytest.UsageError(
            "tests/conftest.py's SERVER_MODULES is out of date:\n  " + "\n  ".join(wrong)
        )
    order = list(SERVER_MODULES)

    def rank(item: pytest.Item) -> tuple[int, int]:
        module = _module(item.nodeid)
        group = GROUP_OF_MODULE.get(module)
        if group is not None:
            return order.index(group), 0 if module in FIRST_IN_GROUP else 1
        return len(order) + (0 if module in SLOW_MODULES else 1), 0

    items.sort(key=rank)


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadgroup``: whole modules go to one worker each (their module-scoped
    fixtures are built once), and the modules of a server group go to one worker together."""
    if config.getoption("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ServerGroups(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = _module(nodeid)
            if module in SPLIT_BY_PARAMETER and nodeid.endswith("]"):
                # one scope per database: each builds its own module-scoped server
                return f"{module}[{nodeid.rsplit('[', 1)[1].split('-')[0]}"
            return GROUP_OF_MODULE.get(module, module)

    return ServerGroups(config, log)


@pytest.fixture(scope="module")
def ppi_py() -> Any:
    """ppi_py (pip install ppi-python, in the test extra), the reference the prediction-powered
    estimators are checked against. Without it the reference tests are skipped on a
    developer's machine but fail in CI (CI=true), where a skip would hide it."""
    if importlib.util.find_spec("ppi_py") is None:
        why = "ppi-python is not installed (pip install ppi-python)"
        if os.environ.get("CI", "").lower() in ("true", "1"):
            pytest.fail(f"{why}; CI must install it with the test extra")
        pytest.skip(why)
    return importlib.import_module("ppi_py")
