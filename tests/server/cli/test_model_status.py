"""`fairjudge model status` shows the embedded model's speed measured on this machine, read
from llama.cpp's timing lines in the server's log (judge.models.embedded.measured_speed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from judge.models.embedded import MeasuredSpeed, measured_speed
from server.cli import cli
from server.cli.model import speed_line
from tests.support.factories import free_port, write_config

# Three requests as llama-cpp-python's server logs them, among its other lines. The second
# request's prompt line is one llama.cpp writes on a fresh server (69 tokens in 0.07 ms,
# a million tokens a second), which says nothing about the speed.
REQUEST_1 = """\
INFO:     127.0.0.1:55616 - "GET /v1/models HTTP/1.1" 200 OK
llama_perf_context_print:        load time =       0.34 ms
llama_perf_context_print: prompt eval time =    2039.34 ms /   256 tokens (    7.97 ms per token,   125.53 tokens per second)
llama_perf_context_print:        eval time =     455.39 ms /    28 runs   (   16.26 ms per token,    61.49 tokens per second)
llama_perf_context_print:       total time =    2761.24 ms /   284 tokens
llama_perf_context_print:    graphs reused =         27
INFO:     127.0.0.1:55616 - "POST /v1/chat/completions HTTP/1.1" 200 OK
"""  # noqa: E501
REQUESTS_2_3 = """\
Llama.generate: 24 prefix-match hit, remaining 69 prompt tokens to eval
llama_perf_context_print:        load time =       0.34 ms
llama_perf_context_print: prompt eval time =       0.07 ms /    69 tokens (    0.00 ms per token, 1045454.55 tokens per second)
llama_perf_context_print:        eval time =    1939.18 ms /   159 runs   (   12.20 ms per token,    81.99 tokens per second)
llama_perf_context_print:       total time =    2348.45 ms /   228 tokens
INFO:     127.0.0.1:55616 - "POST /v1/chat/completions HTTP/1.1" 200 OK
Llama.generate: 112 prefix-match hit, remaining 144 prompt tokens to eval
llama_perf_context_print: prompt eval time =     960.66 ms /   144 tokens (    6.67 ms per token,   149.90 tokens per second)
llama_perf_context_print:        eval time =     605.43 ms /    32 runs   (   18.92 ms per token,    52.85 tokens per second)
llama_perf_context_print:       total time =    1600.00 ms /   176 tokens
INFO:     127.0.0.1:55616 - "POST /v1/chat/completions HTTP/1.1" 200 OK
"""  # noqa: E501
LOG = REQUEST_1 + REQUESTS_2_3


def test_speed_is_total_tokens_over_total_time(tmp_path: Path) -> None:
    log = tmp_path / "model-server.log"
    log.write_text(LOG)
    speed = measured_speed(log)
    # Prompt: requests 1 and 3 (2's line is skipped): (256 + 144) tokens in (2039.34 + 960.66)
    # ms = 400 tokens in 3.000 s = 133.3 tokens/s. Generation: all three, (28 + 159 + 32) =
    # 219 tokens in (455.39 + 1939.18 + 605.43) ms = 3.000 s: 73.0 tokens/s.
    assert speed.requests == 3
    assert speed.prompt_tokens_per_s == pytest.approx(400 / 3.0)
    assert speed.generation_tokens_per_s == pytest.approx(73.0)
    assert speed_line(speed) == (
        "speed: prompt 133 tokens/s, generation 73 tokens/s (last 3 requests on this machine)"
    )


def test_only_the_newest_requests_count(tmp_path: Path) -> None:
    log = tmp_path / "model-server.log"
    log.write_text(LOG)
    speed = measured_speed(log, requests=1)
    # Request 3 alone: 144 tokens in 0.96066 s = 149.9/s; 32 tokens in 0.60543 s = 52.85/s.
    assert speed.requests == 1
    assert speed.prompt_tokens_per_s == pytest.approx(144 / 0.96066)
    assert speed.generation_tokens_per_s == pytest.approx(32 / 0.60543)


def test_only_the_end_of_a_long_log_is_read(tmp_path: Path) -> None:
    log = tmp_path / "model-server.log"
    filler = "".join(f"INFO: line {n} of an old request\n" for n in range(20_000))
    text = filler + LOG
    log.write_text(text)
    # Start reading 10 bytes into request 1's prompt line: that cut line is dropped, so
    # request 1 (a generation line without its prompt line) does not count; requests 2 and
    # 3 do: prompt 144 tokens in 0.96066 s (2's skipped), generation (159 + 32) tokens in
    # (1939.18 + 605.43) ms = 191 / 2.54461 s = 75.06 tokens/s.
    cut = text.index("llama_perf_context_print: prompt eval time =    2039.34") + 10
    speed = measured_speed(log, tail_bytes=len(text) - cut)
    assert speed.requests == 2
    assert speed.prompt_tokens_per_s == pytest.approx(144 / 0.96066)
    assert speed.generation_tokens_per_s == pytest.approx(191 / 2.54461)


def test_no_log_or_no_request_yet_is_not_measured(tmp_path: Path) -> None:
    assert measured_speed(tmp_path / "missing.log") == MeasuredSpeed(None, None, 0)
    log = tmp_path / "model-server.log"
    log.write_text("INFO:     Uvicorn running on http://127.0.0.1:8765 (Press CTRL+C to quit)\n")
    assert measured_speed(log) == MeasuredSpeed(None, None, 0)
    assert speed_line(measured_speed(log)) == (
        "speed: not measured yet (no request served since the log began)"
    )


def test_model_status_shows_the_speed(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / "model-server.log").write_text(LOG)
    # write_config puts the state folder beside the config file.
    config = write_config(
        tmp_path / "c.toml", "http://127.0.0.1:9/v1", "sqlite://", port=free_port()
    )
    runner = CliRunner()
    shown = runner.invoke(cli, ["--config", str(config), "model", "status"])
    assert shown.exit_code == 0, shown.output
    assert "does not answer" in shown.output  # nothing listens on that port
    assert shown.output.splitlines()[-1] == (
        "speed: prompt 133 tokens/s, generation 73 tokens/s (last 3 requests on this machine)"
    )
    data = json.loads(
        runner.invoke(cli, ["--config", str(config), "model", "status", "--json"]).output
    )
    assert data["speed"]["requests"] == 3
    assert data["speed"]["generation_tokens_per_s"] == pytest.approx(73.0)
