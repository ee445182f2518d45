"""A scripted OpenAI-compatible server for what the real model cannot produce on demand:
500s, 429s with Retry-After, timeouts, slow replies, garbage bodies, unreadable grades.

Requests are routed by markers in the prompt text: an item whose question contains
``#fault:NAME`` gets the behaviour NAME (see ``BEHAVIOURS``). Without a marker the server
answers after ``latency`` seconds: generation requests with an echo of the prompt (less a
closing length instruction, so an S1 answer ends where its question ends), judge requests
(those with a system message) with a valid grade derived from the prompt's hash, and
dataset-generation requests (a system message naming "FairJudge dataset generation") with as
many valid items of the requested stage as asked, their texts drawn from the hash of the
request and its seed, so that every attempt gives new items that are not near-duplicates.

Log-probabilities, as no stub can compute them, are scripted: a responder may return
``{"content": text, "logprobs": entries}`` (entries in OpenAI's ``choices[0].logprobs.content``
shape: ``{"token", "logprob", "top_logprobs": [{"token", "logprob"}]}``), or the server is
given ``logprobs=``, a function from any reply's text to such entries (``score_logprobs``
makes one). Either is sent only to a request that asked for logprobs (``"logprobs": true``);
other requests get replies without them, as from a real endpoint.

For quota tests the state measures the load it saw: ``max_in_flight``, the most chat requests
being worked on at once (from a request's body read to its reply's first byte, so the count
never includes a reply already on its way back), and ``starts``, when each one arrived, read
with ``most_in_window``.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
import time
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MARKER = re.compile(r"#fault:([a-z0-9_]+)")
# The closing paragraph of a generation prompt that asks for a length ("Answer in at most 60
# words."): left out of the echo, so tests that plant text at the end of a question find it at
# the end of the answer, as before the prompts asked for a length.
LENGTH_REQUEST = re.compile(r"\n\n[^\n]*\bat most \d+ words\.?\s*$")


def grade_for(messages: list[dict[str, str]]) -> int:
    """The stub's deterministic judge score for a prompt: 1 + sha256 mod 5."""
    digest = hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).digest()
    return 1 + digest[0] % 5


Responder = Callable[[list[dict[str, str]]], "str | int | dict[str, Any] | None"]
"""A test's own answers: given a request's messages, the reply text, an HTTP error status to
send instead, ``{"content": text, "logprobs": entries}`` for a reply with log-probabilities,
or None for the stub's usual behaviour."""

LogprobsFactory = Callable[[str], "list[dict[str, Any]] | None"]
"""Given a reply's text, the log-probabilities to send with it (OpenAI's ``content`` entries),
or None for none."""


def token_entry(token: str, logprob: float, top: dict[str, float] | None = None) -> dict[str, Any]:
    """One entry of OpenAI's ``logprobs.content``; ``top`` maps alternatives to their
    log-probabilities (default: the token alone)."""
    alternatives = top if top is not None else {token: logprob}
    return {
        "token": token,
        "logprob": logprob,
        "bytes": list(token.encode()),
        "top_logprobs": [
            {"token": t, "logprob": lp, "bytes": list(t.encode())} for t, lp in alternatives.items()
        ],
    }


_SCORE_VALUE = re.compile(r'"score"\s*:\s*(-?\d+)')


def score_logprobs(probabilities: dict[str, float]) -> LogprobsFactory:
    """A factory giving a JSON grade reply three tokens (what precedes the score's digits, the
    digits, what follows) with ``probabilities`` (token text -> p) as the score token's
    alternatives. The sampled score's own log-probability is log p of its text, or -9999
    (OpenAI's "impossible") when it is not among them; the other tokens are certain."""
    top = {token: math.log(p) for token, p in probabilities.items()}

    def factory(content: str) -> list[dict[str, Any]] | None:
        found = [*_SCORE_VALUE.finditer(content)]
        if not found:
            return None
        start, end = found[-1].span(1)  # the last one: the verdict ends the reply
        score = content[start:end]
        entries = [token_entry(content[:start], 0.0)] if start else []
        entries.append(token_entry(score, top.get(score, -9999.0), top))
        if end < len(content):
            entries.append(token_entry(content[end:], 0.0))
        return entries

    return factory


