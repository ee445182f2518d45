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


def _endpoint_config(tmp_path: Path, base_url: str) -> Path:
    path = tmp_path / "c.toml"
    path.write_text(f'[endpoints.embedded]\nbase_url = "{base_url}"\nmodel = "m"\n')
    return path


@pytest.mark.parametrize(
    "base_url",
    [
        "https://user:sk-secret123@api.example/v1",
        "https://sk-secret123@api.example/v1",  # a user name alone is a token too
        "https://api.example/v1?api_key=sk-secret123",
        "https://api.example/v1?x=1&Api-Key=sk-secret123",
        "https://api.example/v1?token=sk-secret123",
    ],
)
def test_a_key_in_base_url_is_refused_and_never_printed(tmp_path: Path, base_url: str) -> None:
    with pytest.raises(ConfigError, match="api_key_env") as caught:
        load_settings(_endpoint_config(tmp_path, base_url))
    assert "sk-secret123" not in str(caught.value)


def test_an_ordinary_query_in_base_url_is_kept(tmp_path: Path) -> None:
    url = "https://api.example/v1?api-version=2024-06-01"
    assert load_settings(_endpoint_config(tmp_path, url)).endpoint("embedded").base_url == url


def test_a_bad_override_names_the_option_not_the_file(tmp_path: Path) -> None:
    path = _endpoint_config(tmp_path, "http://x/v1")
    with pytest.raises(ConfigError) as caught:
        load_settings(path, **{"judge.temperature": 5.0, "judge.samples": 0})
    # JudgeConfig: temperature le=2, samples ge=1.
    assert str(caught.value) == "--temperature 5: must be <= 2; --samples 0: must be >= 1"
    with pytest.raises(ConfigError, match=r"^--endpoint nope: \[judge\] endpoint = 'nope'"):
        load_settings(path, **{"judge.endpoint": "nope"})


def test_an_override_can_fix_the_file(tmp_path: Path) -> None:
    """The file names an undefined judge endpoint; --endpoint picks a defined one."""
    path = _endpoint_config(tmp_path, "http://x/v1")
    path.write_text(path.read_text() + '[judge]\nendpoint = "gone"\n')
    assert load_settings(path, **{"judge.endpoint": "embedded"}).judge.endpoint == "embedded"
    with pytest.raises(ConfigError, match="c.toml has invalid settings"):
        load_settings(path)


def test_a_binary_or_non_utf8_config_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_bytes(b'database_url = "sqlite:///a.db"\n# caf\xe9\n')
    with pytest.raises(ConfigError, match=r"c\.toml line 2 is not UTF-8 text"):
        load_settings(path)
    path.write_bytes(bytes(range(256)))
    with pytest.raises(ConfigError, match="not UTF-8 text"):
        load_settings(path)


def test_a_config_with_a_bom_is_read(tmp_path: Path) -> None:
    path = _endpoint_config(tmp_path, "http://x/v1")
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert load_settings(path).endpoint("embedded").model == "m"
