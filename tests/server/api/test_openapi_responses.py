"""Every JSON route of the API declares what it answers (issue 29, item 3): the OpenAPI
document names a response schema for each operation's success, so a client (or
docs/api.md's reader) knows the shape without calling it. The HTML and CSV report routes
answer documents, not JSON, and are the only exceptions."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from pydantic import BaseModel, create_model
from pydantic.json_schema import models_json_schema

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


# -- a client generated from the document reads every reply (issue 43) ----------------------


def bare_aliases(schemas: dict[str, Any]) -> list[str]:
    """Components that are only a reference to another one: openapi-python-client cannot
    make a model of them and drops every reply that names one."""
    return sorted(name for name, schema in schemas.items() if set(schema) & {"$ref"})


def test_every_json_reply_is_a_named_object_or_array_schema() -> None:
    document = openapi_document()
    schemas = document["components"]["schemas"]
    assert bare_aliases(schemas) == []
    for method, path, op in operations():
        for code, reply in op["responses"].items():
            schema = reply.get("content", {}).get("application/json", {}).get("schema")
            if not code.startswith("2") or schema is None:
                continue
            name = schema["$ref"].rsplit("/", 1)[1]
            assert schemas[name].get("type") in ("object", "array"), (method, path, name)
    # The five that were aliases (and the import summary) are objects with the domain's
    # fields (judge/data/datasets.py, judge/store/queries.py, judge/data/responses.py).
    assert set(schemas["DatasetOut"]["properties"]) == {"name", "items", "created_at"}
    assert {"generation_run", "scored", "unscored", "standing"} <= set(
        schemas["JudgeRunOut"]["properties"]
    )
    assert {"answers", "dataset", "source"} <= set(schemas["GenerationRunOut"]["properties"])
    assert {"generation_run_id", "added", "created_run"} <= set(
        schemas["ResponsesOut"]["properties"]
    )
    assert "empty_cells" in schemas["DatasetDescriptionOut"]["properties"]
    assert {"added", "warnings"} <= set(schemas["ImportOut"]["properties"])


def test_a_bare_alias_is_found() -> None:
    """The check above on a planted alias and on a plain object."""
    planted = {"A": {"$ref": "#/components/schemas/B", "title": "A"}, "B": {"type": "object"}}
    assert bare_aliases(planted) == ["A"]


RECORD = """
import json, sys
import flask_openapi3.utils
from pydantic.json_schema import models_json_schema

seen = []
original = flask_openapi3.utils.get_model_schema

def record(model, mode="validation"):
    seen.append((model, mode))
    return original(model, mode)

flask_openapi3.utils.get_model_schema = record
from server import openapi_document  # the views' modules are imported (and read) from here

document = openapi_document()
models = list(dict.fromkeys(seen))
_, joint = models_json_schema(models, ref_template="#/components/schemas/{model}")
json.dump({"models": len(models), "defs": sorted(joint["$defs"]),
           "components": sorted(document["components"]["schemas"])}, sys.stdout)
"""
"""Every pydantic model the document is built from, with the mode it is read in (requests:
validation, replies: serialization), recorded as flask-openapi3 asks for each one's schema
(when the views' modules are imported, hence a fresh interpreter), and all of them given to
pydantic at once: the definitions it makes."""


def shared_names(defs: list[str]) -> list[str]:
    """The names two different models (or dataclasses) share among ``defs``, the definitions
    pydantic makes of many models at once. The document keeps one schema per name, so the
    second silently replaces the first; pydantic keeps both under module-qualified names
    (``server__api__alttest__AnnotatorOut``), which is how they show."""
    return sorted(name for name in defs if "__" in name)


def joint_defs(models: list[tuple[type[BaseModel], str]]) -> list[str]:
    _, joint = models_json_schema(models, ref_template="#/components/schemas/{model}")  # type: ignore[arg-type]
    return sorted(joint.get("$defs", {}))


def test_no_two_models_in_the_document_share_a_name() -> None:
    done = subprocess.run(
        [sys.executable, "-c", RECORD], capture_output=True, text=True, timeout=120, check=True
    )
    found = json.loads(done.stdout)
    assert found["models"] > 80  # every route's body, query, path and replies
    assert shared_names(found["defs"]) == []
    # What was recorded is the whole document: each of its schemas is one of theirs.
    assert set(found["components"]) - set(found["defs"]) == {"ValidationErrorModel"}


def test_a_shared_name_is_found() -> None:
    """The check above on two planted models of one name (as the alt-test's and Label
    Studio's ``AnnotatorOut`` were), and on two of different names."""

    def make(name: str, field: str) -> type[BaseModel]:
        return create_model(name, __module__=f"planted_{field}", **{field: (int, ...)})

    first, second = make("AnnotatorOut", "a"), make("AnnotatorOut", "b")
    holder = create_model("Holder", one=(first, ...), two=(second, ...))
    assert shared_names(joint_defs([(holder, "serialization")])) == [
        "planted_a__AnnotatorOut",
        "planted_b__AnnotatorOut",
    ]
    fine = create_model("Fine", one=(first, ...), two=(make("OtherOut", "b"), ...))
    assert shared_names(joint_defs([(fine, "serialization")])) == []