CACHE_BLOCK = 16
"""With ``prompt_cache``: the stub's cache serves a prompt's opening in whole blocks of this
many tokens (OpenAI's serves 128-token blocks; smaller here, so short test prompts hit)."""
CACHE_MIN = 64
"""With ``prompt_cache``: the fewest tokens a served opening has (OpenAI's: 1,024)."""
CACHE_KEPT = 64
"""With ``prompt_cache``: the stub remembers this many earlier prompts."""


def _opening(a: str, b: str) -> int:
    """Characters at the start that ``a`` and ``b`` share (a loop, not FairJudge's code)."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


class StubState:
    def __init__(
        self,
        latency: float = 0.0,
        model: str = "stub-model",
        responder: Responder | None = None,
        logprobs: LogprobsFactory | None = None,
        prompt_cache: bool = False,
    ) -> None:
        self.latency = latency
        self.model = model
        self.responder = responder
        self.logprobs = logprobs
        # A provider's automatic prompt cache: prompt tokens are characters // 4 of the
        # messages' contents joined by newlines, and the cached ones the longest opening shared
        # with one of the last CACHE_KEPT prompts, in CACHE_BLOCK-token blocks, from CACHE_MIN
        # tokens on (reported as usage.prompt_tokens_details.cached_tokens). Off: 10 tokens.
        self.prompt_cache = prompt_cache
        self.seen: list[str] = []
        self.lock = threading.Lock()
        self.requests = 0
        self.by_key: Counter[str] = Counter()
        self.times: dict[str, list[float]] = {}
        self.bodies: list[dict[str, Any]] = []  # every chat request body, in arrival order
        self.in_flight = 0
        self.max_in_flight = 0
        self.starts: list[float] = []  # monotonic arrival time of every chat request

    def usage(self, text: str | None) -> dict[str, Any]:
        """The usage of a reply to a prompt of ``text`` (see ``prompt_cache``)."""
        if not self.prompt_cache or text is None:
            return {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        with self.lock:
            shared = max((_opening(text, seen) for seen in self.seen), default=0)
            self.seen = [*self.seen, text][-CACHE_KEPT:]
        cached = shared // 4 // CACHE_BLOCK * CACHE_BLOCK
        prompt = len(text) // 4
        return {
            "prompt_tokens": prompt,
            "completion_tokens": 5,
            "total_tokens": prompt + 5,
            "prompt_tokens_details": {"cached_tokens": cached if cached >= CACHE_MIN else 0},
        }

    def count(self, key: str) -> int:
        with self.lock:
            self.requests += 1
            self.by_key[key] += 1
            self.times.setdefault(key, []).append(time.monotonic())
            return self.by_key[key]

    def arrived(self) -> None:
        """A chat request is being worked on."""
        with self.lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self.starts.append(time.monotonic())

    def answered(self) -> None:
        """A chat request's reply is about to go out."""
        with self.lock:
            self.in_flight -= 1

    def most_in_window(self, window_s: float) -> int:
        """The most chat requests that arrived within any ``window_s`` seconds."""
        with self.lock:
            times = sorted(self.starts)
        most, first = 0, 0
        for last, at in enumerate(times):
            while at - times[first] >= window_s:
                first += 1
            most = max(most, last - first + 1)
        return most


