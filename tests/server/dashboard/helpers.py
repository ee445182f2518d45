"""What the dashboard tests share: the store they run on, signing in the way a browser does
(form token included), asking the API as a script would, and reading the numbers off a page:
the cells its templates mark with ``data-k``, grouped by the marked element (``data-job="3"``,
``data-judge-run="1"``) they sit in, and the cells of its report tables (plain
``html.parser``: the tests read the HTML the server sent)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Any

from flask.testing import FlaskClient
from sqlalchemy.engine import Engine
from werkzeug.test import TestResponse

from judge.config import Settings

S1_ITEMS = 18
"""The sample's S1 items (9 factors x 2), first in the file: ``generate(limit=18)`` takes them."""


@dataclass(frozen=True)
class Store:
    engine: Engine
    settings: Settings
    generation_run_id: int
    judge_run_id: int


@dataclass(frozen=True)
class Key:
    name: str
    raw: str

    @property
    def header(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.raw}"}


def api_get(client: FlaskClient, path: str, key: Key) -> Any:
    """An API answer as a script would get it: with the key, as JSON (an object or a list)."""
    reply = client.get(path, headers=key.header)
    assert reply.status_code == 200, reply.text
    body = reply.json
    assert isinstance(body, (dict, list))
    return body


def form_token(html: str) -> str:
    match = re.search(r'name="csrf" value="([^"]+)"', html)
    assert match, "the page has no form token"
    return match.group(1)


def sign_in(client: FlaskClient, raw: str, *, next_path: str | None = None) -> TestResponse:
    """GET the login page (for its form token), then POST the key as the form does."""
    page = client.get("/login")
    data = {"csrf": form_token(page.text), "key": raw}
    if next_path is not None:
        data["next"] = next_path
    return client.post("/login", data=data)


VOID = {"area", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "wbr"}


class _Fields(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.stack: list[tuple[str, dict[str, str | None], list[str]]] = []
        self.fields: dict[tuple[str, str], dict[str, str]] = {}

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in VOID:
            self.stack.append((tag, dict(attrs), []))

    def handle_data(self, data: str) -> None:
        for _, attrs, text in self.stack:
            if "data-k" in attrs:
                text.append(data)

    def handle_endtag(self, tag: str) -> None:
        while self.stack:
            name, attrs, text = self.stack.pop()
            key = attrs.get("data-k")
            if key is not None:
                for _, outer, _ in self.stack:
                    for attr, value in outer.items():
                        if attr.startswith("data-") and value is not None:
                            group = self.fields.setdefault((attr[5:], value), {})
                            group[key] = " ".join("".join(text).split())
            if name == tag:
                return


def fields(html: str, kind: str, ident: object) -> dict[str, str]:
    """``{data-k: text}`` inside the element marked ``data-{kind}="{ident}"``; {} if none."""
    parser = _Fields()
    parser.feed(html)
    parser.close()
    return parser.fields.get((kind, str(ident)), {})


class _Tables(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.table: list[list[str]] | None = None
        self.cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "table" and found.get("data-table"):
            self.table = self.tables.setdefault(str(found["data-table"]), [])
        elif tag == "tr" and self.table is not None:
            self.table.append([])
        elif tag in ("td", "th") and self.table is not None:
            self.cell = []

    def handle_data(self, data: str) -> None:
        if self.cell is not None:
            self.cell.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self.cell is not None and self.table:
            self.table[-1].append(" ".join("".join(self.cell).split()))
            self.cell = None
        elif tag == "table":
            self.table = None


def tables(html: str) -> dict[str, list[list[str]]]:
    """Every report table of a judge run page: title -> rows of cell texts (header first)."""
    parser = _Tables()
    parser.feed(html)
    parser.close()
    return parser.tables
