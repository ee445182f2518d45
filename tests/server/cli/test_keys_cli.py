"""``fairjudge keys create`` refuses names people cannot read as stored (issue 41): only
invisible characters, or a direction-changing one; ordinary names are kept. The rule is
server/auth.py's ``name_problem``, which the API shares (tests/server/api/test_gates.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import fairjudge
from tests.support.factories import write_config


@pytest.fixture
def config(tmp_path: Path, migrated_db_url: str) -> Path:
    return write_config(tmp_path / "f.toml", "http://127.0.0.1:9/v1", migrated_db_url)


@pytest.mark.parametrize(
    ("name", "code_point"),
    [("\u200b\u200c", "U+200B"), ("\u202eadmin", "U+202E"), ("a\u2067b", "U+2067")],
)
def test_an_unreadable_key_name_is_one_error_line(config: Path, name: str, code_point: str) -> None:
    done = fairjudge("--config", config, "keys", "create", "--name", name)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: the key's name is refused:")
    assert code_point in lines[0]
    listed = fairjudge("--config", config, "keys", "list", "--json")
    assert json.loads(listed.stdout) == []  # nothing stored


def test_a_readable_key_name_is_kept(config: Path) -> None:
    done = fairjudge("--config", config, "keys", "create", "--name", "Zoë 👩\u200d💻", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["name"] == "Zoë 👩\u200d💻"
