"""Where FairJudge finds its data folders (``prompts/``, ``datasets/``) and its default config.

In a checkout (or an editable install) they sit beside the packages. A regular install puts
them under ``<prefix>/share/fairjudge`` (pyproject's data files). ``FAIRJUDGE_DATA_DIR``
points at any other folder holding ``prompts/`` and ``datasets/``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

DATA_DIR_ENV = "FAIRJUDGE_DATA_DIR"
_CHECKOUT = Path(__file__).resolve().parent.parent


def data_dir() -> Path:
    """The folder that holds ``prompts/`` and ``datasets/``."""
    override = os.environ.get(DATA_DIR_ENV)
    if override:
        return Path(override)
    for candidate in (_CHECKOUT, Path(sys.prefix) / "share" / "fairjudge"):
        if (candidate / "prompts" / "rubrics.toml").exists():
            return candidate
    return _CHECKOUT


def prompts_dir() -> Path:
    """The built-in prompt templates and rubrics."""
    return data_dir() / "prompts"


def datasets_dir() -> Path:
    """The bundled item files (the FairMonitor sample)."""
    return data_dir() / "datasets"


def sample_dataset() -> Path:
    """The 72-item FairMonitor sample that ``fairjudge demo`` runs."""
    return datasets_dir() / "fairmonitor_sample.jsonl"


def checkout_root() -> Path | None:
    """The repository root when running from a checkout, else None."""
    return _CHECKOUT if (_CHECKOUT / "pyproject.toml").exists() else None


def default_config() -> Path:
    """``fairjudge.toml`` in the working directory, else the checkout's own."""
    here = Path("fairjudge.toml")
    if here.exists():
        return here
    root = checkout_root()
    return root / "fairjudge.toml" if root else here