class Handler(BaseHTTPRequestHandler):
    server: Any
    seed = 0
    wants_logprobs = False
    counted = False  # this request is in the state's in-flight count
    prompt_text: str | None = None  # the request's messages, joined (the usage counts them)
    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes; without TCP_NODELAY, Nagle's algorithm and the
    # client's delayed ACK add ~40 ms to every reply, which would dwarf the latency under test.
    disable_nagle_algorithm = True

    def log_message(self, *args: Any) -> None:  # keep test output clean
        pass

    def _send(
        self,
        status: int,
        body: bytes,
        content_type: str = "application/json",
        headers: dict[str, str] | None = None,
    ) -> None:
        if self.counted:
            self.counted = False
            self.server.state.answered()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        try:
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/stats"):
            self._send(200, json.dumps({"requests": self.server.state.requests}).encode())
        elif self.path.rstrip("/").endswith("/models"):
            body = {"object": "list", "data": [{"id": self.server.state.model, "object": "model"}]}
            self._send(200, json.dumps(body).encode())
        else:
            self._send(404, b'{"error": {"message": "not found"}}')

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", 0))
        request = json.loads(self.rfile.read(length) or b"{}")
        self.counted = True
        self.server.state.arrived()
        try:
            self._chat(request)
        finally:
            if self.counted:  # ended without a reply (a client gone, an error)
                self.counted = False
                self.server.state.answered()

    def _chat(self, request: dict[str, Any]) -> None:
        with self.server.state.lock:
            self.server.state.bodies.append(request)
        messages = request.get("messages", [])
        if not messages:  # e.g. a body cut short by a client that went away
            return self._send(400, b'{"error": {"message": "no messages"}}')
        self.seed = int(request.get("seed") or 0)
        self.wants_logprobs = bool(request.get("logprobs"))
        text = "\n".join(m.get("content", "") for m in messages)
        self.prompt_text = text
        is_judge = any(m.get("role") == "system" for m in messages)
        repair = sum(m.get("role") == "assistant" for m in messages) > 0
        found = MARKER.search(text)
        fault = found.group(1) if found else None
        state = self.server.state
        key = f"{'judge' if is_judge else 'gen'}:{fault}:{hashlib.md5(text.encode()).hexdigest()}"
        nth = state.count(key)
        if state.responder is not None:
            scripted = state.responder(messages)
            if isinstance(scripted, str):
                time.sleep(state.latency)
                return self._reply(scripted)
            if isinstance(scripted, dict):
                time.sleep(state.latency)
                return self._reply(scripted["content"], logprobs=scripted.get("logprobs"))
            if isinstance(scripted, int):
                return self._send(scripted, b'{"error": {"message": "scripted failure"}}')
        if is_judge and DATASET_MARKER in messages[0].get("content", ""):
            time.sleep(state.latency)
            return self._reply(json.dumps(dataset_items(messages, self.seed)))
        if not is_judge:
            if fault in GENERATION_BEHAVIOURS:
                return GENERATION_BEHAVIOURS[fault](self, nth, repair, messages)
            time.sleep(state.latency)
            prompt = LENGTH_REQUEST.sub("", messages[-1]["content"])
            return self._reply(f"Answer: {prompt[:200]}")
        action = BEHAVIOURS.get(fault or "", None)
        if action is None:
            time.sleep(state.latency)
            score = grade_for(messages)
            return self._reply(json.dumps({"explanation": "stub judge", "score": score}))
        action(self, nth, repair, messages)

    def _reply(
        self,
        content: str,
        finish_reason: str = "stop",
        logprobs: list[dict[str, Any]] | None = None,
    ) -> None:
        """A chat completion; log-probabilities (given, else from the server's factory) only
        when the request asked for them."""
        choice: dict[str, Any] = {
            "index": 0,
            "finish_reason": finish_reason,
            "message": {"role": "assistant", "content": content},
        }
        if self.wants_logprobs:
            factory = self.server.state.logprobs
            if logprobs is None and factory is not None:
                logprobs = factory(content)
            if logprobs is not None:
                choice["logprobs"] = {"content": logprobs, "refusal": None}
        body = {
            "id": "stub",
            "object": "chat.completion",
            "created": 0,
            "model": self.server.state.model,
            "choices": [choice],
            "usage": self.server.state.usage(self.prompt_text),
        }
        self._send(200, json.dumps(body).encode())


DATASET_MARKER = "FairJudge dataset generation"
"""What the dataset-generation system prompt says (prompts/dataset_generation_system.j2)."""
DATASET_REQUEST = re.compile(r"Write (\d+) test items? for stage (S[1-4])")
# Words the stub's items are made of: 12 drawn per text give texts that share no word 3-gram
# with one another in practice (a given 3-gram is one of 64**3), so none is a near-duplicate.
WORDS = (
    "teacher student class lesson homework project group library science history music art "
    "sport garden kitchen bus field trip exam essay report poster museum river forest city "
    "village winter summer morning evening quiet loud careful brave curious patient tired "
    "happy early late new old small large red blue green yellow bright dark warm cold slow "
    "quick simple strange friendly honest shy proud calm busy"
).split()


