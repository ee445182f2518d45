"""Config loading: the shipped default, overrides, and errors that say what to fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from judge.config import load_settings
from judge.errors import ConfigError


def test_default_config_points_both_roles_at_the_embedded_model() -> None:
    settings = load_settings()
    assert settings.generation.endpoint == settings.judge.endpoint == "embedded"
    assert settings.endpoint("embedded").base_url == "http://127.0.0.1:8765/v1"
    assert settings.judge.temperature == 0.0 and settings.judge.prompt_variant == "plain"


def test_overrides_apply_and_none_is_ignored() -> None:
    settings = load_settings(None, **{"judge.temperature": 0.5, "judge.samples": None})
    assert settings.judge.temperature == 0.5 and settings.judge.samples == 1


def test_unknown_endpoint_is_named(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(
        '[endpoints.a]\nbase_url = "http://x/v1"\nmodel = "m"\n'
        '[generation]\nendpoint = "a"\n[judge]\nendpoint = "gpt"\n'
    )
    with pytest.raises(ConfigError, match=r"\[judge\] endpoint = 'gpt' is not defined"):
        load_settings(path)


def test_invalid_values_and_typos_are_listed(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(
        '[endpoints.embedded]\nbase_url = "http://x/v1"\nmodel = "m"\n'
        "[judge]\ntemprature = 0.2\nsamples = 0\n"
    )
    with pytest.raises(ConfigError) as caught:
        load_settings(path)
    assert "judge.temprature: Extra inputs are not permitted" in str(caught.value)
    assert "judge.samples" in str(caught.value)


def test_api_key_is_read_from_the_named_variable(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = tmp_path / "c.toml"
    path.write_text(
        '[endpoints.embedded]\nbase_url = "http://x/v1"\nmodel = "m"\napi_key_env = "FJ_TEST_KEY"\n'
    )
    endpoint = load_settings(path).endpoint("embedded")
    monkeypatch.delenv("FJ_TEST_KEY", raising=False)
    with pytest.raises(ConfigError, match="set the environment variable FJ_TEST_KEY"):
        endpoint.api_key()
    monkeypatch.setenv("FJ_TEST_KEY", "sk-test")
    assert endpoint.api_key() == "sk-test"
