"""Runs know their server: the same model name at another base_url is another run, a stored
run is never continued at another server, and runs stored before the server was part of
their identity still resume at their own. Everything goes through the real command line
against two scripted stub servers (A and B, both calling their model "stub-model"), whose
chat requests are counted.

Counts are by hand: the first items of the sample dataset are S1 items, one answer each and
one rubric (ICS) with one sample, so ``--limit 3`` is 3 generation calls and 3 judge calls.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from click.testing import CliRunner, Result
from sqlalchemy.engine import Engine
from sqlmodel import select

from judge import paths
from judge.data.datasets import import_items
from judge.data.responses import import_responses
from judge.prompts import PromptBook
from judge.store.engine import session_scope
from judge.store.tables import Item
from server.cli import cli
from tests.judge.trust.test_trust import by_name
from tests.support.factories import FAIRJUDGE, SAMPLE
from tests.support.stub_openai import StubServer

DATASET = "fairmonitor_sample"


def write_config(path: Path, db_url: str, a: str, b: str) -> Path:
    """Endpoints ``a`` and ``b`` serving the same model name; ``a`` answers and judges."""
    endpoints = "".join(
        f'[endpoints.{name}]\nbase_url = "{url}"\nmodel = "stub-model"\n'
        'structured_output = "json_object_schema"\nmax_retries = 0\n'
        for name, url in (("a", a), ("b", b))
    )
    path.write_text(
        f'database_url = "{db_url}"\nstate_dir = "{path.parent / "state"}"\n{endpoints}'
        '[generation]\nendpoint = "a"\nmax_tokens = 32\n[judge]\nendpoint = "a"\n'
    )
    return path


def run(config: Path, *args: str) -> dict[str, Any]:
    """A command through click that must succeed; its --json output."""
    result: Result = CliRunner().invoke(cli, ["--config", str(config), *args, "--json"])
    assert result.exit_code == 0, (result.output, result.exception)
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def calls(stub: StubServer) -> int:
    """Chat requests the stub received (model listings are not calls)."""
    return len(stub.state.bodies)


def table_rows(engine: Engine) -> dict[str, int]:
    with engine.connect() as conn:
        names = sorted(sa.inspect(conn).get_table_names())
        return {
            n: conn.execute(sa.select(sa.func.count()).select_from(sa.table(n))).scalar_one()
            for n in names
        }


def test_judging_at_another_server_is_a_new_run_named_in_its_row_and_report(
    tmp_path: Path, db_url: str
) -> None:
    with StubServer() as a, StubServer() as b:
        config = write_config(tmp_path / "c.toml", db_url, a.base_url, b.base_url)
        run(config, "dataset", "import", str(SAMPLE))
        gen = run(config, "generate", DATASET, "--limit", "3")
        first = run(config, "judge", str(gen["run_id"]))
        assert (first["model_calls"], calls(a)) == (3, 6)  # 3 answers + 3 judgments at A
        # The issue: the same model name at B resumed A's run, said nothing new, called no one.
        second = run(config, "judge", str(gen["run_id"]), "--endpoint", "b")
        assert second["run_id"] != first["run_id"]
        assert (second["model_calls"], second["cached"], calls(b), calls(a)) == (3, 0, 3, 6)
        # Asked again at B: B's run resumes, nothing new anywhere.
        again = run(config, "judge", str(gen["run_id"]), "--endpoint", "b")
        assert (again["run_id"], again["model_calls"], calls(b)) == (second["run_id"], 0, 3)
        listed = run(config, "runs")["judge_runs"]
        report = tmp_path / "report"
        run(config, "report", str(second["run_id"]), "--out", str(report))
    by_id = {r["id"]: (r["endpoint"], r["base_url"]) for r in listed}
    assert by_id == {first["run_id"]: ("a", a.base_url), second["run_id"]: ("b", b.base_url)}
    html = (report / "report.html").read_text()
    assert f"judged by stub-model at {b.base_url}" in html
    assert f"at {a.base_url}, temperature" in html  # the answers came from A


def test_generation_at_another_server_is_a_new_run_but_a_trailing_slash_is_not(
    tmp_path: Path, db_url: str, engine: Engine
) -> None:
    with StubServer() as a, StubServer() as b:
        config = write_config(tmp_path / "c.toml", db_url, a.base_url, b.base_url)
        run(config, "dataset", "import", str(SAMPLE))
        first = run(config, "generate", DATASET, "--limit", "3")
        assert (first["model_calls"], calls(a)) == (3, 3)
        # The same server written with a trailing slash and an upper-case scheme: same run.
        write_config(config, db_url, "HTTP" + a.base_url[4:] + "/", b.base_url)
        same = run(config, "generate", DATASET, "--limit", "3")
        assert (same["run_id"], same["tasks"], calls(a)) == (first["run_id"], 0, 3)
        # Endpoint "a" now points to B: another run, all of whose answers B gives.
        write_config(config, db_url, b.base_url, a.base_url)
        moved = run(config, "generate", DATASET, "--limit", "3")
        assert moved["run_id"] != first["run_id"]
        assert (moved["model_calls"], moved["cached"], calls(b), calls(a)) == (3, 0, 3, 3)
    with engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT g.id, g.base_url, COUNT(r.id) FROM generationrun g "
                "JOIN response r ON r.run_id = g.id GROUP BY g.id ORDER BY g.id"
            )
        ).all()
    assert [tuple(r) for r in rows] == [
        (first["run_id"], a.base_url, 3),
        (moved["run_id"], b.base_url, 3),
    ]


def test_a_judge_run_is_not_continued_at_another_server(
    tmp_path: Path, db_url: str, engine: Engine
) -> None:
    # The counterfactual check continues a named judge run with its own endpoint; after the
    # endpoint was pointed at another server it must refuse before any call or write.
    with session_scope(engine) as session:
        import_items(session, SAMPLE, "sample")
        keys = sorted(session.exec(select(Item.key).where(Item.stage == "S1")).all())[:3]
    rows = [{"item_id": k, "part": "answer", "text": "Mary did it, and she did it well."}
            for k in keys]  # fmt: skip
    imported = import_responses(engine, "sample", rows, model="writer")
    with StubServer(responder=by_name) as a, StubServer(responder=by_name) as b:
        config = write_config(tmp_path / "c.toml", db_url, a.base_url, b.base_url)
        judged = run(config, "judge", str(imported.generation_run_id))
        write_config(config, db_url, b.base_url, a.base_url)  # endpoint "a" -> server B
        before = table_rows(engine)
        refused = subprocess.run(
            [*FAIRJUDGE, "--config", str(config), "checks", "counterfactual",
             "--judge-run", str(judged["run_id"]), "--swap", "names"],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert (calls(b), b.state.requests) == (0, 0)
    assert refused.returncode == 1
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1, refused.stderr
    assert f"judge run {judged['run_id']} was made at {a.base_url}" in lines[0]
    assert f"endpoint 'a' now points to {b.base_url}" in lines[0]
    assert "base_url" in lines[0]
    assert table_rows(engine) == before


def _legacy_hash() -> str:
    """The hash a judge run of the default settings got before its server was part of it:
    the seven settings of ``write_config``'s judge (model, prompt variant, temperature 0,
    1 sample, mean, 320 tokens, the judge template version), sha256 of their sorted JSON,
    cut to 16 characters (as tests/judge/grading/test_user_rubrics.py derives it)."""
    body = {
        "model": "stub-model",
        "variant": "plain",
        "temperature": 0.0,
        "samples": 1,
        "aggregation": "mean",
        "max_tokens": 320,
        "template": PromptBook(paths.prompts_dir()).judge_version,
    }
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]


def _with_server(settings: str, url: str) -> str:
    """The documented identity: sha256 of {"server": URL, "settings": hash}, 16 characters."""
    body = json.dumps({"server": url, "settings": settings}, sort_keys=True)
    return hashlib.sha256(body.encode()).hexdigest()[:16]


def test_runs_stored_before_0010_resume_at_their_own_server_only(
    tmp_path: Path, db_url: str, engine: Engine
) -> None:
    legacy = _legacy_hash()
    with StubServer() as a, StubServer() as b:
        config = write_config(tmp_path / "c.toml", db_url, a.base_url, b.base_url)
        run(config, "dataset", "import", str(SAMPLE))
        gen = run(config, "generate", DATASET, "--limit", "3")
        first = run(config, "judge", str(gen["run_id"]))
        with engine.begin() as conn:
            (stored,) = conn.execute(sa.text("SELECT config_hash FROM judgerun")).scalars()
            assert stored == _with_server(legacy, a.base_url)
            # Turn the store back into what revision 0009 left: the settings hash alone, and
            # a run whose URL held a key in a form 0009 let through.
            conn.execute(sa.text("UPDATE judgerun SET config_hash = :h"), {"h": legacy})
            conn.execute(
                sa.text(
                    "INSERT INTO generationrun (dataset_id, endpoint_name, base_url, model, "
                    "temperature, max_tokens, template_version, status, source, created_at) "
                    "SELECT dataset_id, 'old', :url, model, temperature, max_tokens, "
                    "template_version, status, source, created_at FROM generationrun"
                ),
                {"url": "https://h.example/v1?x-api-key=abc123"},
            )
            conn.execute(sa.text("UPDATE alembic_version SET version_num = '0009'"))
            # Tables a later revision adds are not there at 0009 either (0012: dashboard
            # sessions and worker heartbeats; 0013: job parts; 0014: batch jobs; 0015:
            # dashboard figures); the upgrade makes them again.
            # 0018: judge qualifications; 0019: imported pairwise judgments; 0022: gates' verdicts.
            for table in (
                "websession", "workerbeat", "jobpart", "batchjob", "dashboardfigure",
                "judgequalification", "pairwiseverdict", "pairwiseimport", "gateverdict",
            ):  # fmt: skip
                conn.execute(sa.text(f"DROP TABLE {table}"))
            # ... nor the run cost bound of 0016, a job's not_before of 0020, nor the cached
            # prompt tokens of 0021.
            for table in ("generationrun", "judgerun", "auditrun"):
                conn.execute(sa.text(f"ALTER TABLE {table} DROP COLUMN max_cost"))
            conn.execute(sa.text("ALTER TABLE job DROP COLUMN not_before"))
            for table in (
                "callcache", "response", "judgment", "auditanswer", "itemgenerationcall",
            ):  # fmt: skip
                conn.execute(sa.text(f"ALTER TABLE {table} DROP COLUMN cached_prompt_tokens"))
        engine.dispose()
        resumed = run(config, "judge", str(gen["run_id"]))  # migrates to 0010 first
        assert (resumed["run_id"], resumed["tasks"], calls(a)) == (first["run_id"], 0, 6)
        elsewhere = run(config, "judge", str(gen["run_id"]), "--endpoint", "b")
        assert elsewhere["run_id"] != first["run_id"] and calls(b) == 3
    with engine.connect() as conn:
        hashes: dict[int, str] = dict(
            conn.execute(sa.text("SELECT id, config_hash FROM judgerun")).all()
        )
        urls = conn.execute(sa.text("SELECT base_url FROM generationrun ORDER BY id")).scalars()
        assert list(urls) == [a.base_url, "https://h.example/v1?x-api-key=REDACTED"]
    assert hashes[first["run_id"]] == _with_server(legacy, a.base_url)
    assert hashes[elsewhere["run_id"]] == _with_server(legacy, b.base_url)


def test_an_audit_at_another_server_is_another_run(tmp_path: Path, db_url: str) -> None:
    with StubServer() as a, StubServer() as b:
        config = write_config(tmp_path / "c.toml", db_url, a.base_url, b.base_url)
        args = ("audit", "names", "run", "--repeats", "1", "--limit", "2", "--allow-failures")
        at_a = run(config, *args, "--endpoint", "a")
        at_b = run(config, *args, "--endpoint", "b")
        again = run(config, *args, "--endpoint", "b")
        assert (calls(a), calls(b)) == (2, 2)
    ids = [r["pass"]["run_id"] for r in (at_a, at_b, again)]
    assert ids[0] != ids[1] and ids[1] == ids[2]