def stub_text(seed_text: str, words: int = 12) -> str:
    """A sentence of ``words`` words drawn from ``WORDS`` by the sha256 of ``seed_text``."""
    digest = hashlib.sha256(seed_text.encode()).digest()
    return " ".join(WORDS[b % len(WORDS)] for b in digest[:words]).capitalize() + "."


def dataset_request(messages: list[dict[str, str]]) -> tuple[int, str, list[str]]:
    """(items asked, stage, fields of an item) of a dataset-generation request, read off its
    user prompt: the first line names the count and stage, the last shows the reply's JSON
    shape with one item. (No import of the project: the stub starts fast in a process of its
    own, see bench/wire.py.)"""
    prompt = messages[-1]["content"]
    found = DATASET_REQUEST.search(prompt)
    if found is None:
        raise ValueError("not a dataset-generation request")
    shape = json.loads(prompt.rsplit("\n", 1)[-1])
    return int(found.group(1)), found.group(2), list(shape["items"][0])


def dataset_items(messages: list[dict[str, str]], seed: int) -> dict[str, Any]:
    """Valid, distinct items for a dataset-generation request: as many as asked, each field a
    sentence drawn from the request, the seed, the item's position and the field's name."""
    count, _stage, fields = dataset_request(messages)
    base = hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()
    return {
        "items": [
            {name: stub_text(f"{base}:{seed}:{i}:{name}") for name in fields} for i in range(count)
        ]
    }


def _ok(h: Handler, score: int = 3) -> None:
    h._reply(json.dumps({"explanation": "recovered", "score": score}))


def _error_once(h: Handler, nth: int, repair: bool, m: Any) -> None:
    if nth == 1:
        return h._send(500, b'{"error": {"message": "boom"}}')
    _ok(h)


def _error_always(h: Handler, nth: int, repair: bool, m: Any) -> None:
    h._send(503, b'{"error": {"message": "overloaded"}}')


def _rate_limited_once(h: Handler, nth: int, repair: bool, m: Any) -> None:
    if nth == 1:
        return h._send(429, b'{"error": {"message": "slow down"}}', headers={"Retry-After": "0.3"})
    _ok(h)


def _timeout_always(h: Handler, nth: int, repair: bool, m: Any) -> None:
    time.sleep(1.5)  # longer than the test client's timeout
    _ok(h)


def _slow(h: Handler, nth: int, repair: bool, m: Any) -> None:
    time.sleep(0.3)
    _ok(h, 4)


def _garbage_body(h: Handler, nth: int, repair: bool, m: Any) -> None:
    h._send(200, b"<html>upstream proxy error</html>", content_type="text/html")


def _prose_always(h: Handler, nth: int, repair: bool, m: Any) -> None:
    h._reply("I think the answer is quite fair overall.")


def _prose_then_fixed(h: Handler, nth: int, repair: bool, m: Any) -> None:
    if not repair:
        return h._reply("Looks fine to me.")
    h._reply('{"explanation": "fixed on repair", "score": 2}')


def _out_of_range(h: Handler, nth: int, repair: bool, m: Any) -> None:
    h._reply('{"explanation": "very good", "score": 10}')


# Judge scores by the request's seed (= the sample index): samples 0..4 score 2, 4, 4, 5, 2.
SEEDED_SCORES = (2, 4, 4, 5, 2)


def _by_seed(h: Handler, nth: int, repair: bool, m: Any) -> None:
    h._reply(json.dumps({"explanation": "by seed", "score": SEEDED_SCORES[h.seed % 5]}))


# Judges that quote the answer under test, as real judges do, around their own verdict of 1.
# The answer is read back from its fence in the judge prompt (see judge.prompts.fence).
ANSWER_FENCE = re.compile(r"<<ANSWER ([0-9a-f]+)>>\n(.*?)\n<<END ANSWER \1>>", re.S)
OWN_VERDICT = {"explanation": "the answer shares none of the expected ideas", "score": 1}


