"""``fairjudge labelstudio start`` as a new user runs it: a fresh copy of the shipped
fairjudge.toml in an empty folder, the command in a process of its own, then ``stop``.

The shipped config names its folders relatively (``state_dir = ".fairjudge"``). Issue 25 saw
the first start exit 70 (FileNotFoundError: the server's executable was looked up relative to
its own home) and, with an absolute venv, the data land in
``.fairjudge/labelstudio/.fairjudge/labelstudio/data``. The config's relative paths are now
read from the config file's folder, so both commands here run from *another* folder and the
data must still land in ``<config folder>/.fairjudge/labelstudio/data`` (docs/annotation.md).

Only the venv is shared with the session's server (``[labelstudio] venv``); the data folder is
new, so this is a real first start: Label Studio migrates its database (30-90 s on 2 cores).
The migrated data then become the session's template (when there is none), so the session's
server does not migrate a second time.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from tests.annotation.labelstudio.conftest import CHECKOUT, installed_venv, save_template_from
from tests.support.factories import free_port

pytestmark = pytest.mark.labelstudio

# The `fairjudge` entry point of the venv running the tests, as `make install` makes it.
FAIRJUDGE = Path(sys.executable).parent / "fairjudge"


def fairjudge(config: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(FAIRJUDGE), "--config", str(config), *args],
        capture_output=True,
        text=True,
        timeout=400,
        cwd=cwd,
    )


def test_start_and_stop_with_the_shipped_config(tmp_path: Path) -> None:
    # The venv is installed here if it is not yet (or the test fails in CI): this test runs
    # first in its group (tests/conftest.py), before the session's server, which then starts
    # from the data this first start migrated (save_template_from) instead of migrating again.
    venv = installed_venv()
    assert (venv / ".fairjudge-installed").exists(), venv
    clone = tmp_path / "clone"
    clone.mkdir()
    config = clone / "fairjudge.toml"
    shutil.copy(CHECKOUT / "fairjudge.toml", config)
    shipped = config.read_text()
    assert 'state_dir = ".fairjudge"' in shipped and "[labelstudio]" not in shipped
    port = free_port()
    config.write_text(shipped + f'\n[labelstudio]\nport = {port}\nvenv = "{venv}"\n')
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    started = fairjudge(config, elsewhere, "labelstudio", "start", "--json")
    try:
        assert started.returncode == 0, started.stderr[-2000:]
        status = json.loads(started.stdout)
        # Where docs/annotation.md says: <config folder>/.fairjudge/labelstudio/data.
        home = clone / ".fairjudge" / "labelstudio"
        assert status["data_dir"] == str(home / "data")
        assert status["url"] == f"http://127.0.0.1:{port}"
        # Checked without our code: the server answers on the configured port...
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=10) as reply:
            assert reply.status == 200
        # ...and its database was created in the documented folder, nowhere nested or in the
        # working directory.
        assert (home / "data" / "label_studio.sqlite3").is_file()
        assert (home / "admin.json").is_file() and (home / "labelstudio.pid").is_file()
        assert not (home / ".fairjudge").exists()
        assert list(elsewhere.iterdir()) == []
        save_template_from(home)
    finally:
        stopped = fairjudge(config, clone, "labelstudio", "stop", "--json")
    assert stopped.returncode == 0, stopped.stderr
    assert json.loads(stopped.stdout)["stopped"] is True
    after = fairjudge(config, clone, "labelstudio", "status", "--json")
    assert json.loads(after.stdout)["answers"] is False
