"""API keys: created once and shown once, stored as a sha256 hash, checked on every request.

Two roles: ``admin`` manages keys and endpoints; ``member`` runs jobs and reads results.
A key is 43 URL-safe characters of ``secrets.token_urlsafe`` behind the prefix ``fj_``; with
that much randomness a plain sha256 is enough (a slow password hash guards guessable
passwords, and these are not guessable), and it lets a request find its key with one
indexed lookup.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from judge.errors import FairJudgeError, InvalidInputError, NotFoundError
from judge.store.tables import utcnow
from server.tables import ApiKey, WebSession

ROLES = ("admin", "member")
PREFIX = "fj_"
SHOWN = 10
"""Characters of a key kept in clear (``prefix``), enough to tell keys apart in a list."""


class AuthError(FairJudgeError):
    """No key, or a key that is unknown or revoked (HTTP 401)."""


class ForbiddenError(FairJudgeError):
    """A valid key whose role may not do this (HTTP 403)."""


def key_hash(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


@dataclass(frozen=True)
class KeyInfo:
    """A key as listings show it: never the key itself."""

    id: int
    name: str
    role: str
    prefix: str
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None

    @classmethod
    def of(cls, row: ApiKey) -> KeyInfo:
        assert row.id is not None
        return cls(
            row.id,
            row.name,
            row.role,
            row.prefix,
            row.created_at,
            row.last_used_at,
            row.revoked_at,
        )


BIDI_CONTROLS = frozenset(
    map(chr, [0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)])
)
"""Characters that change the direction text is shown in (marks, embeddings, overrides,
isolates): in a key's name they make a listing show another name than the stored one."""
BLANKS = frozenset("\u115f\u1160\u2800\u3164\uffa0")
"""Letters and symbols that draw nothing (Hangul fillers, the blank Braille pattern)."""


