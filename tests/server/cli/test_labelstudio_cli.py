"""``fairjudge labelstudio``: status of the session's real Label Studio, and an external
server (``[labelstudio] url``) that FairJudge neither starts nor stops."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from annotation.errors import LabelStudioError
from annotation.labelstudio.service import LabelStudioService
from server.cli import cli
from tests.annotation.labelstudio.conftest import shared_labelstudio


@pytest.fixture(scope="session")
def labelstudio(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabelStudioService]:
    """The same server as tests/annotation/labelstudio's fixture (started once a session)."""
    yield from shared_labelstudio(tmp_path_factory)


# Every config names the endpoints it uses; the built-in default is the embedded model.
ENDPOINTS = '[endpoints.embedded]\nbase_url = "http://127.0.0.1:8765/v1"\nmodel = "m"\n'


def invoke(config: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--config", str(config), "labelstudio", *args])


def test_status_of_the_running_server(labelstudio: LabelStudioService, tmp_path: Path) -> None:
    config = tmp_path / "fairjudge.toml"
    config.write_text(
        f'state_dir = "{tmp_path / "state"}"\n'
        f'[labelstudio]\nhome = "{labelstudio.home}"\nport = {labelstudio.config.port}\n'
        + ENDPOINTS
    )
    result = invoke(config, "status", "--json")
    assert result.exit_code == 0, result.output
    status = json.loads(result.output)
    # Expected values from the fixture's own config and pid file, not from status().
    url = f"http://127.0.0.1:{labelstudio.config.port}"
    assert (status["url"], status["pid"]) == (url, int(labelstudio.pid_file.read_text()))
    assert (status["managed"], status["answers"], status["token_works"]) == (True, True, True)
    assert status["version"] == "1.23.2" and status["installed"] is True
    plain = invoke(config, "status")
    assert plain.exit_code == 0
    assert f"Label Studio 1.23.2 at {url} answers; token works" in plain.output


def test_an_external_server_needs_its_token_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "fairjudge.toml"
    config.write_text(
        f'state_dir = "{tmp_path}"\n[labelstudio]\nurl = "http://127.0.0.1:9"\n'
        'token_env = "FJ_TEST_LS_CLI_TOKEN"\n' + ENDPOINTS
    )
    monkeypatch.delenv("FJ_TEST_LS_CLI_TOKEN", raising=False)
    result = invoke(config, "status")
    # main() prints a FairJudgeError as one `error:` line with exit code 1.
    assert isinstance(result.exception, LabelStudioError)
    assert "FJ_TEST_LS_CLI_TOKEN" in str(result.exception)
    for command in ("start", "stop"):
        said = invoke(config, command)
        assert said.exit_code == 0
        assert "not managed by FairJudge" in said.output
        said = invoke(config, command, "--json")
        assert json.loads(said.output) == {"managed": False, "url": "http://127.0.0.1:9"}
