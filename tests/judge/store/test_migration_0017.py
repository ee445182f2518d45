"""Revision 0017: a secret stored in a base URL before every form was refused (issue 41's
``http://127.0.0.1:8834/v1;key=SECRET``) leaves every table, ``runs --json``, report.json and
report.html; a URL without a secret stays exactly as written. Readers redact too (a second
guard), so a secret written into a row after the upgrade is not printed either.

The store is made by the real command line (a stub model server answers: only the URLs
matter here), taken back to 0016, then planted with one URL per secret form the
configuration refuses (``SECRET_URLS`` of tests/judge/test_endpoint_url.py, each with the
secret written out by hand beside it)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic import command
from sqlalchemy.engine import Engine

from judge.store.engine import alembic_config, current_revision, head_revision
from tests.judge.test_endpoint_url import SECRET_URLS
from tests.judge.test_run_identity import DATASET, run, write_config
from tests.support.factories import SAMPLE
from tests.support.stub_openai import StubServer

WHEN = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
CLEAN = "http://127.0.0.1:8834/v1"  # no secret: must come back byte for byte
MATRIX = "http://127.0.0.1:8834/v1;key=SECRETvalue0017"  # the form issue 41 saw leak
MATRIX_SECRET = "SECRETvalue0017"
USERINFO = "https://user:pa55wordVALUE0017@api.example/v1"  # the generation run's form
USERINFO_SECRET = "pa55wordVALUE0017"
PLANTED = [*SECRET_URLS, (MATRIX, MATRIX_SECRET), (USERINFO, USERINFO_SECRET)]
SECRETS = [secret for _, secret in PLANTED]


def _row(table: sa.Table, **values: Any) -> dict[str, Any]:
    """A row of ``table`` with ``values`` and plain values in the other required columns."""
    row: dict[str, Any] = {}
    for c in table.c:
        if c.name in values or c.nullable or c.primary_key or c.server_default is not None:
            continue
        kind = c.type.python_type if not isinstance(c.type, sa.JSON) else dict
        row[c.name] = {"int": 0, "float": 0.0, "bool": False, "dict": {}}.get(kind.__name__, "x")
        if kind.__name__ == "datetime":
            row[c.name] = WHEN
    return {**row, **values}


def _plant(engine: Engine, gen_id: int, judge_id: int) -> None:
    """Every base URL column (and an item's provenance) given each secret form, and one row
    of each run table at the clean URL."""
    with engine.begin() as conn:
        meta = sa.MetaData()
        meta.reflect(conn)
        t = meta.tables
        conn.execute(t["generationrun"].update().values(base_url=USERINFO))
        conn.execute(t["judgerun"].update().values(base_url=MATRIX))
        for number, (url, _) in enumerate([*SECRET_URLS, (CLEAN, "")]):
            conn.execute(
                t["generationrun"]
                .insert()
                .from_select(
                    [c.name for c in t["generationrun"].c if c.name != "id"],
                    sa.select(
                        *[
                            sa.literal(url).label("base_url") if c.name == "base_url" else c
                            for c in t["generationrun"].c
                            if c.name != "id"
                        ]
                    ).where(t["generationrun"].c.id == gen_id),
                )
            )
            copy = conn.execute(sa.select(sa.func.max(t["generationrun"].c.id))).scalar_one()
            judge = conn.execute(sa.select(t["judgerun"]).where(t["judgerun"].c.id == judge_id))
            values = {k: v for k, v in judge.one()._asdict().items() if k != "id"}
            values.update(generation_run_id=copy, base_url=url, config_hash=f"p{number}")
            conn.execute(t["judgerun"].insert(), [values])
            conn.execute(
                t["auditrun"].insert(),
                [_row(t["auditrun"], suite="bbi", base_url=url, config_hash=f"a{number}")],
            )
            conn.execute(
                t["itemgenerationcall"].insert(),
                [_row(t["itemgenerationcall"], dataset_id=1, attempt=number, base_url=url)],
            )
            conn.execute(
                t["batchjob"].insert(),
                [_row(t["batchjob"], base_url=url, input_name=f"in{number}", keys=[])],
            )
        conn.execute(
            t["item"].update().where(t["item"].c.id == 1),
            {"provenance": {"source": "generated", "base_url": MATRIX}},
        )
        conn.execute(
            t["item"].update().where(t["item"].c.id == 2),
            {"provenance": {"source": "generated", "base_url": CLEAN}},
        )


def _dump(engine: Engine) -> str:
    """Every row of every table as text."""
    with engine.connect() as conn:
        meta = sa.MetaData()
        meta.reflect(conn)
        return "\n".join(
            repr(row) for table in meta.sorted_tables for row in conn.execute(sa.select(table))
        )


def _urls(engine: Engine, table: str) -> list[str]:
    with engine.connect() as conn:
        return list(conn.execute(sa.text(f"SELECT base_url FROM {table} ORDER BY id")).scalars())


def _outputs(config: Path, judge_id: int, out: Path) -> tuple[dict[str, Any], str]:
    """``runs --json`` and the judge run's report (both files) as one text to grep."""
    listing = run(config, "runs")
    run(config, "report", str(judge_id), "--out", str(out))
    files = (out / "report.json").read_text() + (out / "report.html").read_text()
    return listing, json.dumps(listing) + files


def test_0017_redacts_every_stored_base_url_and_readers_never_print_a_secret(
    tmp_path: Path, db_url: str, engine: Engine
) -> None:
    with StubServer() as stub:
        config = write_config(tmp_path / "c.toml", db_url, stub.base_url, stub.base_url)
        run(config, "dataset", "import", str(SAMPLE))
        gen = run(config, "generate", DATASET, "--limit", "3")
        judged = run(config, "judge", str(gen["run_id"]))
    with engine.begin() as conn:
        command.downgrade(alembic_config(conn), "0016")  # no schema change: nothing dropped
    assert current_revision(engine) == "0016"
    _plant(engine, gen["run_id"], judged["run_id"])
    before = _dump(engine)
    assert all(secret in before for secret in SECRETS)  # the test plants what it looks for

    listing, printed = _outputs(config, judged["run_id"], tmp_path / "report")  # migrates
    assert current_revision(engine) == head_revision()
    after = _dump(engine)
    for secret in SECRETS:
        assert secret not in after, secret
        assert secret not in printed, secret
    # By hand from redacted()'s rule: the matrix parameter goes, the segment before it stays;
    # the user and password go, the host stays.
    judge_urls = _urls(engine, "judgerun")
    assert judge_urls[0] == "http://127.0.0.1:8834/v1;REDACTED"
    assert _urls(engine, "generationrun")[0] == "https://api.example/v1"
    assert listing["judge_runs"][0]["base_url"] == "http://127.0.0.1:8834/v1;REDACTED"
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    assert "http://127.0.0.1:8834/v1;REDACTED" in json.dumps(report)
    # The clean URL, the last row planted in each table, is kept exactly, and so is it in
    # provenance; no false redaction.
    for table in ("generationrun", "judgerun", "auditrun", "itemgenerationcall", "batchjob"):
        assert _urls(engine, table)[-1] == CLEAN, table
    assert listing["judge_runs"][-1]["base_url"] == CLEAN
    assert listing["generation_runs"][-1]["base_url"] == CLEAN
    with engine.connect() as conn:
        provenance = dict(conn.execute(sa.text("SELECT id, provenance FROM item")).all())
    assert json.loads(provenance[1])["base_url"] == "http://127.0.0.1:8834/v1;REDACTED"
    assert json.loads(provenance[2])["base_url"] == CLEAN

    # The second guard: a secret written into a row now (no migration left to run) is still
    # not printed by runs --json or the report.
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE judgerun SET base_url = :u WHERE id = :i"),
                     {"u": MATRIX, "i": judged["run_id"]})  # fmt: skip
        conn.execute(sa.text("UPDATE generationrun SET base_url = :u WHERE id = :i"),
                     {"u": USERINFO, "i": gen["run_id"]})  # fmt: skip
    assert MATRIX_SECRET in _dump(engine) and USERINFO_SECRET in _dump(engine)
    listing, printed = _outputs(config, judged["run_id"], tmp_path / "again")
    assert MATRIX_SECRET not in printed and USERINFO_SECRET not in printed
    assert listing["judge_runs"][0]["base_url"] == "http://127.0.0.1:8834/v1;REDACTED"
    assert listing["judge_runs"][-1]["base_url"] == CLEAN


