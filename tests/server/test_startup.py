"""Each command imports only what it needs, so that the CLI answers at once (issue 10).

Every case runs one real command in a fresh interpreter and then lists which top-level
packages it had imported; the lists of what must stay out come from what each command does:
reading the store needs SQLAlchemy but never the model client (openai), the statistics
(scipy, scikit-learn, pandas), the plots (matplotlib), the web app (flask) or the human
annotation package; asking a model needs openai but none of the others. No timings are
asserted here: speed is measured by the benchmark."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from judge.store.engine import make_engine
from server import usecases
from tests.support.factories import SAMPLE, free_port, make_settings, write_config
from tests.support.stub_openai import StubServer

STATS_AND_PLOTS = {"scipy", "sklearn", "pandas", "matplotlib", "annotation", "flask"}
MODEL_CLIENT = {"openai", "httpx"}
STORE = {"sqlalchemy", "sqlmodel", "alembic"}

# Runs `fairjudge ARGS` as the console script does, then prints the command's exit code and
# the top-level packages in sys.modules as the last line of stdout.
PROBE = """
import json, runpy, sys
sys.argv = ["fairjudge", *json.loads(sys.argv[1])]
code = 0
try:
    runpy.run_module("server.cli", run_name="__main__")
except SystemExit as exc:
    code = exc.code
print(json.dumps({"code": code, "loaded": sorted({m.split(".")[0] for m in sys.modules}),
                  "scipy_stats": "scipy.stats" in sys.modules}))
"""


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A store with the sample, a generation run of two items and its judge run (ids 1), and
    a config whose endpoints are the scripted stub, live for the module's commands."""
    folder = tmp_path_factory.mktemp("startup")
    db_url = f"sqlite:///{folder / 'fairjudge.db'}"
    with StubServer() as stub:
        engine = make_engine(db_url)
        settings = make_settings(stub.base_url, db_url)
        usecases.import_dataset(engine, SAMPLE)
        gen = usecases.generate(
            engine, settings, usecases.GenerateRequest(dataset="fairmonitor_sample", limit=2)
        )
        usecases.judge(engine, settings, usecases.JudgeRequest(generation_run_id=gen.run_id))
        engine.dispose()
        yield write_config(folder / "c.toml", stub.base_url, db_url, port=free_port())


def probe(config: Path, *args: str, codes: tuple[int | None, ...] = (0, None)) -> dict:
    """What `fairjudge --config CONFIG ARGS` imported (PROBE's line); the command must end
    with one of ``codes``."""
    argv = json.dumps(["--config", str(config), *args])
    run = subprocess.run(
        [sys.executable, "-c", PROBE, argv], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["code"] in codes, run.stdout + run.stderr
    return dict(result)


def loaded_by(config: Path, *args: str) -> set[str]:
    """The top-level packages that `fairjudge --config CONFIG ARGS` imported; the command
    must succeed."""
    return set(probe(config, *args)["loaded"])


HELP = [
    ["--help"],
    *([group, "--help"] for group in ("dataset", "model", "ratings", "agreement")),
    *([command, "--help"] for command in ("runs", "generate", "judge", "demo", "report", "sweep")),
]


@pytest.mark.parametrize("args", HELP, ids=" ".join)
def test_help_needs_neither_the_store_nor_rich(config: Path, args: list[str]) -> None:
    loaded = loaded_by(config, *args)
    assert loaded & (STATS_AND_PLOTS | MODEL_CLIENT | STORE | {"pydantic", "rich"}) == set()


@pytest.mark.parametrize("args", [["model", "status"], ["model", "status", "--json"]], ids=" ".join)
def test_model_status_needs_neither_the_store_nor_rich(config: Path, args: list[str]) -> None:
    loaded = loaded_by(config, *args)
    assert "pydantic" in loaded  # the settings, which say where the server is
    assert loaded & (STATS_AND_PLOTS | MODEL_CLIENT | STORE | {"rich"}) == set()


STORE_READS = [
    ["runs"],
    ["runs", "--json"],
    ["dataset", "list"],
    ["dataset", "show", "fairmonitor_sample"],
    ["export", "1", "--out", "{tmp}/export"],
    ["dataset", "export", "fairmonitor_sample", "{tmp}/items.jsonl"],
]


@pytest.mark.parametrize("args", STORE_READS, ids=" ".join)
def test_commands_that_read_the_store_need_no_model_client_and_no_statistics(
    config: Path, tmp_path: Path, args: list[str]
) -> None:
    loaded = loaded_by(config, *(a.format(tmp=tmp_path) for a in args))
    assert "sqlmodel" in loaded
    assert loaded & (STATS_AND_PLOTS | MODEL_CLIENT) == set()


@pytest.mark.parametrize(
    "args", [["generate", "fairmonitor_sample", "--limit", "3"], ["judge", "1"]], ids=" ".join
)
def test_asking_a_model_needs_openai_but_no_statistics(config: Path, args: list[str]) -> None:
    loaded = loaded_by(config, *args)
    assert {"openai", "sqlmodel"} <= loaded
    assert loaded & STATS_AND_PLOTS == set()


def test_a_report_does_import_the_statistics(config: Path, tmp_path: Path) -> None:
    # The other side of the cases above: the probe does see a heavy import when one happens.
    seen = probe(config, "report", "1", "--out", str(tmp_path / "report"))
    assert {"scipy", "matplotlib", "annotation"} <= set(seen["loaded"])
    assert seen["scipy_stats"]


GATES = """
[runs]
a = {a}
b = {b}

[[gate]]   # a share's Wilson interval
run = "a"
figure = "S1 ICS>=3"
factor = "every"
of = "lower"
min = 10

[[gate]]   # a mean's t interval
run = "b"
figure = "S1 ICS mean"
of = "upper"
max = 100

[[gate]]   # paired: McNemar and the sign-flip test over the table, Holm, the bootstrap
compare = ["a", "b"]
figure = "S1 ICS>=3"
factor = "every"
require = "not_flagged"

[[gate]]
compare = ["a", "b"]
figure = "S1 ICS mean"
require = "no_worse"

[[gate]]
qualified = "b"
"""


def test_the_gate_command_reads_figures_without_scipy_stats(tmp_path: Path) -> None:
    # `fairjudge gate` computes intervals, paired tests and Holm's correction with
    # scipy.special and numpy only (issue 44's 2 s target; scipy.stats alone takes over a
    # second to import); every kind of gate is evaluated here, so a module on its path that
    # imports scipy.stats again is caught. Exit 5: the qualified gate fails (no record).
    from sqlmodel import Session

    from tests.support.gate_runs import SCORES_A, SCORES_B, plant_runs

    url = f"sqlite:///{tmp_path / 'gates.db'}"
    engine = make_engine(url)
    with Session(engine) as session:
        a, b = plant_runs(session, [SCORES_A, SCORES_B]).judge_run_ids
    engine.dispose()
    path = tmp_path / "gates.toml"
    path.write_text(GATES.format(a=a, b=b), encoding="utf-8")
    config = write_config(tmp_path / "c.toml", "http://127.0.0.1:9/v1", url)
    seen = probe(config, "gate", str(path), "--junit", str(tmp_path / "g.xml"), codes=(5,))
    assert (tmp_path / "g.xml").read_text(encoding="utf-8").count("<testcase ") == 5
    assert {"scipy", "sqlmodel"} <= set(seen["loaded"])  # scipy.special, the store
    assert not seen["scipy_stats"]
    assert set(seen["loaded"]) & {"sklearn", "pandas", "matplotlib", "annotation", "flask"} == set()
