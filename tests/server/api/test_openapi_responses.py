"""Every JSON route of the API declares what it answers (issue 29, item 3): the OpenAPI
document names a response schema for each operation's success, so a client (or
docs/api.md's reader) knows the shape without calling it. The HTML and CSV report routes
answer documents, not JSON, and are the only exceptions."""

from __future__ import annotations

from typing import Any

from server import openapi_document

DOCUMENTS = (".html", ".csv")
"""Paths that end so answer a document, not JSON."""


def operations() -> list[tuple[str, str, dict[str, Any]]]:
    document = openapi_document()
    return [
        (method.upper(), path, op)
        for path, ops in document["paths"].items()
        for method, op in ops.items()
    ]


def test_every_json_route_declares_its_response_schema() -> None:
    found = operations()
    # 44 operations today (one per route and method in server/api/*.py); a new one joins.
    assert len(found) >= 44
    missing = []
    for method, path, op in found:
        if path.endswith(DOCUMENTS):
            continue
        success = {code: r for code, r in op["responses"].items() if code.startswith("2")}
        schemas = [
            r["content"]["application/json"].get("schema")
            for r in success.values()
            if "application/json" in r.get("content", {})
        ]
        if not schemas or not all(schemas):
            missing.append(f"{method} {path}")
    assert missing == []


def test_list_routes_declare_pages_and_lists() -> None:
    """A route that answers a page of rows declares the page (items, total, limit, offset),
    not one row; a route that answers a whole list declares an array."""
    document = openapi_document()
    schemas = document["components"]["schemas"]

    def success_schema(path: str) -> dict[str, Any]:
        (response,) = [
            r for c, r in document["paths"][path]["get"]["responses"].items() if c == "200"
        ]
        ref = response["content"]["application/json"]["schema"]["$ref"]
        return dict(schemas[ref.rsplit("/", 1)[1]])

    for path in ("/api/v1/judge-runs", "/api/v1/generation-runs", "/api/v1/judgments"):
        assert set(success_schema(path)["properties"]) == {"items", "total", "limit", "offset"}
    for path in ("/api/v1/datasets", "/api/v1/rubrics", "/api/v1/campaigns"):
        assert success_schema(path)["type"] == "array"


def test_links_lead_to_operations_that_take_the_parameters_they_fill() -> None:
    """Every link of the document names an operation that exists, and each parameter it
    fills is one of that operation's path parameters (a client or schemathesis's stateful
    phase follows them)."""
    document = openapi_document()
    operations = {
        op["operationId"]: (path, op)
        for path, ops in document["paths"].items()
        for op in ops.values()
    }
    found = 0
    for ops in document["paths"].values():
        for op in ops.values():
            for reply in op["responses"].values():
                for link in reply.get("links", {}).values():
                    path, target = operations[link["operationId"]]
                    names = {p["name"] for p in target.get("parameters", []) if p["in"] == "path"}
                    assert set(link["parameters"]) <= names, (path, link)
                    assert all(f"{{{name}}}" in path for name in link["parameters"])
                    found += 1
    # server.api.LINKS: jobs 3 + 1 + 1, datasets 2, keys 1, generation runs 2, judge runs 7,
    # audit runs 4, campaigns 3
    assert found == 24
