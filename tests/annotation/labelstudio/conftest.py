"""One real Label Studio for the whole test session, on a free port with its data in a
temporary folder.

Its virtual environment (about 1 GB, a minute or two to install) is kept between test
sessions at ``<checkout>/.fairjudge/labelstudio/venv`` (``.fairjudge/`` is git-ignored; the
same place ``fairjudge labelstudio start`` installs to with the default settings), or where
``FAIRJUDGE_TEST_LABELSTUDIO_VENV`` points. Beside it, ``test-data-<version>`` keeps a
snapshot of a freshly set-up server (its database and admin login): a first start spends
about a minute migrating the database on 2 cores, a start on the snapshot a few seconds, so
only the first test session on a machine pays for it.

When Label Studio cannot be installed or started the tests that need it are skipped with the
reason, except in CI (``CI=true``), where they fail: a skip there would hide a broken setup.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from annotation.errors import LabelStudioError
from annotation.labelstudio.service import Connection, LabelStudioService
from judge.config import LabelStudioConfig
from judge.store.engine import make_engine
from tests.support import stores
from tests.support.factories import free_port

VENV_ENV = "FAIRJUDGE_TEST_LABELSTUDIO_VENV"
CHECKOUT = Path(__file__).resolve().parents[3]

# The session's server, shared by every module that asks for it (see shared_labelstudio).
_SESSION: dict[str, object] = {}


def labelstudio_venv() -> Path:
    """Where the tests' Label Studio venv lives across test sessions."""
    return Path(os.environ.get(VENV_ENV) or CHECKOUT / ".fairjudge" / "labelstudio" / "venv")


def _data_template(version: str) -> Path:
    """A snapshot of a freshly set-up server of ``version`` (see the module's docstring)."""
    return labelstudio_venv().parent / f"test-data-{version}"


def _restore_template(service: LabelStudioService) -> bool:
    """Put the snapshot's data and admin login into ``service``'s home, if there is one."""
    template = _data_template(service.config.version)
    if not (template / "admin.json").exists():
        return False
    shutil.copytree(template / "data", service.data_dir)
    shutil.copy2(template / "admin.json", service.admin_file)  # keeps its mode, 0600
    return True


def _save_template(service: LabelStudioService) -> None:
    """Snapshot a just-started server: SQLite's backup copies a consistent database while
    the server runs. Written beside the target and renamed, so a concurrent session never
    sees half a snapshot."""
    template = _data_template(service.config.version)
    partial = template.with_name(f"{template.name}.{os.getpid()}.partial")
    (partial / "data").mkdir(parents=True)
    with (
        sqlite3.connect(service.data_dir / "label_studio.sqlite3") as source,
        sqlite3.connect(partial / "data" / "label_studio.sqlite3") as target,
    ):
        source.backup(target)
    shutil.copy2(service.data_dir / ".env", partial / "data" / ".env")  # its secret key
    shutil.copy2(service.admin_file, partial / "admin.json")
    try:
        partial.rename(template)
    except OSError:  # another session saved one first
        shutil.rmtree(partial, ignore_errors=True)


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() in ("true", "1"):
        pytest.fail(f"{reason}; CI must run the Label Studio tests")
    pytest.skip(reason)


def _progress(line: str) -> None:
    print(f"[labelstudio fixture] {line}", flush=True)


def installed_venv() -> Path:
    """The tests' Label Studio venv, installed if it is not yet (a failure to install is the
    session's failure: skipped on a laptop, failed in CI)."""
    if "failed" in _SESSION:
        _unavailable(str(_SESSION["failed"]))
    home = labelstudio_venv().parent
    try:
        started = time.monotonic()
        if LabelStudioService(LabelStudioConfig(), home, venv=labelstudio_venv()).install(
            _progress
        ):
            _progress(f"installed in {time.monotonic() - started:.0f} s")
    except LabelStudioError as exc:
        _SESSION["failed"] = f"Label Studio is not available: {exc}"
        _unavailable(str(_SESSION["failed"]))
    return labelstudio_venv()


def save_template_from(home: Path) -> None:
    """Keep a just-started server's data (its home ``home``) as the session's template, when
    there is none yet: the first start of a fresh checkout migrates once, not twice."""
    service = LabelStudioService(LabelStudioConfig(home=str(home)), home)
    if not (_data_template(service.config.version) / "admin.json").exists():
        _save_template(service)


def shared_labelstudio(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabelStudioService]:
    """Start the session's Label Studio once, whichever fixture asks first, and stop it when
    the session ends. Session-scoped fixtures in several folders may call this: each gets
    the same server (a fixture defined twice would otherwise start two)."""
    if "failed" in _SESSION:
        _unavailable(str(_SESSION["failed"]))
    if "service" in _SESSION:
        yield _SESSION["service"]  # type: ignore[misc]
        return
    home = tmp_path_factory.mktemp("labelstudio")
    config = LabelStudioConfig(port=free_port(), home=str(home))
    try:
        started = time.monotonic()
        if LabelStudioService(config, home, venv=labelstudio_venv()).install(_progress):
            _progress(f"installed in {time.monotonic() - started:.0f} s")
        # The service sees the shared venv as its own home/venv, so a config naming this
        # home (as the CLI tests write one) finds the same installation.
        (home / "venv").symlink_to(labelstudio_venv(), target_is_directory=True)
        service = LabelStudioService(config, home)
        restored = _restore_template(service)
        started = time.monotonic()
        service.start(_progress)
        took = time.monotonic() - started
        _progress(f"{'start' if restored else 'first start'} answered in {took:.0f} s")
        if not restored:
            _save_template(service)
    except LabelStudioError as exc:
        _SESSION["failed"] = f"Label Studio is not available: {exc}"
        _unavailable(str(_SESSION["failed"]))
    _SESSION["service"] = service
    try:
        yield service
    finally:
        _SESSION.clear()
        service.stop()


@pytest.fixture(scope="session")
def labelstudio(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabelStudioService]:
    """The session's real Label Studio (a LabelStudioService that runs)."""
    yield from shared_labelstudio(tmp_path_factory)


@pytest.fixture
def ls_connection(labelstudio: LabelStudioService) -> Connection:
    """The admin connection to the session's Label Studio."""
    return labelstudio.connection()


@pytest.fixture(scope="module")
def store(
    tmp_path_factory: pytest.TempPathFactory, judged_sample_template: stores.Judged
) -> Iterator[tuple[Engine, int, int]]:
    """A module's own store: the 72 sample items answered and judged with every rubric
    through the stub endpoint (a copy of the session's template, tests/support/stores.py);
    with the ids of the generation run and the judge run."""
    jud = judged_sample_template
    engine = make_engine(
        stores.copy_store(jud.path, tmp_path_factory.mktemp("judged") / "fairjudge.db")
    )
    yield engine, jud.generation_run_id, jud.judge_run_id
    engine.dispose()
