"""Relative paths in a config file are read from the file's folder, whatever the working
directory (issue 25: the shipped config's ``state_dir = ".fairjudge"`` broke
``fairjudge labelstudio start``); options given on the command line stay as typed."""

from __future__ import annotations

import shutil
from pathlib import Path

from judge.config import load_settings
from judge.paths import checkout_root


def test_the_shipped_config_resolves_against_its_own_folder(tmp_path: Path) -> None:
    root = checkout_root()
    assert root is not None
    config = tmp_path / "clone" / "fairjudge.toml"
    config.parent.mkdir()
    shutil.copy(root / "fairjudge.toml", config)
    settings = load_settings(config)
    # By hand from the shipped file: state_dir ".fairjudge", sqlite:///fairjudge.db.
    assert settings.state_dir == str(tmp_path / "clone" / ".fairjudge")
    assert settings.database_url == f"sqlite:///{tmp_path / 'clone' / 'fairjudge.db'}"
    # Empty means "the default place" and is left empty.
    assert settings.prompts_dir == "" and settings.labelstudio.home == ""


def test_every_path_setting_and_what_is_left_alone(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text(
        'database_url = "sqlite+pysqlite:///data/store.db?timeout=5"\n'
        'state_dir = "/abs/state"\n'
        'prompts_dir = "my-prompts"\n'
        '[embedded]\nmodel_path = "models/m.gguf"\n'
        '[labelstudio]\nhome = "../ls"\nvenv = "~/ls-venv"\n'
        '[endpoints.embedded]\nbase_url = "http://x/v1"\nmodel = "m"\n'
    )
    s = load_settings(config)
    assert s.database_url == f"sqlite+pysqlite:///{tmp_path}/data/store.db?timeout=5"
    assert s.state_dir == "/abs/state"
    assert s.prompts_dir == str(tmp_path / "my-prompts")
    assert s.embedded.model_path == str(tmp_path / "models" / "m.gguf")
    assert s.labelstudio.home == str(tmp_path / ".." / "ls")
    assert s.labelstudio.venv == str(Path.home() / "ls-venv")
    # --db (an override) is the user's own and means the working directory, as typed.
    assert load_settings(config, database_url="sqlite:///x.db").database_url == "sqlite:///x.db"


def test_urls_without_a_relative_file_are_unchanged(tmp_path: Path) -> None:
    for url in (
        "sqlite://",
        "sqlite:///:memory:",
        "sqlite:////var/lib/fj.db",
        "postgresql+psycopg://u@h/db",
    ):
        config = tmp_path / "c.toml"
        config.write_text(
            f'database_url = "{url}"\n[endpoints.embedded]\nbase_url = "http://x/v1"\nmodel = "m"\n'
        )
        assert load_settings(config).database_url == url
