"""The OpenAPI document's job bodies say exactly what the job queue accepts (issue 43): for
every kind, the parameters the document names, and which of them it marks required, are the
ones ``check_params`` takes and needs.

The check_params side is found by calling it, never by reading the request models the
document is generated from: ``EXAMPLES`` below gives, by hand, one valid value for every
parameter a kind takes (read off docs/server.md's Jobs section and the CLI options each
mirrors); a field is accepted when the kind's full example with it passes, and required
when the example without it is refused. Fields a job may not carry (``dry_run``, ``new``, the
server-side files) are given a value that means something and must be refused, as must a
made-up field; so must a value of the wrong type, which the document's schema must refuse
too (checked with jsonschema, a second reading of the same document).

The server holds to the document: a value check_params would read leniently but the
document's types refuse (``0`` for a boolean, ``false`` for a number in a list) is a 400 on
the job routes, nothing queued, where a value of the documented type is queued."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from sqlalchemy import func
from sqlmodel import Session, select

from judge.errors import InvalidInputError
from judge.store.engine import make_engine
from server import openapi_document
from server.tables import Job
from server.usecases.jobs import check_params
from tests.server.api.test_api import Api, make_api
from tests.support.stub_openai import StubServer

EXAMPLES: dict[str, dict[str, Any]] = {
    "judge": {
        "generation_run_id": 3,
        "endpoint": "stub",
        "prompt_variant": "cot",
        "temperature": 0.5,
        "samples": 2,
        "aggregation": "majority",
        "rubric_set": "fairmonitor",
        "swap_order": True,
        "max_cost": 1.5,
        "transport": {"mode": "live"},
    },
    "generate": {
        "dataset": "sample",
        "endpoint": "stub",
        "temperature": 0.7,
        "max_tokens": 100,
        "limit": 5,
        "accepted_only": True,
        "include_drafts": True,
        "max_cost": 2.0,
        "transport": {"mode": "live"},
    },
    "pull": {"campaign": "first"},
    "audit": {
        "suite": "award",
        "options": {"seed": 1},
        "endpoint": "stub",
        "temperature": 1.0,
        "max_tokens": 300,
        "limit": 10,
        "max_cost": 1.0,
        "transport": {"mode": "live"},
    },
    "audit-classify": {"run_id": 4, "endpoint": "stub"},
    "item-plan": {
        "endpoint": "stub",
        "per_cell": 3,
        "into": "mine",
        "stages": ["S1"],
        "factors": ["gender"],
        "scenarios": ["hiring"],
        "items_per_call": 5,
        "temperature": 0.9,
        "max_tokens": 400,
    },
    "item-generate": {
        "endpoint": "stub",
        "stage": "S1",
        "factor": "gender",
        "scenario": "hiring",
        "count": 5,
        "into": "mine",
        "items_per_call": 5,
        "temperature": 0.9,
        "max_tokens": 400,
    },
    "counterfactual": {
        "judge_run_id": 2,
        "swap": ["names"],
        "swap_in": "answers",
        "limit": 10,
        "max_cost": 1.0,
    },
    "sweep": {
        "generation_run_id": 1,
        "temperatures": [0.1, 1.0],
        "prompt_variants": ["plain"],
        "samples": 2,
        "endpoint": "stub",
    },
    "judge-pairs": {
        "runs": [1, 2],
        "criterion": "fairness",
        "repeats": 2,
        "endpoint": "stub",
        "max_cost": 1.0,
    },
}
"""One valid value for every parameter of every kind of job."""

SUITE_OPTIONS: dict[str, dict[str, Any]] = {
    "award": {"levels": [5, 10], "pairs_per_level": 10, "seed": 1, "followup": True},
    "names": {"repeats": 2},
    "bbi": {"per_type": 2, "repeats": 1, "seed": 0, "bias_types": ["gender"], "max_per_type": 9},
    "bbq": {"categories": ["Age", "Religion"], "seed": 3},
}
"""One valid value for every design option of each audit suite (docs/audits.md): an audit
job's ``options``."""

NOT_FOR_JOBS: dict[str, dict[str, Any]] = {
    "judge": {"dry_run": True},
    "generate": {"new": True, "dry_run": True},
    "item-plan": {"taxonomy_file": "mine.toml", "dry_run": True},
    "item-generate": {"taxonomy_file": "mine.toml"},
    "counterfactual": {"swaps_file": "mine.txt", "dry_run": True},
    "judge-pairs": {"dry_run": True},
}
"""Options of the CLI's commands that a job refuses (docs/server.md): each with a value that
would change what is done."""

