"""A scripted stand-in for OpenAI's files and batches routes, beside the chat stub's own
(``tests/support/stub_openai.py``): a real HTTP server in a thread.

It accepts batch input files (``POST /v1/files``, multipart), lists and serves files, creates
batches (``POST /v1/batches``), lists and describes them. A batch runs in a thread of its own:
each line's request is sent to this same server's ``/v1/chat/completions`` (so a batch
answers exactly as a live call to the stub would), and the batch ends ``completed`` once its
simulated window (``window_s``) has passed, with an output file and, when some lines failed,
an error file, in OpenAI's shapes.

What a test can script (``BatchScript``): lines that fail, come back unreadable or are missing
from the output (``line_fate``), a batch that expires after some lines, a batch that fails
validation; and ``hold``, which stops the server at one step (upload, create, poll, download)
before or after doing it, until the test has killed the client and calls ``release``. It
counts uploads, batch creations, polls, downloads and live chat calls (those not sent by a
batch).
"""

from __future__ import annotations

import http.client
import json
import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.support.stub_openai import Handler, Responder, StubState

FROM_BATCH = "X-Stub-Batch"
"""Header of the chat requests a batch sends to its own server (not counted as live)."""

LineFate = Callable[[int, dict[str, Any]], "str | None"]
"""Given a line's index in the input file and the line, None (answer it) or "fail" (an
error line: HTTP 500), "malformed" (an unreadable output line that names the call), or
"missing" (no line at all)."""

MALFORMED = '{{"custom_id": "{key}", "response": {{"status_code": 200, "body": {{"choices": [{{"mes'
"""An output line cut off in its middle (what a broken file transfer leaves)."""


@dataclass
class BatchScript:
    """How the stub runs batches."""

    window_s: float = 0.2
    line_fate: LineFate | None = None
    expire_after: int | None = None
    """Lines answered before the batch expires (None: it does not)."""
    expired_lines: str = "error"
    """What the lines an expired batch never reached get: "error" (a batch_expired line in
    the error file, as OpenAI does) or "missing" (nothing)."""
    fail_batch: str | None = None
    """The batch fails validation with this message (no output at all)."""


@dataclass
class StoredFile:
    id: str
    filename: str
    purpose: str
    content: bytes
    created_at: int

    def public(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "file",
            "bytes": len(self.content),
            "created_at": self.created_at,
            "filename": self.filename,
            "purpose": self.purpose,
            "status": "processed",
        }


class BatchStubState(StubState):
    def __init__(self, script: BatchScript, **chat: Any) -> None:
        super().__init__(**chat)
        self.script = script
        self.files: dict[str, StoredFile] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.uploads = self.creations = self.polls = self.downloads = self.live_chat = 0
        self.holds: dict[str, str] = {}
        self.held = threading.Event()
        self.released = threading.Event()
        self.address: tuple[str, int] = ("127.0.0.1", 0)


@dataclass
class _Run:
    out: list[str] = field(default_factory=list)
    err: list[str] = field(default_factory=list)


