"""An export's time limit grows with the project, and a timeout says which limit was hit and
how to raise it. A real Label Studio cannot be made slow on purpose, so a small local HTTP
server stands in for the two endpoints an export uses (the project, then its export)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from annotation.errors import LabelStudioError
from annotation.labelstudio.client import LabelStudioClient

EXPORT_DELAY_S = 1.5  # how long the stand-in takes to build an export


class _SlowExport(BaseHTTPRequestHandler):
    tasks = 0

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        if "/export" in self.path:
            time.sleep(EXPORT_DELAY_S)
            self._reply([{"id": 1, "data": {}, "annotations": []}])
        else:
            self._reply({"id": 7, "title": "p", "task_number": self.tasks})

    def _reply(self, body: Any) -> None:
        data = json.dumps(body).encode()
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up waiting: that is the point of the test

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def slow_server() -> Iterator[tuple[str, type[_SlowExport]]]:
    handler = type("Handler", (_SlowExport,), {})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()


def test_the_limit_is_timeout_s_plus_5_s_per_1000_tasks() -> None:
    client = LabelStudioClient("http://127.0.0.1:9", "x" * 40, timeout_s=30)
    # By hand: 30 + 5 x 12,632 / 1,000 = 93.16 s for the project of issue 25, whose first
    # export took 21.4 s (the old flat limit was 30 s).
    assert client.export_timeout(12_632) == pytest.approx(93.16)
    assert client.export_timeout(0) == 30


def test_a_small_project_times_out_naming_the_limit(
    slow_server: tuple[str, type[_SlowExport]],
) -> None:
    url, handler = slow_server
    handler.tasks = 100  # limit 0.2 + 5 x 0.1 = 0.7 s, below the 1.5 s the export takes
    client = LabelStudioClient(url, "x" * 40, timeout_s=0.2)
    with pytest.raises(LabelStudioError) as caught:
        client.export_tasks(7)
    said = str(caught.value)
    assert "did not answer within 0.7 s (100 tasks: [labelstudio] timeout_s 0.2 s" in said
    assert "raise timeout_s under [labelstudio] in fairjudge.toml" in said
    assert "\n" not in said


def test_a_larger_project_gets_the_time_it_needs(
    slow_server: tuple[str, type[_SlowExport]],
) -> None:
    url, handler = slow_server
    handler.tasks = 400  # limit 0.2 + 5 x 0.4 = 2.2 s, above the 1.5 s the export takes
    client = LabelStudioClient(url, "x" * 40, timeout_s=0.2)
    assert client.export_tasks(7) == [{"id": 1, "data": {}, "annotations": []}]
    # Passing the count the pull already read gives the same limit without asking again.
    assert client.export_tasks(7, tasks=400) == [{"id": 1, "data": {}, "annotations": []}]