WRONG_TYPE: dict[str, tuple[str, Any]] = {
    "judge": ("samples", "two"),
    "generate": ("limit", [5]),
    "pull": ("campaign", {"name": "first"}),
    "audit": ("suite", "lottery"),
    "audit-classify": ("run_id", "four"),
    "item-plan": ("stages", "S1"),
    "item-generate": ("count", "five"),
    "counterfactual": ("swap", ["planets"]),
    "sweep": ("temperatures", [5.0]),
    "judge-pairs": ("repeats", 21),
}
"""A value each kind refuses for one of its fields: of the wrong type, or out of range."""


def accepts(kind: str, params: dict[str, Any]) -> bool:
    try:
        check_params(kind, params)
    except InvalidInputError:
        return False
    return True


def documented(kind: str, suite: str | None = None) -> dict[str, Any]:
    """The schema of a ``kind`` job's ``params`` in the served document, reached as a client
    reaches it: the job route's body, its discriminator's mapping, the body's params (for an
    audit, those of ``suite``)."""
    document = openapi_document()
    schemas = document["components"]["schemas"]

    def resolve(schema: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in schema:
            schema = schemas[schema["$ref"].rsplit("/", 1)[1]]
        return schema

    body = document["paths"]["/api/v1/jobs"]["post"]["requestBody"]["content"]
    union = resolve(body["application/json"]["schema"])
    assert union["discriminator"]["propertyName"] == "kind"
    variant = resolve({"$ref": union["discriminator"]["mapping"][kind]})
    assert variant["properties"]["kind"]["const"] == kind
    assert "params" in variant["required"]
    params = variant["properties"]["params"]
    if suite is not None:  # an audit's params: one schema per suite, told apart by suite
        assert params["discriminator"]["propertyName"] == "suite"
        assert sorted(params["discriminator"]["mapping"]) == sorted(SUITE_OPTIONS)
        params = {"$ref": params["discriminator"]["mapping"][suite]}
    return {"params": resolve(params), "components": schemas, "resolve": resolve}


def test_every_kind_of_job_has_its_body_in_the_document() -> None:
    document = openapi_document()
    schemas = document["components"]["schemas"]
    ref = document["paths"]["/api/v1/jobs"]["post"]["requestBody"]["content"]["application/json"][
        "schema"
    ]["$ref"]
    mapping = schemas[ref.rsplit("/", 1)[1]]["discriminator"]["mapping"]
    assert sorted(mapping) == sorted(EXAMPLES)
    # The dry run takes the same body.
    dry = document["paths"]["/api/v1/jobs/dry-run"]["post"]["requestBody"]["content"]
    assert dry["application/json"]["schema"]["$ref"] == ref


CASES = [(kind, None) for kind in sorted(EXAMPLES) if kind != "audit"] + [
    ("audit", suite) for suite in SUITE_OPTIONS
]
"""Every kind of job, an audit once per suite."""


def example_of(kind: str, suite: str | None) -> dict[str, Any]:
    if suite is None:
        return EXAMPLES[kind]
    return {**EXAMPLES[kind], "suite": suite, "options": SUITE_OPTIONS[suite]}


@pytest.mark.parametrize(("kind", "suite"), CASES)
def test_documented_params_are_what_check_params_accepts(kind: str, suite: str | None) -> None:
    example = example_of(kind, suite)
    assert accepts(kind, example), f"the hand-made example of a {kind} job is refused"
    # Accepted: each field added alone to what the kind needs. Required: left out of the
    # full example, the rest is refused.
    required = {name for name in example if not accepts(kind, _without(example, name))}
    needed = {name: example[name] for name in required}
    accepted = {name for name in example if accepts(kind, {**needed, name: example[name]})}
    assert accepted == set(example)
    assert not accepts(kind, {**example, "colour": "blue"})  # a made-up field
    for name, value in NOT_FOR_JOBS.get(kind, {}).items():
        assert not accepts(kind, {**example, name: value}), name

    found = documented(kind, suite)
    schema = found["params"]
    assert set(schema["properties"]) == accepted
    assert set(schema.get("required", [])) == required
    assert schema["additionalProperties"] is False
    if suite is None:
        return
    # The suite's options: each accepted alone, a made-up one refused, none required.
    options = example["options"]
    taken = {o for o in options if accepts(kind, {**example, "options": {o: options[o]}})}
    assert taken == set(options)
    assert not accepts(kind, {**example, "options": {**options, "colour": "blue"}})
    assert accepts(kind, {**example, "options": {}})
    documented_options = found["resolve"](schema["properties"]["options"])
    assert set(documented_options["properties"]) == taken
    assert documented_options.get("required", []) == []
    assert documented_options["additionalProperties"] is False


@pytest.mark.parametrize(("kind", "suite"), CASES)
def test_the_document_refuses_what_check_params_refuses(kind: str, suite: str | None) -> None:
    """Read by a JSON-schema validator, the documented params take the example and refuse a
    made-up field, a field a job may not carry and a bad value, as check_params does."""
    found = documented(kind, suite)
    schema = {**found["params"], "components": {"schemas": found["components"]}}
    validator = jsonschema.Draft202012Validator(schema)
    # The document refers to #/components/schemas/...: resolve against the schema itself.
    example = example_of(kind, suite)
    assert validator.is_valid(example)
    assert not validator.is_valid({**example, "colour": "blue"})
    for name, value in NOT_FOR_JOBS.get(kind, {}).items():
        assert not validator.is_valid({**example, name: value}), name
    field, value = WRONG_TYPE[kind]
    bad = {**example, field: value}
    assert not accepts(kind, bad)
    assert not validator.is_valid(bad), field
    if suite is not None:  # an option of another suite: refused on both sides
        other = next(s for s in SUITE_OPTIONS if s != suite)
        foreign = next(o for o in SUITE_OPTIONS[other] if o not in SUITE_OPTIONS[suite])
        mixed = {**example, "options": {foreign: SUITE_OPTIONS[other][foreign]}}
        assert not accepts(kind, mixed)
        assert not validator.is_valid(mixed), foreign


def test_an_unknown_kind_and_a_missing_field_are_refused_on_both_sides() -> None:
    with pytest.raises(InvalidInputError, match="unknown job kind 'bake'"):
        check_params("bake", {})
    assert "bake" not in documented_kinds()
    # Without params a job of any kind lacks what it needs: the document requires them.
    for kind in EXAMPLES:
        assert not accepts(kind, {}), kind


def documented_kinds() -> set[str]:
    document = openapi_document()
    schema = document["components"]["schemas"]["JobCreate"]
    return set(schema["discriminator"]["mapping"])


def _without(params: dict[str, Any], name: str) -> dict[str, Any]:
    return {k: v for k, v in params.items() if k != name}


# -- the server holds to the documented types -----------------------------------------------


@pytest.fixture
def api(migrated_db_url: str, stub: StubServer, tmp_path: Path) -> Iterator[Api]:
    made = make_api(migrated_db_url, stub, tmp_path)
    yield made
    made.close()


def stored_jobs(api: Api) -> int:
    engine = make_engine(api.settings.database_url)
    try:
        with Session(engine) as session:
            return session.exec(select(func.count()).select_from(Job)).one()
    finally:
        engine.dispose()


@pytest.mark.parametrize(
    ("kind", "params", "reason"),
    [
        # Each read leniently by check_params (0 as false, false as 0.0, true as 1), and
        # each refused by the document's schema (test above).
        ("generate", {"dataset": "sample", "accepted_only": 0}, "accepted_only: Input should "
         "be a valid boolean"),
        ("judge", {"generation_run_id": 1, "swap_order": 1}, "swap_order: Input should be a "
         "valid boolean"),
        ("sweep", {"generation_run_id": 1, "temperatures": [0.5, False]}, "temperatures.1: "
         "Input should be a valid number"),
        ("audit", {"suite": "award", "options": {"levels": [True]}}, "options.levels.0: Input "
         "should be a valid integer"),
    ],
)  # fmt: skip
def test_a_value_the_document_refuses_is_refused_not_coerced(
    api: Api, kind: str, params: dict[str, Any], reason: str
) -> None:
    assert accepts(kind, params)  # check_params alone would take it
    for route in ("/api/v1/jobs", "/api/v1/jobs/dry-run"):
        reply = api.post(route, json={"kind": kind, "params": params, "confirm": True})
        assert reply.status_code == 400, reply.json
        article = "an" if kind[0] in "aeiou" else "a"
        said = reply.json["error"]["message"]
        assert said == f"bad parameters for {article} {kind} job: {reason}", said
    assert stored_jobs(api) == 0


def test_a_value_of_the_documented_type_is_queued(api: Api) -> None:
    params = {"dataset": "sample", "accepted_only": False, "limit": 2}
    reply = api.post("/api/v1/jobs", json={"kind": "generate", "params": params, "confirm": True})
    assert reply.status_code == 201, reply.json
    assert reply.json["params"] == {**params, "include_drafts": False}
    assert stored_jobs(api) == 1
