"""The web app against hostile and careless clients, on a real store (SQLite and PostgreSQL):
out-of-range ids, NUL characters, bodies nested to crash a recursive parser, clickjacking and
sniffing headers, the ``405`` ``Allow`` header, how often a key's ``last_used_at`` is written,
and dashboard sessions that end for every copy of their cookie.

Why: each of these once was, or easily becomes, a ``500`` or a silent hole. PostgreSQL's
``integer`` ids overflow in the driver where SQLite's 64-bit ones do not; PostgreSQL refuses
to store or compare a NUL character; Python's JSON parser recurses once per level; a signed
cookie that holds the whole sign-in cannot be taken back.

Expected values come from docs/server.md (the limits written there as numbers: 64 levels,
2,147,483,647 as the largest id, once a minute, 12 hours, the four headers), from Flask's URL
map (which routes exist and the methods each has), from row counts and timestamps read from
the store with SQL, from clocks read in the test, and from a depth function written here.
"""

from __future__ import annotations

import json
import random
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from sqlalchemy import func, update
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select
from werkzeug.test import TestResponse

from judge.store.engine import make_engine
from judge.store.tables import Dataset, Item, RubricRecord
from server import create_app
from server.api import json_depth
from server.auth import KeyInfo, create_key, list_keys, revoke_key
from server.tables import ApiKey, Job, WebSession
from tests.support import stores
from tests.support.factories import SAMPLE, make_settings

