"""The import contracts catch what they forbid (issue 43): each kind of forbidden import is
planted in a copy of the checkout, and ``lint-imports`` run on the copy must name every
planted module among the broken contracts.

The copy is run once with every plant in place (one graph build, a few seconds): a plant that
no contract catches is missing from the report and the test names it. The clean tree passing
is ``make lint``'s job. The plants are the kinds an outside review found passing before the
contracts were extended (a new interface package under server/, the use cases importing up
into the CLI, API or HTTP models, the API importing the CLI, an adapter reaching into the
domain, a circle hidden in function-level imports) plus the older rules' own kinds.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from judge.paths import checkout_root

# (module path in the copy, its source): each must be reported as breaking a contract. A path
# that exists already gets the source appended (a function-level import in an existing module).
PLANTS: dict[str, str] = {
    # a new interface package under server/ that reaches the domain directly
    "server/plant_face/__init__.py": "from judge.store import tables\n",
    "server/plant_face/view.py": "import annotation.ratings\n",
    # the use cases importing up into the interfaces and the adapters
    "server/usecases/plant_up_cli.py": "from server.cli import output\n",
    "server/usecases/plant_up_api.py": "def f():\n    from server.api import jobs\n",
    "server/usecases/plant_up_schemas.py": "from server.schemas import ErrorOut\n",
    "server/usecases/plant_up_dashboard.py": "import server.dashboard.charts\n",
    "server/usecases/plant_up_jobs.py": "from server.jobs import queue\n",
    # interfaces importing one another
    "server/api/plant_api_cli.py": "from server.cli import output\n",
    "server/api/plant_api_dashboard.py": "from server.dashboard import charts\n",
    "server/dashboard/plant_dashboard_api.py": "from server.api import jobs\n",
    "server/cli/plant_cli_api.py": "from server.api import jobs\n",
    # lower layers of server/ importing upwards
    "server/jobs/plant_jobs_api.py": "from server.api import jobs\n",
    "server/schemas/__init__.py": "\n\ndef _planted():\n    from server.jobs import queue\n",
    "server/kept/plant_kept_dashboard.py": "from server.dashboard import charts\n",
    # an adapter reaching into a domain stage (not the store it may read)
    "server/plant_adapter.py": "from judge.metrics import STAGE_METRICS\n",
    # the server's tables importing up into the use cases (they are the bottom layer), and its
    # queries reaching past the store's tables into a domain stage
    "server/tables.py": "\n\ndef _planted():\n    from server.usecases import jobs\n",
    "server/queries.py": "\n\ndef _planted():\n    from judge.runs import run_lease\n",
    # the domain's own rules
    "judge/store/plant_store_up.py": "from judge.grading import judge\n",
    "judge/stats/plant_stats_store.py": "from judge.store import tables\n",
    "judge/plant_judge_annotation.py": "import annotation.ratings\n",
    "annotation/plant_annotation_server.py": "from server import usecases\n",
    "judge/grading/plant_openai.py": "import openai\n",
    "server/usecases/plant_flask.py": "import flask\n",
    "server/api/plant_click.py": "import click\n",
    "judge/plant_tests.py": "from tests import support\n",
    # a circle hidden inside functions
    "judge/stats/plant_circle_a.py": "def f():\n    from judge.stats import plant_circle_b\n",
    "judge/stats/plant_circle_b.py": "def g():\n    from judge.stats import plant_circle_a\n",
}


def _module(path: str) -> str:
    name = path.removesuffix(".py").replace("/", ".")
    return name.removesuffix(".__init__")


@pytest.fixture(scope="module")
def planted_report(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, str]:
    root = checkout_root()
    assert root is not None
    copy = tmp_path_factory.mktemp("planted")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for package in ("judge", "annotation", "server", "tests", "bench"):
        shutil.copytree(root / package, copy / package, ignore=ignore)
    shutil.copy(root / "pyproject.toml", copy / "pyproject.toml")
    for path, source in PLANTS.items():
        target = copy / path
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("a") as out:
            out.write(source)
    lint = Path(sys.executable).with_name("lint-imports")
    env = {**os.environ, "PYTHONPATH": str(copy)}
    done = subprocess.run(
        [str(lint), "--config", "pyproject.toml", "--no-cache"],
        cwd=copy,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return done.returncode, done.stdout + done.stderr


def test_every_planted_forbidden_import_breaks_a_contract(planted_report: tuple[int, str]) -> None:
    code, report = planted_report
    assert code != 0, report[-3000:]
    broken = report[report.index("Broken contracts") :] if "Broken contracts" in report else ""
    assert broken, report[-3000:]

    # The acyclic contract names, relative to their package, the imports whose removal would
    # break each circle: one of the two planted modules.
    def caught(path: str) -> bool:
        name = _module(path)
        if "circle" in name:
            return ".plant_circle_a -> .plant_circle_b" in broken or (
                ".plant_circle_b -> .plant_circle_a" in broken
            )
        return name in broken

    missed = [p for p in PLANTS if not caught(p)]
    assert missed == [], f"no contract caught: {missed}\n{broken[:4000]}"
