"""Runs know their server; no secret stays in a stored base URL.

- ``judgerun.config_hash``: a judge run's identity now includes its server. A run made
  before held the hash of its settings alone; it becomes ``sha256({"settings": old hash,
  "server": normal form of the run's own base_url})[:16]``, exactly what
  ``judge.grading.judging.judge_config_hash`` gives now for the same settings at that URL, so
  every existing run still resumes at its own server, and at no other. (Generation runs
  compare their stored ``base_url`` column and need nothing; audit runs hashed their URL
  from the start.)
- ``base_url`` of ``generationrun``, ``judgerun``, ``auditrun`` and ``itemgenerationcall``,
  and ``item.provenance["base_url"]``: a URL that holds a secret in a form the previous
  release let through (``?x-api-key=``, ``?code=``, a token-like path segment, a fragment)
  has the secret replaced by ``REDACTED`` (``judge.endpoint_url.redacted``). Such a run can
  no longer be resumed (its config must change anyway: the URL is refused now).

No schema change. Downgrading leaves both in place: the previous release then starts new
judge runs instead of resuming the old ones, and its call cache answers their calls (the
cache key holds the URL, not the run), so nothing is paid twice.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-26
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

_DEFAULT_PORTS = {"http": 80, "https": 443}


def identity_url(url: str) -> str:
    """A frozen copy of ``judge.endpoint_url.identity_url`` as of this revision (a later
    change there must not change what this migration wrote; a test checks they agree)."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is not None and port != _DEFAULT_PORTS.get(scheme):
        host += f":{port}"
    path = re.sub(r"/{2,}", "/", parts.path).rstrip("/")
    query = urlencode(sorted(parse_qsl(parts.query, keep_blank_values=True)))
    return f"{scheme}://{host}{path}" + (f"?{query}" if query else "")


def server_hash(settings: str, base_url: str) -> str:
    """A frozen copy of ``judge.grading.judging.server_hash`` as of this revision."""
    body = {"settings": settings, "server": identity_url(base_url)}
    return hashlib.sha256(
        json.dumps(body, sort_keys=True, ensure_ascii=False).encode("utf-8")
    ).hexdigest()[:16]


def _redact(url: str) -> str:
    # Redaction only ever removes more: the current detector is the right one to use.
    from judge.endpoint_url import redacted, secret_problem

    return redacted(url) if secret_problem(url) is not None else url


def upgrade() -> None:
    conn = op.get_bind()
    for name in ("generationrun", "judgerun", "auditrun", "itemgenerationcall"):
        table = sa.table(name, sa.column("id", sa.Integer()), sa.column("base_url", sa.String()))
        for row_id, url in conn.execute(sa.select(table.c.id, table.c.base_url)).all():
            clean = _redact(url or "")
            if url and clean != url:
                conn.execute(table.update().where(table.c.id == row_id).values(base_url=clean))
    item = sa.table("item", sa.column("id", sa.Integer()), sa.column("provenance", sa.JSON()))
    for row_id, provenance in conn.execute(
        sa.select(item.c.id, item.c.provenance).where(item.c.provenance.is_not(None))
    ).all():
        fixed = _clean_provenance(provenance)
        if fixed is not None:
            conn.execute(item.update().where(item.c.id == row_id).values(provenance=fixed))
    judgerun = sa.table(
        "judgerun",
        sa.column("id", sa.Integer()),
        sa.column("base_url", sa.String()),
        sa.column("config_hash", sa.String()),
    )
    rows = conn.execute(sa.select(judgerun.c.id, judgerun.c.base_url, judgerun.c.config_hash))
    for row_id, url, digest in rows.all():
        conn.execute(
            judgerun.update()
            .where(judgerun.c.id == row_id)
            .values(config_hash=server_hash(digest, url or ""))
        )


def _clean_provenance(provenance: Any) -> dict[str, Any] | None:
    """The provenance with its base_url redacted, or None when nothing changes."""
    if isinstance(provenance, str):  # a JSON column read back as text by some drivers
        provenance = json.loads(provenance)
    if not isinstance(provenance, dict) or not isinstance(provenance.get("base_url"), str):
        return None
    clean = _redact(provenance["base_url"])
    if clean == provenance["base_url"]:
        return None
    return {**provenance, "base_url": clean}


def downgrade() -> None:
    # Nothing to undo in the schema; see the module docstring for the hashes and redactions.
    pass