LARGEST_ID = 2_147_483_647
"""docs/server.md, Errors: an id above 2,147,483,647 (PostgreSQL's largest ``integer``) is
a 422."""
TOO_LARGE_IDS = (LARGEST_ID + 1, 2**63 - 1, 2**63)
"""Just past PostgreSQL's ``integer``, SQLite's (and ``bigint``'s) largest, and past that."""
DEPTH_LIMIT = 64
"""docs/server.md, Errors: a body nested more than 64 levels deep is a 400."""
LAST_USED_EVERY = timedelta(minutes=1)
"""docs/server.md, Keys: ``last_used_at`` is updated at most once a minute."""
SESSION_LIFETIME = timedelta(hours=12)
"""docs/server.md, Keys: a dashboard session ends by itself after 12 hours."""
HEADERS = {
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
"""docs/server.md, Headers (Content-Security-Policy is checked for its directive apart)."""
ERROR_STATUSES = (400, 401, 403, 404, 409, 413, 422, 503)
"""docs/server.md, Errors: the statuses every operation declares with the error shape."""

COOKIE = "session"
"""Flask's default name for the session cookie (SESSION_COOKIE_NAME)."""
SAMPLE_ITEM: dict[str, Any] = json.loads(SAMPLE.read_text().splitlines()[0])
"""A valid item in the shape of a dataset file's lines: the shipped sample's first."""


@dataclass
class Env:
    """One app over one store, and an engine of the test's own to read and change rows."""

    app: Flask
    engine: Engine

    def client(self) -> FlaskClient:
        return self.app.test_client()

    def new_key(self, role: str = "member") -> tuple[str, str]:
        """A fresh key (name, raw key), so that tests sharing the store never share keys."""
        name = f"{role}-{uuid.uuid4().hex[:10]}"
        _, raw = create_key(self.engine, name, role)
        return name, raw

    def rows(self, table: type[Any]) -> int:
        with Session(self.engine) as session:
            return int(session.exec(select(func.count()).select_from(table)).one())

    def key_info(self, name: str) -> KeyInfo:
        with Session(self.engine) as session:
            (info,) = [k for k in list_keys(session) if k.name == name]
        return info


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def env(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    """One app per store kind for the whole module (each test makes its own keys)."""
    state = tmp_path_factory.mktemp("hardening")
    if request.param == "sqlite":
        # A copy of the session's empty migrated store (tests/support/stores.py).
        path = state / "fairjudge.db"
        stores.copy_store(request.getfixturevalue("empty_template"), path)
        url = f"sqlite:///{path}"
    else:
        url = str(request.getfixturevalue("pg_url_module"))
    engine = make_engine(url)  # migrates a new PostgreSQL database to the newest revision
    settings = make_settings("http://127.0.0.1:9/v1", url)  # no test calls a model
    settings = settings.model_copy(update={"state_dir": str(state / "state")})
    app = create_app({"SETTINGS": settings, "TESTING": True, "SECRET_KEY": "hardening-secret"})
    yield Env(app, engine)
    app.extensions["fairjudge_engine"].dispose()
    engine.dispose()


def bearer(raw: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {raw}"}


def refused(reply: TestResponse, status: int, *said: str) -> str:
    """The reply's message, after checking it is ``status`` in the one error shape and that
    the message holds each of ``said`` (what the client must fix)."""
    assert reply.status_code == status, (reply.status_code, reply.text[:300])
    body = reply.json
    assert isinstance(body, dict) and set(body) == {"error"}, body
    error = body["error"]
    assert set(error) <= {"status", "message", "problems"} and error["status"] == status
    message = error["message"]
    assert isinstance(message, str)
    for words in said:
        assert words in message, (words, message)
    return message


def int_routes(app: Flask) -> list[tuple[str, str, str]]:
    """(method, rule, parameter) of every API route with an integer path parameter, read
    from Flask's URL map."""
    found = []
    for rule in app.url_map.iter_rules():
        params = re.findall(r"<int:([a-z_]+)>", rule.rule)
        if not rule.rule.startswith("/api/v1/") or not params:
            continue
        assert len(params) == 1, rule.rule  # the substitution below assumes one
        for method in sorted((rule.methods or set()) - {"HEAD", "OPTIONS"}):
            found.append((method, rule.rule, params[0]))
    return found


def fill(rule: str, value: int) -> str:
    return re.sub(r"<int:[a-z_]+>", str(value), rule)


# -- 1. hostile input: a 4xx in the one error shape, saying what to fix ---------------------


def test_ids_past_the_largest_integer_are_422_naming_the_limit(env: Env) -> None:
    _, raw = env.new_key()
    client = env.client()
    routes = int_routes(env.app)
    named = {rule for _, rule, _ in routes}
    # The three the docs' examples use must be among them (else the map read was wrong).
    assert {
        "/api/v1/judge-runs/<int:run_id>",
        "/api/v1/generation-runs/<int:run_id>",
        "/api/v1/jobs/<int:job_id>",
    } <= named
    for method, rule, param in routes:
        for value in TOO_LARGE_IDS:
            body: dict[str, Any] | None = {} if method == "POST" else None
            reply = client.open(fill(rule, value), method=method, headers=bearer(raw), json=body)
            refused(reply, 422, param, str(LARGEST_ID))
        if method == "GET":
            # The largest id a store can hold is a fair question; the store is empty of
            # runs and jobs, so it is simply not there.
            query = REQUIRED_QUERY.get(rule, "")
            reply = client.get(fill(rule, LARGEST_ID) + query, headers=bearer(raw))
            refused(reply, 404, str(LARGEST_ID))


REQUIRED_QUERY = {
    "/api/v1/judge-runs/<int:run_id>/alt-test": "?epsilon=expert",
    "/api/v1/judge-runs/<int:run_id>/rating-plan": "?target_half_width=5",
    "/api/v1/judge-runs/<int:run_id>/transport": "?others=2",
}
"""Routes whose query has a required parameter: without it they are a 422 before the id is
looked up."""


def test_a_judge_run_filter_past_the_largest_integer_is_422(env: Env) -> None:
    _, raw = env.new_key()
    client = env.client()
    for value in TOO_LARGE_IDS:
        reply = client.get(f"/api/v1/judgments?judge_run={value}", headers=bearer(raw))
        message = refused(reply, 422, "judge_run", str(LARGEST_ID))
        assert "query" in message
    # A filter that matches nothing is an empty page, not an error (the store has no runs).
    reply = client.get(f"/api/v1/judgments?judge_run={LARGEST_ID}", headers=bearer(raw))
    assert reply.status_code == 200, reply.text
    assert reply.json is not None and reply.json["items"] == [] and reply.json["total"] == 0


def test_a_job_for_a_run_past_the_largest_integer_is_refused_and_not_stored(env: Env) -> None:
    _, raw = env.new_key()
    client = env.client()
    before = env.rows(Job)
    for value in TOO_LARGE_IDS:
        params = {"generation_run_id": value}
        reply = client.post(
            "/api/v1/jobs", json={"kind": "judge", "params": params}, headers=bearer(raw)
        )
        refused(reply, 400, "generation_run_id", str(LARGEST_ID))
    params = {"generation_run_id": LARGEST_ID}
    reply = client.post(
        "/api/v1/jobs", json={"kind": "judge", "params": params}, headers=bearer(raw)
    )
    refused(reply, 404, str(LARGEST_ID))
    assert env.rows(Job) == before


def test_a_nul_in_the_path_or_query_is_400_naming_it(env: Env) -> None:
    _, raw = env.new_key()
    client = env.client()
    refused(client.get("/api/v1/datasets/a%00b", headers=bearer(raw)), 400, "NUL", "path")
    reply = client.get("/api/v1/judgments?rubric=a%00b", headers=bearer(raw))
    refused(reply, 400, "NUL", "rubric")
    # In a parameter's name too, and before the key is even looked at (no key sent).
    refused(client.get("/api/v1/judgments?a%00b=1"), 400, "NUL")
    # The same requests without the NUL are answered (so the NUL was what was refused).
    assert client.get("/api/v1/datasets/ab", headers=bearer(raw)).status_code == 404
    assert client.get("/api/v1/judgments?rubric=ab", headers=bearer(raw)).status_code == 200


def test_a_nul_in_a_json_body_is_400_and_nothing_is_stored(env: Env) -> None:
    _, raw = env.new_key()
    client = env.client()
    name = f"nul-{uuid.uuid4().hex[:8]}"
    bodies = [
        {"name": f"{name}\u0000", "items": [SAMPLE_ITEM]},
        {"name": name, "items": [{**SAMPLE_ITEM, "question": "why\u0000"}]},
        {"name": name, "items": [{**SAMPLE_ITEM, "id": "\u0000"}]},
        {"name": name, "items": [{**SAMPLE_ITEM, "note\u0000": "x"}]},  # in a key
    ]
    datasets, items = env.rows(Dataset), env.rows(Item)
    for body in bodies:
        # json.dumps writes the character as the escape \u0000, as a client would send it.
        assert "\\u0000" in json.dumps(body)
        reply = client.post("/api/v1/datasets", json=body, headers=bearer(raw))
        refused(reply, 400, "NUL", "\\u0000")
    assert (env.rows(Dataset), env.rows(Item)) == (datasets, items)
    # The same item without the NUL is stored: one dataset and one item more.
    reply = client.post(
        "/api/v1/datasets", json={"name": name, "items": [SAMPLE_ITEM]}, headers=bearer(raw)
    )
    assert reply.status_code == 201, reply.text
    assert (env.rows(Dataset), env.rows(Item)) == (datasets + 1, items + 1)


@pytest.mark.parametrize(
    ("path", "table"), [("/api/v1/rubrics", RubricRecord), ("/api/v1/datasets", Dataset)]
)
def test_a_body_nested_thousands_deep_is_400_naming_the_limit(
    env: Env, path: str, table: type[Any]
) -> None:
    _, raw = env.new_key()
    client = env.client()
    before = env.rows(table)
    for deep, text in (
        (10_000, "[" * 10_000 + "]" * 10_000),
        (10_000, '{"a":' * 10_000 + "1" + "}" * 10_000),
        (DEPTH_LIMIT + 1, "[" * (DEPTH_LIMIT + 1) + "]" * (DEPTH_LIMIT + 1)),
    ):
        reply = client.post(path, data=text, content_type="application/json", headers=bearer(raw))
        refused(reply, 400, f"{deep} deep", f"at most {DEPTH_LIMIT} levels")
    # At the limit the body is parsed, and refused only because it is not a JSON object
    # (every body of the API is one), not by the depth check.
    at_limit = "[" * DEPTH_LIMIT + "]" * DEPTH_LIMIT
    reply = client.post(path, data=at_limit, content_type="application/json", headers=bearer(raw))
    message = refused(reply, 400, "JSON list", "JSON object")
    assert "deep" not in message
    assert env.rows(table) == before


def test_brackets_inside_strings_do_not_count_as_depth(env: Env) -> None:
    _, raw = env.new_key()
    reply = env.client().post("/api/v1/rubrics", json={"toml": "[" * 10_000}, headers=bearer(raw))
    # Refused for what it is, TOML that does not parse, not for its depth (1).
    message = refused(reply, 400, "TOML")
    assert "deep" not in message


def test_dashboard_pages_with_huge_ids_are_404(env: Env) -> None:
    _, raw = env.new_key()
    client = env.client()
    assert sign_in(client, raw).status_code == 302
    for value in (LARGEST_ID, *TOO_LARGE_IDS):
        for path in (f"/judge-runs/{value}", f"/jobs/{value}", f"/live/jobs/{value}"):
            assert client.get(path).status_code == 404, path


# -- 2. json_depth against a depth counted here ---------------------------------------------


TRICKY_TEXT = ["[", "]", "{", "}", '"', "\\", '\\"', '"[', "a\\", '[{"x": [1]}]', "é[ü", "\x00"]
"""Strings that hold brackets, quotes and backslashes: they must not count as nesting."""


def depth(value: Any) -> int:
    """How deep lists and dicts nest in ``value``: a scalar 0, ``[]`` 1, ``[[1]]`` 2."""
    if isinstance(value, list):
        return 1 + max((depth(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((depth(v) for v in value.values()), default=0)
    return 0


def random_json(rng: random.Random, levels: int) -> Any:
    """A random JSON value nested at most ``levels`` deep."""
    kind = rng.choice(["list", "dict", "text", "number", "literal"] if levels else ["text"])
    if kind == "list":
        return [random_json(rng, levels - 1) for _ in range(rng.randint(0, 4))]
    if kind == "dict":
        return {
            "".join(rng.choices(TRICKY_TEXT, k=rng.randint(0, 3))): random_json(rng, levels - 1)
            for _ in range(rng.randint(0, 4))
        }
    if kind == "text":
        return "".join(rng.choices(TRICKY_TEXT, k=rng.randint(0, 6)))
    if kind == "number":
        return rng.uniform(-1e6, 1e6)
    return rng.choice([True, False, None])


def test_json_depth_matches_a_recursive_count() -> None:
    rng = random.Random(20260301)
    seen = set()
    for _ in range(400):
        value = random_json(rng, rng.randint(0, 40))
        expected = depth(value)
        seen.add(expected)
        for ascii_only in (True, False):
            for indent in (None, 2):
                text = json.dumps(value, ensure_ascii=ascii_only, indent=indent)
                assert json_depth(text) == expected, text[:200]
    # The draws reached shallow and deep values alike (else the comparison proved little).
    assert {0, 1, 2, 3} <= seen and max(seen) >= 10


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('"[[["', 0),  # brackets inside a string
        ('"\\"[["', 0),  # an escaped quote does not end the string
        ('["\\\\", [1]]', 2),  # an escaped backslash does end it: the second list counts
        ('{"a]": {"b}": []}}', 3),  # brackets in keys
        ("[]", 1),
        ("", 0),
    ],
)
def test_json_depth_on_written_cases(text: str, expected: int) -> None:
    # Each expected value is counted by hand from the text (its comment says what is tested).
    assert json_depth(text) == expected


# -- 3. headers -----------------------------------------------------------------------------


def test_every_kind_of_reply_carries_the_security_headers(env: Env) -> None:
    _, raw = env.new_key()
    client = env.client()
    replies = {
        "API reply": (client.get("/api/v1/datasets", headers=bearer(raw)), 200),
        "401": (client.get("/api/v1/datasets"), 401),
        "404": (client.get(f"/api/v1/judge-runs/{LARGEST_ID}", headers=bearer(raw)), 404),
        "422": (client.get(f"/api/v1/judge-runs/{LARGEST_ID + 1}", headers=bearer(raw)), 422),
        "login page": (client.get("/login"), 200),
        "OpenAPI document": (client.get("/api/v1/openapi.json"), 200),
        "dashboard redirect": (env.client().get("/"), 302),
    }
    for what, (reply, status) in replies.items():
        assert reply.status_code == status, (what, reply.status_code)
        for name, value in HEADERS.items():
            assert reply.headers.get(name) == value, (what, name)
        csp = reply.headers.get("Content-Security-Policy", "")
        assert "frame-ancestors 'none'" in csp, (what, csp)


@pytest.mark.parametrize("path", ["/api/v1/judge-runs", "/api/v1/datasets", "/api/v1/health"])
def test_a_405_names_the_routes_methods_in_allow(env: Env, path: str) -> None:
    _, raw = env.new_key()
    served: set[str] = set()
    for rule in env.app.url_map.iter_rules():
        if rule.rule == path:
            served |= rule.methods or set()
    assert served and "DELETE" not in served  # so DELETE is a method the route lacks
    reply = env.client().delete(path, headers=bearer(raw))
    refused(reply, 405, "DELETE", path)
    allowed = {m.strip() for m in reply.headers.get("Allow", "").split(",") if m.strip()}
    assert allowed == served
    for name, value in HEADERS.items():
        assert reply.headers.get(name) == value


# -- 4. last_used_at ------------------------------------------------------------------------


def as_utc(moment: datetime | None) -> datetime:
    """A stored time as an aware UTC datetime (SQLite gives it back without a zone)."""
    assert moment is not None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def test_last_used_at_is_written_at_most_once_a_minute(env: Env) -> None:
    name, raw = env.new_key()
    other, _ = env.new_key()
    client = env.client()
    assert env.key_info(name).last_used_at is None
    start = datetime.now(UTC)
    assert client.get("/api/v1/datasets", headers=bearer(raw)).status_code == 200
    end = datetime.now(UTC)
    first = as_utc(env.key_info(name).last_used_at)
    assert start <= first <= end
    assert env.key_info(other).last_used_at is None  # only the key that was used
    # Right after: within the minute, so not written again.
    assert client.get("/api/v1/jobs", headers=bearer(raw)).status_code == 200
    assert as_utc(env.key_info(name).last_used_at) == first
    # Set back by just over the minute in the store: the next request writes it anew.
    stale = first - LAST_USED_EVERY - timedelta(seconds=1)
    with Session(env.engine) as session:
        session.execute(update(ApiKey).where(col(ApiKey.name) == name).values(last_used_at=stale))
        session.commit()
    start = datetime.now(UTC)
    assert client.get("/api/v1/datasets", headers=bearer(raw)).status_code == 200
    end = datetime.now(UTC)
    assert start <= as_utc(env.key_info(name).last_used_at) <= end


# -- 5. dashboard sessions ------------------------------------------------------------------


def form_token(html: str) -> str:
    """The form's hidden ``csrf`` field (server/dashboard/templates/dashboard/login.html)."""
    match = re.search(r'name="csrf" value="([^"]+)"', html)
    assert match, "the page has no form token"
    return match.group(1)


def sign_in(client: FlaskClient, raw: str) -> TestResponse:
    """As a browser does: GET the login form for its token, then POST the key with it."""
    token = form_token(client.get("/login").text)
    return client.post("/login", data={"csrf": token, "key": raw})


def signed_in(client: FlaskClient, name: str) -> bool:
    """Whether the overview opens (with the key's name on it) rather than sending the
    client to the login page."""
    reply = client.get("/")
    if reply.status_code == 302:
        assert reply.headers["Location"].startswith("/login"), reply.headers["Location"]
        return False
    assert reply.status_code == 200, reply.status_code
    assert name in reply.text
    return True


def key_id(env: Env, name: str) -> int:
    return env.key_info(name).id


def test_signing_out_ends_every_copy_of_the_cookie(env: Env) -> None:
    name, raw = env.new_key()
    first = env.client()
    reply = sign_in(first, raw)
    assert reply.status_code == 302 and reply.headers["Location"] == "/"
    cookie = first.get_cookie(COOKIE)
    assert cookie is not None
    copy = env.client()
    copy.set_cookie(COOKIE, cookie.value)
    assert signed_in(first, name) and signed_in(copy, name)
    # The dashboard's sign-in also reads the API (a GET without a Bearer header).
    assert copy.get("/api/v1/datasets").status_code == 200

    token = form_token(first.get("/").text)
    reply = first.post("/logout", data={"csrf": token})
    assert reply.status_code == 302 and reply.headers["Location"] == "/login"

    assert not signed_in(first, name)
    assert not signed_in(copy, name)  # its cookie is still validly signed, and refused
    refused(copy.get("/api/v1/datasets"), 401)
    with Session(env.engine) as session:
        rows = session.exec(
            select(WebSession).where(col(WebSession.key_id) == key_id(env, name))
        ).all()
    assert len(rows) == 1 and rows[0].revoked_at is not None


def test_revoking_the_key_ends_its_sessions(env: Env) -> None:
    name, raw = env.new_key()
    client = env.client()
    assert sign_in(client, raw).status_code == 302
    assert signed_in(client, name)
    revoke_key(env.engine, name)
    assert not signed_in(client, name)


def test_a_session_older_than_its_lifetime_is_refused(env: Env) -> None:
    name, raw = env.new_key()
    client = env.client()
    assert sign_in(client, raw).status_code == 302
    assert signed_in(client, name)
    own = key_id(env, name)

    def age(by: timedelta) -> None:
        with Session(env.engine) as session:
            session.execute(
                update(WebSession)
                .where(col(WebSession.key_id) == own)
                .values(created_at=datetime.now(UTC) - by)
            )
            session.commit()

    age(SESSION_LIFETIME - timedelta(minutes=1))  # a minute before it ends: still good
    assert signed_in(client, name)
    age(SESSION_LIFETIME + timedelta(minutes=1))  # a minute after
    assert not signed_in(client, name)


# -- 6. the OpenAPI document ----------------------------------------------------------------


def test_the_openapi_document_declares_every_error_status(env: Env) -> None:
    reply = env.client().get("/api/v1/openapi.json")  # no key: clients are built from it
    assert reply.status_code == 200
    document = reply.json
    assert isinstance(document, dict)
    assert "error" in document["components"]["schemas"]["ErrorOut"]["properties"]

    # Every route under /api/v1 that Flask serves, with OpenAPI's {param} spelling.
    served = set()
    for rule in env.app.url_map.iter_rules():
        if not rule.rule.startswith("/api/v1/") or rule.rule.startswith("/api/v1/docs"):
            continue
        if rule.rule == "/api/v1/openapi.json":
            continue
        path = re.sub(r"<(?:[a-z]+:)?([a-z_]+)>", r"{\1}", rule.rule)
        for method in (rule.methods or set()) - {"HEAD", "OPTIONS"}:
            served.add((method.lower(), path))
    documented = {(m, p) for p, ops in document["paths"].items() for m in ops}
    assert served <= documented

    missing = []
    for method, path in sorted(served):
        if path == "/api/v1/health":
            continue
        responses = document["paths"][path][method]["responses"]
        for status in ERROR_STATUSES:
            declared = responses.get(str(status), {})
            schema = declared.get("content", {}).get("application/json", {}).get("schema", {})
            if not str(schema.get("$ref", "")).endswith("/ErrorOut"):
                missing.append(f"{method.upper()} {path} {status}")
    assert missing == []

    documents = {".html": "text/html", ".csv": "text/csv"}
    reports = [(m, p) for m, p in served if p.endswith(("/report.html", "/report.csv"))]
    assert reports  # judge runs' and audit runs' reports are served
    for method, path in reports:
        success = document["paths"][path][method]["responses"]["200"]
        expected = documents[Path(path).suffix]
        assert set(success["content"]) == {expected}, (path, success["content"])
