"""The requests the CLI, the job queue and the dashboard share (server/usecases/requests.py).

Expected values are read off the config's own field definitions (judge/config.py) and the
job parameters stored before these models existed (the keys of the old JudgeParams and
GenerateParams, as tests/server/dashboard/test_pages.py pins them)."""

from __future__ import annotations

from typing import Any

import annotated_types
import pytest

from judge.config import GenerationConfig, JudgeConfig
from judge.errors import InvalidInputError
from server.usecases.jobs import check_params, job_request
from server.usecases.requests import GenerateRequest, JudgeRequest


def bounds(model: Any, name: str) -> tuple[object, object]:
    """The (ge, le) a pydantic field declares; None where it has none."""
    ge = le = None
    for rule in model.model_fields[name].metadata:
        if isinstance(rule, annotated_types.Ge):
            ge = rule.ge
        if isinstance(rule, annotated_types.Le):
            le = rule.le
    return ge, le


@pytest.mark.parametrize(
    ("request_type", "config", "fields"),
    [
        (JudgeRequest, JudgeConfig, ("temperature", "samples")),
        (GenerateRequest, GenerationConfig, ("temperature", "max_tokens")),
    ],
)
def test_override_fields_accept_what_the_config_accepts(
    request_type: Any, config: Any, fields: tuple[str, ...]
) -> None:
    for name in fields:
        assert bounds(request_type, name) == bounds(config, name), name


def test_overrides_name_the_config_keys_the_cli_options_set() -> None:
    request = JudgeRequest(generation_run_id=3, temperature=0.5, aggregation="majority")
    assert request.overrides() == {
        "judge.endpoint": None,
        "judge.prompt_variant": None,
        "judge.temperature": 0.5,
        "judge.samples": None,
        "judge.aggregation": "majority",
    }


def test_job_params_keep_the_old_keys_and_add_only_what_is_set() -> None:
    # Stored by the old JudgeParams: exactly the fields that were given.
    old = {"generation_run_id": 1, "endpoint": "test", "temperature": 0.5, "samples": 2}
    assert check_params("judge", old) == old
    assert check_params("judge", {**old, "aggregation": "mean", "max_cost": 0.25}) == {
        **old,
        "aggregation": "mean",
        "max_cost": 0.25,
    }
    # The old GenerateParams stored both flags whatever their value.
    assert check_params("generate", {"dataset": "d"}) == {
        "dataset": "d",
        "accepted_only": False,
        "include_drafts": False,
    }
    request = job_request("judge", old)
    assert isinstance(request, JudgeRequest) and request.max_cost is None


@pytest.mark.parametrize(
    ("kind", "params", "reason"),
    [
        ("judge", {"generation_run_id": 1, "dry_run": True}, "dry_run: a job always runs"),
        ("generate", {"dataset": "d", "new": True}, "new: a job resumes its run"),
        ("judge", {"generation_run_id": 1, "samples": 51}, "samples: Input should be less"),
        ("judge", {"generation_run_id": 1, "aggregation": "median"}, "aggregation: Input"),
    ],
)
def test_a_job_refuses_what_it_may_not_carry(
    kind: str, params: dict[str, Any], reason: str
) -> None:
    with pytest.raises(InvalidInputError, match=f"bad parameters for a {kind} job: {reason}"):
        check_params(kind, params)


def test_build_names_every_bad_field() -> None:
    with pytest.raises(InvalidInputError) as caught:
        JudgeRequest.build(generation_run_id=0, temperature=3)
    assert str(caught.value).startswith("generation_run_id: Input should be greater")
    assert "temperature: Input should be less than or equal to 2" in str(caught.value)
