"""``/api/v1/keys``: API keys (admins only)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from flask import current_app

from server import auth
from server.api import admin, blueprint, dump
from server.db import get_session
from server.schemas import KeyCreate, KeyCreated, KeyOut, ListOf, NamePath

bp = blueprint("keys", __name__, "keys")


@bp.get("/keys", responses={200: ListOf[KeyOut]})
def list_keys() -> Any:
    """Every key, never the key itself (admins only)."""
    admin()
    return [dump(KeyOut, asdict(k)) for k in auth.list_keys(get_session())]


@bp.post("/keys", responses={201: KeyCreated})
def create_key(body: KeyCreate) -> Any:
    """A new key, returned this once (admins only)."""
    admin()
    info, raw = auth.create_key(current_app.extensions["fairjudge_engine"], body.name, body.role)
    return {"name": info.name, "role": info.role, "key": raw}, 201


@bp.delete("/keys/<name>", responses={200: KeyOut})
def revoke_key(path: NamePath) -> Any:
    """Revoke a key: requests with it are refused from now on (admins only)."""
    admin()
    return dump(
        KeyOut, asdict(auth.revoke_key(current_app.extensions["fairjudge_engine"], path.name))
    )