class BatchHandler(Handler):
    server: Any

    @property
    def state(self) -> BatchStubState:
        return self.server.state  # type: ignore[no-any-return]

    def _json(self, status: int, body: Any) -> None:
        self._send(status, json.dumps(body).encode())

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        path = parts.path.rstrip("/")
        state = self.state
        if path.endswith("/v1/files"):
            purpose = parse_qs(parts.query).get("purpose", [None])[0]
            with state.lock:
                files = [f.public() for f in state.files.values() if purpose in (None, f.purpose)]
            return self._json(200, _page(files[::-1]))
        if found := re.fullmatch(r".*/v1/files/([^/]+)/content", path):
            if self._held("download", done=False):
                return self._json(503, {"error": {"message": "held"}})
            with state.lock:
                stored = state.files.get(found.group(1))
                state.downloads += 1
            if stored is None:
                return self._json(404, {"error": {"message": "no such file"}})
            self._held("download", done=True)
            return self._send(200, stored.content, content_type="application/octet-stream")
        if found := re.fullmatch(r".*/v1/files/([^/]+)", path):
            with state.lock:
                stored = state.files.get(found.group(1))
            if stored is None:
                return self._json(404, {"error": {"message": "no such file"}})
            return self._json(200, stored.public())
        if path.endswith("/v1/batches"):
            with state.lock:
                batches = [dict(b) for b in state.batches.values()]
            return self._json(200, _page(batches[::-1]))
        if found := re.fullmatch(r".*/v1/batches/([^/]+)", path):
            if self._held("poll", done=False):
                return self._json(503, {"error": {"message": "held"}})
            with state.lock:
                state.polls += 1
                batch = state.batches.get(found.group(1))
                batch = dict(batch) if batch else None
            if batch is None:
                return self._json(404, {"error": {"message": "no such batch"}})
            return self._json(200, batch)
        super().do_GET()

    def do_POST(self) -> None:
        path = urlsplit(self.path).path.rstrip("/")
        if path.endswith("/v1/files"):
            return self._upload()
        if path.endswith("/v1/batches"):
            return self._create()
        if not self.headers.get(FROM_BATCH):
            with self.state.lock:
                self.state.live_chat += 1
        super().do_POST()

    def _body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length", 0)))

    def _upload(self) -> None:
        fields = _multipart(self._body(), self.headers.get("Content-Type", ""))
        if self._held("upload", done=False):
            return self._json(503, {"error": {"message": "held"}})
        filename, content = fields["file"]
        purpose = fields.get("purpose", (None, b"batch"))[1].decode()
        state = self.state
        with state.lock:
            state.uploads += 1
            stored = StoredFile(
                f"file-{len(state.files) + 1}", filename or "upload.jsonl", purpose, content,
                int(time.time()),
            )  # fmt: skip
            state.files[stored.id] = stored
        self._held("upload", done=True)
        self._json(200, stored.public())

    def _create(self) -> None:
        request = json.loads(self._body() or b"{}")
        if self._held("create", done=False):
            return self._json(503, {"error": {"message": "held"}})
        state = self.state
        with state.lock:
            if request.get("input_file_id") not in state.files:
                return self._json(400, {"error": {"message": "no such input file"}})
            state.creations += 1
            batch_id = f"batch_{len(state.batches) + 1}"
            batch = {
                "id": batch_id,
                "object": "batch",
                "endpoint": request.get("endpoint"),
                "errors": None,
                "input_file_id": request["input_file_id"],
                "completion_window": request.get("completion_window", "24h"),
                "status": "validating",
                "output_file_id": None,
                "error_file_id": None,
                "created_at": int(time.time()),
                "request_counts": {"total": 0, "completed": 0, "failed": 0},
                "metadata": request.get("metadata"),
            }
            state.batches[batch_id] = batch
        threading.Thread(target=_run_batch, args=(state, batch_id), daemon=True).start()
        self._held("create", done=True)
        self._json(200, batch)

    def _held(self, step: str, *, done: bool) -> bool:
        """Hold the reply at ``step`` (once) if the test asked for it, before doing the step
        (``done`` False: it is then not done) or after; True when it held."""
        state = self.state
        with state.lock:
            mode = state.holds.get(step)
            if mode is None or (mode == "after") != done:
                return False
            del state.holds[step]
        state.held.set()
        state.released.wait(60)
        return True


def _page(data: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "object": "list",
        "data": data,
        "has_more": False,
        "first_id": data[0]["id"] if data else None,
        "last_id": data[-1]["id"] if data else None,
    }


def _multipart(body: bytes, content_type: str) -> dict[str, tuple[str | None, bytes]]:
    """The fields of a multipart/form-data body: name -> (filename, content)."""
    found = re.search(r'boundary="?([^";]+)"?', content_type)
    if found is None:
        raise ValueError(f"not a multipart body: {content_type}")
    fields: dict[str, tuple[str | None, bytes]] = {}
    for part in body.split(b"--" + found.group(1).encode())[1:]:
        if part.startswith(b"--"):
            break
        head, _, content = part.partition(b"\r\n\r\n")
        name = re.search(rb'name="([^"]*)"', head)
        filename = re.search(rb'filename="([^"]*)"', head)
        if name is not None:
            fields[name.group(1).decode()] = (
                filename.group(1).decode() if filename else None,
                content.removesuffix(b"\r\n"),
            )
    return fields


