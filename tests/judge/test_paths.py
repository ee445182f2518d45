"""The data folders are found from a checkout and from a regular (non-editable) install."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from judge import paths
from judge.grading.rubrics import load_rubrics


def test_checkout_finds_its_own_folders() -> None:
    root = paths.checkout_root()
    assert root is not None
    assert paths.prompts_dir() == root / "prompts"
    assert paths.sample_dataset() == root / "datasets" / "fairmonitor_sample.jsonl"


def test_installed_layout_is_found_under_the_prefix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A regular install: no checkout beside the package, data under <prefix>/share/fairjudge.
    share = tmp_path / "prefix" / "share" / "fairjudge"
    (share / "prompts").mkdir(parents=True)
    (share / "prompts" / "rubrics.toml").write_text("version = 1\n")
    monkeypatch.setattr(paths, "_CHECKOUT", tmp_path / "site-packages")
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "prefix"))
    monkeypatch.delenv(paths.DATA_DIR_ENV, raising=False)
    assert paths.prompts_dir() == share / "prompts"
    assert paths.checkout_root() is None
    monkeypatch.setenv(paths.DATA_DIR_ENV, str(tmp_path / "mine"))
    assert paths.datasets_dir() == tmp_path / "mine" / "datasets"


@pytest.mark.timeout(300)
def test_wheel_ships_every_package_and_the_data_folders(tmp_path: Path) -> None:
    root = paths.checkout_root()
    assert root is not None
    # Build from a copy so setuptools' build/ folder never lands in (or goes stale in) the tree.
    source = tmp_path / "src"
    for name in ("judge", "annotation", "server", "prompts", "datasets"):
        shutil.copytree(root / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(root / name, source / name)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(source)],
        check=True,
        capture_output=True,
        timeout=280,
    )
    wheel = next(tmp_path.glob("fairjudge-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    data = next(
        n.split("/")[0]
        for n in names
        if n.endswith(".data/data/share/fairjudge/prompts/rubrics.toml")
    )
    # Every .py file of the three packages in the checkout is in the wheel...
    sources = {
        str(p.relative_to(root))
        for package in ("judge", "annotation", "server")
        for p in (root / package).rglob("*.py")
    }
    assert sources - names == set()
    # ...and so are the report template and every file of the data folders.
    assert "judge/reports/templates/report.html" in names
    for folder in ("prompts", "datasets"):
        for p in (root / folder).iterdir():
            assert f"{data}/data/share/fairjudge/{folder}/{p.name}" in names
    # The shipped rubric file loads.
    assert load_rubrics(root / "prompts").for_stage("S2") == ("TCS", "PCS", "ETCS")