def _invisible(char: str) -> bool:
    """Whether ``char`` draws nothing: a format (zero-width) or control character, a space,
    a combining mark with nothing to combine with, or one of BLANKS."""
    import unicodedata

    return char in BLANKS or char.isspace() or unicodedata.category(char) in ("Cf", "Cc", "Mn")


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a key, or None: it must show something (not only invisible
    characters), hold no control character, and change no text direction, so that the name
    people read in a listing is the name stored.

    >>> name_problem("ci-runner"), name_problem("\u200b\u200b") is not None
    (None, True)
    """
    import unicodedata

    if not name.strip():
        return "it is empty: say who or what uses the key"
    for char in name:
        if char in BIDI_CONTROLS:
            return (
                f"it holds U+{ord(char):04X}, which changes the direction text is shown in; "
                "remove it"
            )
        if unicodedata.category(char) == "Cc":
            return f"it holds the control character U+{ord(char):04X}; remove it"
    if all(_invisible(c) for c in name):
        codes = ", ".join(sorted({f"U+{ord(c):04X}" for c in name}))
        return f"it shows nothing: it is made only of invisible characters ({codes})"
    return None


def create_key(engine: Engine, name: str, role: str) -> tuple[KeyInfo, str]:
    """A new key called ``name`` with ``role``: its listing and the key itself, which is
    not stored and cannot be shown again."""
    name = name.strip()
    if (problem := name_problem(name)) is not None:
        raise InvalidInputError(f"the key's name is refused: {problem}")
    if role not in ROLES:
        raise InvalidInputError(f"role {role!r} is not one of {', '.join(ROLES)}")
    raw = PREFIX + secrets.token_urlsafe(32)
    with Session(engine) as session:
        if session.exec(select(ApiKey).where(col(ApiKey.name) == name)).first() is not None:
            raise InvalidInputError(
                f"a key named {name!r} exists; choose another name or revoke that key first"
            )
        row = ApiKey(name=name, role=role, prefix=raw[:SHOWN], key_hash=key_hash(raw))
        session.add(row)
        session.commit()
        session.refresh(row)
        return KeyInfo.of(row), raw


def list_keys(session: Session) -> list[KeyInfo]:
    rows = session.exec(select(ApiKey).order_by(col(ApiKey.id))).all()
    return [KeyInfo.of(row) for row in rows]


def revoke_key(engine: Engine, name: str) -> KeyInfo:
    """Revoke the key called ``name``; revoking a revoked key changes nothing."""
    with Session(engine) as session:
        row = session.exec(select(ApiKey).where(col(ApiKey.name) == name)).first()
        if row is None:
            raise NotFoundError(f"no key named {name!r} (see `fairjudge keys list`)")
        if row.revoked_at is None:
            row.revoked_at = utcnow()
            session.add(row)
            session.commit()
            session.refresh(row)
        return KeyInfo.of(row)


def authenticate(session: Session, raw: str | None) -> ApiKey:
    """The live key ``raw`` names, or AuthError saying what is wrong with it."""
    if not raw:
        raise AuthError(
            "this needs an API key: send `Authorization: Bearer KEY` "
            "(an admin creates keys with `fairjudge keys create`)"
        )
    row = session.exec(select(ApiKey).where(col(ApiKey.key_hash) == key_hash(raw))).first()
    if row is None:
        raise AuthError("unknown API key: check it, or ask an admin for a new one")
    if row.revoked_at is not None:
        raise AuthError(f"the API key {row.prefix}… was revoked; ask an admin for a new one")
    _touch(session, row)
    return row


LAST_USED_EVERY = timedelta(seconds=60)
"""How stale a key's ``last_used_at`` may get: it is written at most once a minute per key,
so a busy client does not turn every read into a write."""


def _touch(session: Session, row: ApiKey) -> None:
    """Set ``row.last_used_at`` to now when it is older than LAST_USED_EVERY. Its own short
    transaction, committed before the view's work starts; a store that is busy writing
    leaves it for the next request rather than failing this one."""
    from sqlalchemy import update
    from sqlalchemy.exc import OperationalError

    now = utcnow()
    last = row.last_used_at
    if last is not None and last.tzinfo is None:
        last = last.replace(tzinfo=now.tzinfo)
    if last is not None and now - last < LAST_USED_EVERY:
        return
    try:
        session.execute(update(ApiKey).where(col(ApiKey.id) == row.id).values(last_used_at=now))
        session.commit()
    except OperationalError:
        session.rollback()


def live_key(session: Session, key_id: int) -> ApiKey | None:
    """The key with row id ``key_id`` unless it is missing or revoked."""
    row = session.get(ApiKey, key_id)
    return None if row is None or row.revoked_at is not None else row


WEB_SESSION_LIFETIME = timedelta(hours=12)
"""How long a dashboard sign-in lasts before the user must paste the key again."""


def open_web_session(session: Session, key: ApiKey) -> str:
    """A new dashboard session for ``key``: the random token for the cookie. Only its hash
    is stored, so the table alone cannot be used to sign in."""
    token = secrets.token_urlsafe(32)
    assert key.id is not None
    session.add(WebSession(token_hash=key_hash(token), key_id=key.id))
    session.commit()
    return token


COOKIE_TOKEN = "session"
"""The key of the signed session cookie that holds a dashboard session's token (the
dashboard writes it at sign-in; the API reads it for the dashboard's links to reports)."""


def web_session_key(session: Session, token: str) -> ApiKey | None:
    """The live key of the dashboard session ``token`` names, or None: no such session, or
    it was signed out, is older than WEB_SESSION_LIFETIME, or its key was revoked."""
    row = session.exec(
        select(WebSession).where(col(WebSession.token_hash) == key_hash(token))
    ).first()
    if row is None or row.revoked_at is not None:
        return None
    created = row.created_at
    now = utcnow()
    if created.tzinfo is None:
        created = created.replace(tzinfo=now.tzinfo)
    if now - created > WEB_SESSION_LIFETIME:
        return None
    return live_key(session, row.key_id)


def close_web_session(session: Session, token: str) -> None:
    """Sign the session ``token`` names out for good (nothing happens for an unknown one)."""
    from sqlalchemy import update

    session.execute(
        update(WebSession)
        .where(col(WebSession.token_hash) == key_hash(token))
        .where(col(WebSession.revoked_at).is_(None))
        .values(revoked_at=utcnow())
    )
    session.commit()


def require_role(key: ApiKey, role: str) -> None:
    """ForbiddenError unless ``key`` may act as ``role`` (an admin may do what a member may)."""
    if role == "admin" and key.role != "admin":
        raise ForbiddenError(f"only an admin key may do this; key {key.name!r} is a {key.role}")


def bearer(header: str | None) -> str | None:
    """The key in an ``Authorization: Bearer KEY`` header, else None."""
    if not header:
        return None
    scheme, _, value = header.partition(" ")
    return value.strip() or None if scheme.lower() == "bearer" else None