def _run_batch(state: BatchStubState, batch_id: str) -> None:
    """Run one batch: answer its lines through the chat route, as the script says, and end
    it once its window has passed."""
    started = time.monotonic()
    script = state.script
    with state.lock:
        batch = state.batches[batch_id]
        content = state.files[batch["input_file_id"]].content
    lines = [json.loads(raw) for raw in content.decode().splitlines() if raw.strip()]
    if script.fail_batch is not None:
        time.sleep(script.window_s)
        with state.lock:
            batch.update(
                status="failed",
                errors={
                    "object": "list",
                    "data": [{"code": "invalid", "message": script.fail_batch, "line": None}],
                },  # fmt: skip
            )
        return
    with state.lock:
        counts = {"total": len(lines), "completed": 0, "failed": 0}
        batch.update(status="in_progress", request_counts=counts)
    reached = lines if script.expire_after is None else lines[: script.expire_after]
    run = _Run()
    local = threading.local()

    def answer(index: int) -> tuple[str | None, str | None]:
        line = lines[index]
        fate = script.line_fate(index, line) if script.line_fate else None
        key = line["custom_id"]
        if fate == "missing":
            return None, None
        if fate == "malformed":
            return MALFORMED.format(key=key), None
        if fate == "fail":
            error = {"status_code": 500, "body": {"error": {"message": "scripted line failure"}}}
            return None, _line(key, response=error)
        if not hasattr(local, "conn"):
            local.conn = http.client.HTTPConnection(*state.address, timeout=30)
        local.conn.request(
            "POST", "/v1/chat/completions", json.dumps(line["body"]),
            {"Content-Type": "application/json", FROM_BATCH: "1"},
        )  # fmt: skip
        reply = local.conn.getresponse()
        body = json.loads(reply.read())
        response = {"status_code": reply.status, "body": body}
        if reply.status == 200:
            return _line(key, response=response), None
        return None, _line(key, response=response)

    with ThreadPoolExecutor(8) as pool:
        for out, err in pool.map(answer, range(len(reached))):
            if out is not None:
                run.out.append(out)
            if err is not None:
                run.err.append(err)
            with state.lock:
                counts = batch["request_counts"]
                counts["completed" if err is None else "failed"] += 1
    expired = script.expire_after is not None and script.expire_after < len(lines)
    if expired and script.expired_lines == "error":
        gone = {"code": "batch_expired", "message": "not executed before the window expired"}
        run.err += [_line(line["custom_id"], error=gone) for line in lines[len(reached) :]]
    time.sleep(max(0.0, script.window_s - (time.monotonic() - started)))
    with state.lock:
        for kind, found in (("output_file_id", run.out), ("error_file_id", run.err)):
            if found:
                stored = StoredFile(
                    f"file-{len(state.files) + 1}", f"{batch_id}_{kind}.jsonl", "batch_output",
                    "".join(x + "\n" for x in found).encode(), int(time.time()),
                )  # fmt: skip
                state.files[stored.id] = stored
                batch[kind] = stored.id
        batch["status"] = "expired" if expired else "completed"
        # Not in OpenAI's shape (it has whole-second timestamps): how long the batch ran here,
        # so a benchmark can take the provider's share out of a command's wall time.
        batch["stub_seconds"] = time.monotonic() - started


def _line(key: str, *, response: Any = None, error: Any = None) -> str:
    return json.dumps(
        {"id": f"batch_req_{key[:8]}", "custom_id": key, "response": response, "error": error}
    )


class _Server(ThreadingHTTPServer):
    """A client killed mid-request (the kill tests do that) is not an error here."""

    daemon_threads = True
    request_queue_size = 256

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class BatchStub:
    """The chat stub with files and batches: ``with BatchStub(BatchScript(...)) as stub``."""

    def __init__(
        self,
        script: BatchScript | None = None,
        *,
        latency: float = 0.0,
        responder: Responder | None = None,
        port: int = 0,
    ) -> None:
        self.httpd = _Server(("127.0.0.1", port), BatchHandler)
        state = BatchStubState(script or BatchScript(), latency=latency, responder=responder)
        host, port = self.httpd.server_address[:2]
        state.address = (str(host), int(port))
        self.httpd.state = state  # type: ignore[attr-defined]
        # Polled every 50 ms, not every 500: stopping the stub is part of every test's time.
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def state(self) -> BatchStubState:
        return self.httpd.state  # type: ignore[attr-defined, no-any-return]

    @property
    def script(self) -> BatchScript:
        return self.state.script

    @property
    def base_url(self) -> str:
        host, port = self.state.address
        return f"http://{host}:{port}/v1"

    def hold(self, step: str, when: str) -> None:
        """Stop at the next ``step`` ("upload", "create", "poll", "download"), ``when``
        "before" doing it (it is then not done) or "after", until ``release``."""
        if step not in ("upload", "create", "poll", "download") or when not in ("before", "after"):
            raise ValueError(f"cannot hold {when} {step}")
        self.state.held.clear()
        self.state.released.clear()
        with self.state.lock:
            self.state.holds[step] = when

    def release(self) -> None:
        self.state.released.set()

    def __enter__(self) -> BatchStub:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
        self.httpd.shutdown()
        self.httpd.server_close()


if __name__ == "__main__":  # python -m tests.support.stub_batch PORT WINDOW_S
    import sys

    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8798
    window = float(sys.argv[2]) if len(sys.argv) > 2 else 1.0
    stub = BatchStub(BatchScript(window_s=window), port=port)
    print(f"batch stub serving on {stub.base_url} with a {window} s window", flush=True)
    stub.httpd.serve_forever()
