"""No secret stays in a stored base URL, in any form refused today.

Revision 0010 redacted the forms its release refused; ``;key=`` matrix parameters (and a
``name=value`` path segment naming a credential) were let through until later, so runs made
in between still hold them. This revision passes every stored base URL through the
redaction rule of its release again (``judge.endpoint_url.redacted`` as it stood then,
written out below: a migration must do the same thing whenever it runs, so it never imports
product code that may change): ``base_url`` of ``generationrun``, ``judgerun``,
``auditrun``, ``itemgenerationcall`` and ``batchjob``, and ``item.provenance["base_url"]``.
A URL without a secret is left exactly as written.

No schema change. Run identity is untouched (a judge run's ``config_hash`` was fixed by
0010), and such a run could not be resumed anyway: its URL is refused at configuration now.
Downgrading keeps the redaction (the secret is gone for good).

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-02
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

URL_TABLES = ("generationrun", "judgerun", "auditrun", "itemgenerationcall", "batchjob")
"""Every table with a ``base_url`` column."""


# -- the redaction rule of this release, frozen ------------------------------------------
# What ``judge.endpoint_url`` refused and redacted when 0017 was written, restated here.

MARK = "REDACTED"
# Parameter names (lower case, without '-' and '_') that always hold a credential, and parts
# that mark a name as one wherever they appear.
CREDENTIAL_NAMES = frozenset(
    "key apikey xapikey subscriptionkey ocpapimsubscriptionkey code sig signature token "
    "accesstoken idtoken refreshtoken authtoken bearer jwt secret clientsecret password "
    "passwd pwd pass auth authorization credential credentials session sessionid".split()
)
CREDENTIAL_PARTS = ("key", "token", "secret", "passw", "signature", "credential", "auth")
KNOWN_KEY = re.compile(
    r"^(?:(?:sk|rk|pk|hf|gsk|ghp|gho|ghu|ghs|ghr|github_pat|glpat|xai|xox[abposr]|pypi|npm)"
    r"[-_][A-Za-z0-9_\-]{16,}|AIza[A-Za-z0-9_\-]{20,}|eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-.]+)$"
)
HEX_RUN = re.compile(r"^[0-9a-fA-F]{20,}$")
BASE64_RUN = re.compile(r"^[A-Za-z0-9+/=]{20,}$")
BASE64URL_RUN = re.compile(r"^[A-Za-z0-9_\-]{20,}$")
SEPARATORS = re.compile(r"[-_.~]")
CASE_FLIPS = 0.4  # share of character-class changes from which a base64url run is a key


def _all_classes(text: str) -> bool:
    return (
        any(c.isdigit() for c in text)
        and any(c.islower() for c in text)
        and any(c.isupper() for c in text)
    )


def _flip_rate(text: str) -> float:
    def cls(c: str) -> str | None:
        return "d" if c.isdigit() else "l" if c.islower() else "u" if c.isupper() else None

    flips = sum(
        1 for a, b in zip(text, text[1:], strict=False) if cls(a) and cls(b) and cls(a) != cls(b)
    )
    return flips / max(1, sum(c.isalnum() for c in text))


def _keylike(text: str) -> bool:
    text = unquote(text)
    if KNOWN_KEY.match(text):
        return True
    for piece in SEPARATORS.split(text):
        if HEX_RUN.match(piece) and any(c.isdigit() for c in piece):
            return True
        if BASE64_RUN.match(piece) and _all_classes(piece):
            return True
    return bool(BASE64URL_RUN.match(text)) and _all_classes(text) and _flip_rate(text) >= CASE_FLIPS


def _credential_name(name: str) -> bool:
    flat = name.lower().replace("-", "").replace("_", "")
    return flat in CREDENTIAL_NAMES or any(part in flat for part in CREDENTIAL_PARTS)


def _has_secret(url: str) -> bool:
    try:
        parts = urlsplit(url.strip())
        if parts.username or parts.password or "@" in parts.netloc:
            return True
    except ValueError:
        return True  # not a URL at all: the release's rule refused it, and redacted it whole
    if "#" in url:
        return True
    for name, value in parse_qsl(parts.query.replace(";", "&"), keep_blank_values=True):
        if _credential_name(name) or _keylike(value):
            return True
    for segment in (s for s in parts.path.split("/") if s):
        plain = unquote(segment)
        name, equals, value = plain.partition("=")
        if ";" in plain or (equals and (_credential_name(name) or _keylike(value))):
            return True
        if _keylike(segment):
            return True
    return False


def _clean_segment(segment: str) -> str:
    plain = unquote(segment)
    head, semi, _ = plain.partition(";")
    if semi:
        return f"{_clean_segment(head)};{MARK}" if head else MARK
    name, equals, value = plain.partition("=")
    if equals and (_credential_name(name) or _keylike(value)):
        return MARK
    return MARK if segment and _keylike(segment) else segment


def _redact(url: str) -> str:
    """``url`` with each secret replaced by the mark (user and password and the fragment
    dropped); a URL without one exactly as written."""
    if not _has_secret(url):
        return url
    try:
        parts = urlsplit(url.strip())
        host = parts.netloc.rsplit("@", 1)[-1]
    except ValueError:
        return MARK
    path = "/".join(_clean_segment(s) for s in parts.path.split("/"))
    pairs = parse_qsl(parts.query.replace(";", "&"), keep_blank_values=True)
    query = urlencode([(k, MARK if _credential_name(k) or _keylike(v) else v) for k, v in pairs])
    return f"{parts.scheme}://{host}{path}" + (f"?{query}" if query else "")


def upgrade() -> None:
    conn = op.get_bind()
    for name in URL_TABLES:
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
    # Nothing to undo in the schema, and a removed secret is not put back.
    pass