def test_an_exported_item_never_carries_a_stored_secret_and_keeps_a_clean_url() -> None:
    from judge.data.items import item_to_json
    from judge.store.tables import Item

    def exported(url: str) -> Any:
        item = Item(
            dataset_id=1, key="k", stage="S1", factor="gender", scenario="education",
            fields={"question": "?"}, content_hash="h",
            provenance={"source": "generated", "base_url": url},
        )  # fmt: skip
        return item_to_json(item)["provenance"]

    # By hand from redacted()'s rule (the matrix parameter goes); the clean URL as written.
    assert exported(MATRIX) == {"source": "generated", "base_url": f"{CLEAN};REDACTED"}
    assert exported(CLEAN) == {"source": "generated", "base_url": CLEAN}


def _migration() -> Any:
    """The revision's module, loaded from its file (an Alembic version is not a package)."""
    import importlib.util

    file = (
        Path(__file__).resolve().parents[3]
        / "judge/store/migrations/versions/0017_redact_stored_base_urls.py"
    )
    spec = importlib.util.spec_from_file_location("revision_0017", file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_0017_is_frozen_and_keeps_the_rule_of_its_release() -> None:
    """Issue 41 review: 0017 imported ``judge.endpoint_url.redacted``, so a later change of
    the product's rule would have changed what an old migration does. It now carries the
    rule as it stood. Before the fix the first assertion failed (the source imported
    ``judge.endpoint_url``); after it, the copy agrees with the product's rule of today
    (unchanged since) on every secret form and every ordinary URL."""
    import ast

    from judge.endpoint_url import redacted
    from tests.judge.test_endpoint_url import ORDINARY_URLS

    module = _migration()
    tree = ast.parse(Path(module.__file__).read_text())
    imported = {
        node.module if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    assert not any(
        str(name).split(".")[0] in ("judge", "server", "annotation") for name in imported
    )
    for url, secret in [*PLANTED, ("not a url ://[", "")]:
        assert module._redact(url) == redacted(url), url
        assert not secret or secret not in module._redact(url), url
    for url in [*ORDINARY_URLS, CLEAN]:
        assert module._redact(url) == url  # byte for byte


def test_0017_on_postgresql_redacts_a_stored_secret(pg_url: str) -> None:
    """The same revision on PostgreSQL (the other store the migration tests cover): an audit
    run and a batch job at the secret-bearing URL of issue 41 and one at a clean URL."""
    from judge.store.engine import make_engine

    engine = make_engine(pg_url)  # migrated to head
    try:
        with engine.begin() as conn:
            command.downgrade(alembic_config(conn), "0016")
        with engine.begin() as conn:
            meta = sa.MetaData()
            meta.reflect(conn)
            audit, batch = meta.tables["auditrun"], meta.tables["batchjob"]
            for n, url in enumerate((MATRIX, CLEAN)):
                conn.execute(audit.insert(), [_row(audit, suite="bbi", base_url=url,
                                                   config_hash=f"a{n}")])  # fmt: skip
                conn.execute(batch.insert(), [_row(batch, base_url=url, input_name=f"i{n}",
                                                   keys=[])])  # fmt: skip
        with engine.begin() as conn:
            command.upgrade(alembic_config(conn), "0017")
        assert current_revision(engine) == "0017"
        # By hand from the rule: the matrix parameter goes, the segment before it stays.
        for table in ("auditrun", "batchjob"):
            assert _urls(engine, table) == [f"{CLEAN};REDACTED", CLEAN], table
        assert MATRIX_SECRET not in _dump(engine)
    finally:
        engine.dispose()
