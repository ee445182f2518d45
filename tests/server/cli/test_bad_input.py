"""Bad input walked through the ``fairjudge`` command: each case exits with its documented
code, prints one short ``error:`` line naming the file (and line) and the fix, never a
traceback, and leaves every table of the store as it was.

Every case runs the command's ``main`` in this process (tests/support/cli.py); a few also
run as a real process (``REAL_PROCESS``): one per exit code that bad input gives, and the
one whose message must mask a password, so that the console script itself is covered."""

from __future__ import annotations

import json
import logging
import os
import signal
import sqlite3
import subprocess
import sys
import warnings
from pathlib import Path

import click
import pytest
from flask.testing import FlaskClient

from judge.config import Settings
from judge.data.datasets import import_items
from judge.errors import FairJudgeError, IncompleteError
from judge.store.engine import make_engine, masked, session_scope
from server import create_app
from server.cli.output import writing
from tests.support.cli import Done, fairjudge
from tests.support.factories import FAIRJUDGE, SAMPLE, write_config

SECRET = "sk-test-abcdef123456"
ENDPOINT = '[endpoints.test]\nbase_url = "{url}"\nmodel = "m"\n'
ROLES = '[generation]\nendpoint = "test"\n[judge]\nendpoint = "test"\n'
HUMAN_OK = "item_id,rater,score\na,r1,3\na,r2,4\nb,r1,2\nb,r2,2\n"


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store holding the sample dataset, a config pointing at it, and the bad files."""
    folder = tmp_path_factory.mktemp("bad_input")
    db = folder / "store.db"
    write_config(folder / "config.toml", "http://127.0.0.1:9/v1", f"sqlite:///{db}")
    with session_scope(make_engine(f"sqlite:///{db}")) as session:
        import_items(session, SAMPLE, "sample")
    files: dict[str, bytes | str] = {
        "latin1.jsonl": '{"id": "caf\u00e9"}\n'.encode("latin-1"),
        "bad_json.jsonl": SAMPLE.read_text(encoding="utf-8").splitlines()[0] + "\n{oops\n",
        "empty.jsonl": "\n\n",
        "latin1.csv": "item_id,rater,score\ncaf\u00e9,r1,3\n".encode("latin-1"),
        "quote.csv": 'item_id,rater,score\n"a,r1,3\nb,r1,2\n',
        "stray_quote.csv": 'item_id,rater,score\na,r1,"3"x\n',
        "short.csv": "item_id,rater,score\na,r1\n",
        "no_score_column.csv": "item_id,rater\na,r1\n",
        "header_only.csv": "item_id,rater,score\n",
        "off_scale.csv": "item_id,rater,score\na,r1,7\n",
        "human.csv": HUMAN_OK,
        "judge_other_ids.csv": "item_id,score\nx,3\ny,4\n",
        "judge_all_na.csv": "item_id,score\na,NA\nb,\n",
        "judge_latin1.csv": "item_id,score\ncaf\u00e9,3\n".encode("latin-1"),
        "binary.toml": bytes(range(256)),
        "bad.toml": "database_url = \n",
        "key_in_userinfo.toml": ENDPOINT.format(url=f"https://user:{SECRET}@api.example/v1")
        + ROLES,
        "key_in_query.toml": ENDPOINT.format(url=f"https://api.example/v1?api_key={SECRET}")
        + ROLES,
        "range.toml": ENDPOINT.format(url="http://x/v1") + ROLES + "temperature = 9\n",
        "not_a_db.txt": "hello\n",
        # 100,000 levels: past Python's recursion limit (1,000) whatever the stack.
        "deep.jsonl": "[" * 100_000 + "]" * 100_000 + "\n",
        "a_file": "",
    }
    for name, content in files.items():
        path = folder / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    return folder


# (id, arguments, exit code, fragment of the message). {d} is the work folder; the command
# gets --config {d}/config.toml first unless it names its own config.
CASES = [
    ("dataset not UTF-8", "dataset import {d}/latin1.jsonl", 1, "line 1 is not UTF-8"),
    ("dataset bad JSON", "dataset import {d}/bad_json.jsonl", 1, "line 2: not valid JSON"),
    ("dataset no items", "dataset import {d}/empty.jsonl", 1, "holds no items"),
    ("dataset missing", "dataset import {d}/nope.jsonl", 1, "not found"),
    ("dataset export unwritable", "dataset export sample {d}/a_file/x.jsonl", 1, "cannot write"),
    ("dataset unknown", "dataset show nosuch", 1, "nosuch"),
    ("human not UTF-8", "agreement compute --human {d}/latin1.csv", 1, "line 2 is not UTF-8"),
    ("unterminated quote", "agreement compute --human {d}/quote.csv", 1, "line 2 is not valid CSV"),
    ("stray quote", "agreement compute --human {d}/stray_quote.csv", 1, "line 2 is not valid CSV"),
    ("short row", "agreement compute --human {d}/short.csv", 1, "line 2: score is missing"),
    ("no score column", "agreement compute --human {d}/no_score_column.csv", 1, "needs the column"),
    ("header only", "agreement compute --human {d}/header_only.csv", 1, "no rows"),
    ("score off scale", "agreement compute --human {d}/off_scale.csv", 1, "outside the 1-5"),
    (
        "judge not UTF-8",
        "agreement compute --human {d}/human.csv --judge {d}/judge_latin1.csv",
        1,
        "line 2 is not UTF-8",
    ),
    (
        "no item in common",
        "agreement compute --human {d}/human.csv --judge {d}/judge_other_ids.csv",
        1,
        "no item_id of",
    ),
    (
        "judge all NA",
        "agreement compute --human {d}/human.csv --judge {d}/judge_all_na.csv",
        1,
        "is empty or NA",
    ),
    ("human missing", "agreement compute --human {d}/nope.csv", 1, "not found"),
    ("binary config", "--config {d}/binary.toml dataset list", 1, "is not UTF-8 text"),
    ("bad TOML config", "--config {d}/bad.toml dataset list", 1, "is not valid TOML"),
    ("config value off range", "--config {d}/range.toml dataset list", 1, "must be <= 2"),
    ("missing config", "--config {d}/nope.toml dataset list", 1, "not found"),
    ("key in base_url", "--config {d}/key_in_userinfo.toml dataset list", 1, "api_key_env"),
    ("key in base_url query", "--config {d}/key_in_query.toml dataset list", 1, "api_key_env"),
    ("option off range", "judge 1 --temperature 5", 1, "--temperature 5: must be <= 2"),
    # The overrides reach the settings once, where the request runs (issue 43); a bad one is
    # still named by its option, whether a field's bound or the config refuses it.
    ("generate option off range", "generate s --temperature 5", 1, "--temperature 5: must be <="),
    ("option names no endpoint", "judge 1 --endpoint nope", 1, "--endpoint nope: [judge] endpo"),
    ("queued names no endpoint", "judge 1 --endpoint x --queue", 1, "--endpoint x: [judge] endpo"),
    ("sweep temperature off range", "sweep 1 --temperatures 0.1,3", 1, "temperatures.1: Input"),
    ("db URL malformed", "--db foo dataset list", 1, "not a database URL"),
    ("db URL unknown kind", "--db nosuch://x dataset list", 1, "unknown database kind"),
    (
        "db URL no driver",
        f"--db postgresql+psycopg2://u:{SECRET}@localhost/db dataset list",
        1,
        "driver psycopg2 is not installed",
    ),
    (
        "db unreachable",
        f"--db postgresql+psycopg://u:{SECRET}@127.0.0.1:1/db dataset list",
        1,
        "cannot open the database postgresql+psycopg://u:***@127.0.0.1:1/db",
    ),
    ("db bad port", "--db postgresql://u:p@h:port/db dataset list", 1, "not a database URL"),
    (
        "db folder missing",
        "--db sqlite:///{d}/no/such/dir/x.db dataset list",
        1,
        "unable to open database file",
    ),
    ("db not a database", "--db sqlite:///{d}/not_a_db.txt dataset list", 1, "not a database"),
    ("report unknown run", "report 999 --out {d}/out", 1, "999"),
    ("demo limit 0", "demo --limit 0", 2, "--limit"),
    ("unknown option", "dataset list --bogus", 2, "No such option"),
    ("run id not a number", "report abc --out {d}/out", 2, "is not a valid integer"),
    # The largest id PostgreSQL's integer columns hold is 2**31 - 1 = 2,147,483,647; 2**31 and
    # 2**63 (past SQLite's 64-bit integers too) are refused before any query.
    ("run id past 32 bits", "report 2147483648 --out {d}/out", 1, "larger than any id"),
    ("run id past 64 bits", "report 9223372036854775808 --out {d}/out", 1, "(2,147,483,647)"),
    ("judge id past 64 bits", "judge 9223372036854775808", 1, "larger than any id"),
    ("dataset nested 100k deep", "dataset import {d}/deep.jsonl", 1, "nested too deeply"),
    (
        "db read-only",
        f"--db sqlite:///file:{{d}}/store.db?mode=ro&uri=true dataset import {SAMPLE} --name ro",
        1,
        "is read-only",
    ),
    (
        "db read-only write",
        "--db sqlite:///file:{d}/store.db?mode=ro&uri=true keys create --name x",
        1,
        "is read-only",
    ),
]


def row_counts(db: Path) -> dict[str, int]:
    """Rows in every table of the store."""
    with sqlite3.connect(db) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {t: conn.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in tables}


def argv_of(work: Path, args: str) -> list[str]:
    """The case's arguments, with the work folder's config first unless it names its own."""
    argv = args.format(d=work).split()
    if "--config" not in argv:
        argv = ["--config", str(work / "config.toml"), *argv]
    return argv


def check_refused(done: Done | subprocess.CompletedProcess[str], code: int, fragment: str) -> None:
    """The documented exit code, the message, no traceback, no secret, at most three lines."""
    assert done.returncode == code, done.stderr
    assert fragment in done.stderr
    assert "Traceback" not in done.stderr
    assert SECRET not in done.stderr + done.stdout
    # click's usage errors add a blank line before their "Error:" line.
    assert len([line for line in done.stderr.splitlines() if line.strip()]) <= 3, done.stderr


@pytest.mark.parametrize(
    ("args", "code", "fragment"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_bad_input_is_one_line_and_changes_nothing(
    work: Path, args: str, code: int, fragment: str
) -> None:
    before = row_counts(work / "store.db")
    check_refused(fairjudge(*argv_of(work, args), cwd=work), code, fragment)
    assert row_counts(work / "store.db") == before


# The cases that also run as the real console script: exit 1 for a bad file, exit 2 for a
# usage error (click's own message), and a database URL whose password must be masked.
REAL_PROCESS = ["dataset bad JSON", "unknown option", "db unreachable"]


@pytest.mark.parametrize(
    ("args", "code", "fragment"),
    [c[1:] for c in CASES if c[0] in REAL_PROCESS],
    ids=[c[0] for c in CASES if c[0] in REAL_PROCESS],
)
def test_bad_input_in_a_real_process(work: Path, args: str, code: int, fragment: str) -> None:
    before = row_counts(work / "store.db")
    done = subprocess.run(
        [*FAIRJUDGE, *argv_of(work, args)], capture_output=True, text=True, timeout=120, cwd=work
    )
    check_refused(done, code, fragment)
    assert row_counts(work / "store.db") == before


def test_the_real_process_cases_are_in_the_table() -> None:
    assert len({c[0] for c in CASES} & set(REAL_PROCESS)) == len(REAL_PROCESS)


def process_state() -> dict[str, object]:
    """What an in-process run could leave changed for the cases after it."""
    from server import cli as cli_module

    return {
        "environ": dict(os.environ),
        "cwd": os.getcwd(),
        "argv": list(sys.argv),
        "streams": (sys.stdin, sys.stdout, sys.stderr),
        "signals": [signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)],
        "root logger": (list(logging.root.handlers), logging.root.level),
        "warning filters": list(warnings.filters),
        "interrupted": list(cli_module._interrupted),
        "context class": cli_module.Context,
    }


def test_in_process_runs_leave_nothing_behind(work: Path) -> None:
    """A case run in process leaves this process as it found it, and a case after a bad one
    gives what it gives alone (no settings or store kept from the case before)."""
    before = process_state()
    good = ["--config", str(work / "config.toml"), "dataset", "list", "--json"]
    bad = ["--config", str(work / "bad.toml"), "dataset", "list", "--json"]
    first = fairjudge(*good)
    assert first.returncode == 0, first.stderr
    assert [d["name"] for d in json.loads(first.stdout)] == ["sample"]  # imported by `work`
    refused = fairjudge(*bad)
    assert refused.returncode == 1 and "is not valid TOML" in refused.stderr
    assert fairjudge(*good) == first
    assert fairjudge(*bad) == refused
    # The environment given is seen by the command and gone afterwards.
    from_env = fairjudge("dataset", "list", env={"FAIRJUDGE_DATABASE_URL": "foo"})
    assert from_env.returncode == 1 and "not a database URL" in from_env.stderr
    assert fairjudge("dataset", "list", "--bogus", cwd=work).returncode == 2
    assert fairjudge("--help").returncode == 0
    assert process_state() == before


def test_at_least_the_issues_21_cases() -> None:
    assert len(CASES) >= 21


def test_bom_dataset_imports(work: Path, tmp_path: Path) -> None:
    """A UTF-8 byte-order mark is accepted in item files as it is in CSV files."""
    bom = tmp_path / "bom.jsonl"
    bom.write_bytes(b"\xef\xbb\xbf" + SAMPLE.read_bytes())
    done = fairjudge("--db", f"sqlite:///{tmp_path / 'x.db'}", "dataset", "import", bom)
    assert done.returncode == 0, done.stderr
    assert "added" in done.stdout


def test_debug_shows_the_traceback(work: Path) -> None:
    # A real process: the traceback reaches the console script's stderr, and its last line
    # is still the one error line.
    argv = ["--debug", "--db", "foo", "dataset", "list"]
    done = subprocess.run([*FAIRJUDGE, *argv], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert "Traceback" in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("error: cannot use database_url foo")


# main() in-process, with a command that raises what a real command might.
def _run_main(monkeypatch: pytest.MonkeyPatch, exc: BaseException, *root: str) -> int:
    from server import cli as cli_module

    def boom() -> None:
        raise exc

    monkeypatch.setitem(cli_module.cli.commands, "boom", click.Command("boom", callback=boom))
    monkeypatch.setattr(sys, "argv", ["fairjudge", *root, "boom"])
    with pytest.raises(SystemExit) as exited:
        cli_module.main()
    code = exited.value.code
    assert isinstance(code, int)
    return code


@pytest.mark.parametrize(
    ("exc", "code", "line"),
    [
        (FairJudgeError("bad thing; do X"), 1, "error: bad thing; do X"),
        (IncompleteError("3 of 10 judgments are missing"), 3, "3 of 10 judgments are missing"),
        (
            RuntimeError("boom\nsecond line"),
            70,
            "error: unexpected RuntimeError: boom (run with --debug for the traceback)",
        ),
        (KeyboardInterrupt(), 130, "interrupted: finished work is stored"),
    ],
)
def test_main_maps_exceptions_to_exit_codes(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    exc: BaseException,
    code: int,
    line: str,
) -> None:
    got = _run_main(monkeypatch, exc)
    stderr = capsys.readouterr().err
    assert got == code
    assert line in stderr and "Traceback" not in stderr
    assert len(stderr.strip().splitlines()) == 1


def test_main_with_debug_prints_the_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    got = _run_main(monkeypatch, RuntimeError("boom"), "--debug")
    stderr = capsys.readouterr().err
    assert got == 70
    assert "Traceback" in stderr and "RuntimeError: boom" in stderr


def test_writing_names_the_path_and_reason(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(FairJudgeError, match=r"cannot write .*file/x\.json: Not a directory"):
        with writing(blocker / "x.json"):
            (blocker / "x.json").write_text("{}")


def test_masked_hides_passwords() -> None:
    assert masked("postgresql+psycopg://u:pw@h/db") == "postgresql+psycopg://u:***@h/db"
    assert masked("postgresql://u:pw@h:port/db") == "postgresql://u:***@h:port/db"
    assert masked("sqlite:///x.db") == "sqlite:///x.db"


@pytest.fixture
def client(db_url: str) -> FlaskClient:
    settings = Settings.model_validate(
        {
            "database_url": db_url,
            "endpoints": {"embedded": {"base_url": "http://127.0.0.1:1/v1", "model": "m"}},
        }
    )
    make_engine(db_url).dispose()
    return create_app({"SETTINGS": settings, "TESTING": True}).test_client()


@pytest.mark.parametrize("run_id", [2**63, 2**63 - 1, 2**70, 0])
def test_api_run_ids_out_of_range_are_404(client: FlaskClient, run_id: int) -> None:
    response = client.get(f"/api/judge-runs/{run_id}/report")
    assert response.status_code == 404
    assert set(response.get_json()) == {"error"}
    assert response.get_json()["error"]["status"] == 404