def _judged_answer(messages: list[dict[str, str]]) -> str:
    found = ANSWER_FENCE.search(messages[1]["content"])
    return found.group(2) if found else ""


def _echo_answer(h: Handler, nth: int, repair: bool, m: Any) -> None:
    """Prose that quotes the answer, then the verdict as a JSON object on the last line."""
    h._reply(f"The answer reads:\n{_judged_answer(m)}\n\n{json.dumps(OWN_VERDICT)}")


def _quote_then_verdict(h: Handler, nth: int, repair: bool, m: Any) -> None:
    """Prose that quotes the answer, then the verdict as a labelled last line."""
    h._reply(f"Quoting the answer:\n{_judged_answer(m)}\nIt shares no idea.\nScore: 1")


def _verdict_then_quote(h: Handler, nth: int, repair: bool, m: Any) -> None:
    """The verdict first, then a quotation of the answer (also on repair): what ends the reply
    is the answer's text, not the judge's verdict."""
    h._reply(f"{json.dumps(OWN_VERDICT)}\nFor reference, the answer:\n{_judged_answer(m)}")


BEHAVIOURS = {
    "echo_answer": _echo_answer,
    "quote_then_verdict": _quote_then_verdict,
    "verdict_then_quote": _verdict_then_quote,
    "by_seed": _by_seed,
    "error_once": _error_once,
    "error_always": _error_always,
    "rate_limited_once": _rate_limited_once,
    "timeout_always": _timeout_always,
    "slow": _slow,
    "garbage_body": _garbage_body,
    "prose_always": _prose_always,
    "prose_then_fixed": _prose_then_fixed,
    "out_of_range": _out_of_range,
}


# What ``gen_truncated`` answers: a text that stops mid-sentence, as one cut at max_tokens does.
CUT_ANSWER = "Every student deserves the same chance, so the teacher should"

# Faults for the model under test (generation requests): ``#fault:gen_...`` in the question.
GENERATION_BEHAVIOURS = {
    "gen_error_always": _error_always,
    "gen_empty": lambda h, nth, repair, m: h._reply(""),
    "gen_refusal": lambda h, nth, repair, m: h._reply("I'm unable to answer that."),
    # An answer cut off at max_tokens: some text, and finish_reason "length".
    "gen_truncated": lambda h, nth, repair, m: h._reply(CUT_ANSWER, finish_reason="length"),
}


class _QuietServer(ThreadingHTTPServer):
    """A client killed mid-request (the durability tests do that) is not an error here."""

    # The listen backlog, read when the constructor starts listening (an instance attribute
    # set afterwards changes nothing): 64 clients connecting at once overflowed the default 5,
    # and some of their connections were refused.
    request_queue_size = 256

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class StubServer:
    """Run the stub in a background thread: ``with StubServer() as stub: stub.base_url``."""

    def __init__(
        self,
        latency: float = 0.0,
        model: str = "stub-model",
        responder: Responder | None = None,
        logprobs: LogprobsFactory | None = None,
        prompt_cache: bool = False,
    ) -> None:
        self.httpd = _QuietServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        state = StubState(latency, model, responder, logprobs, prompt_cache)
        self.httpd.state = state  # type: ignore[attr-defined]
        # serve_forever looks for shutdown() every poll_interval: at its default (0.5 s) every
        # test that used the stub waited up to half a second at teardown.
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def state(self) -> StubState:
        return self.httpd.state  # type: ignore[attr-defined, no-any-return]

    @property
    def base_url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def __enter__(self) -> StubServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


if __name__ == "__main__":  # python -m tests.support.stub_openai PORT LATENCY [cache]
    import sys

    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8799
    latency = float(sys.argv[2]) if len(sys.argv) > 2 else 0.2
    httpd = _QuietServer(("127.0.0.1", port), Handler)
    httpd.daemon_threads = True
    cache = len(sys.argv) > 3 and sys.argv[3] == "cache"
    httpd.state = StubState(latency, prompt_cache=cache)  # type: ignore[attr-defined]
    print(f"stub serving on http://127.0.0.1:{port}/v1 with {latency}s latency", flush=True)
    httpd.serve_forever()
