"""The one module that talks to model endpoints, through the ``openai`` package.

It decides what is worth retrying (429, 5xx, timeouts, dropped connections; Retry-After is
honoured) and what is not (bad key, unknown model, a request the server rejects). The
``openai`` client's own retries are switched off so the count here is the true count.

A completion is posted on the chat completions route by ``ModelClient._post`` through
openai's own HTTP client, with the URL and headers openai would send, and any failure raised
as the exception openai raises for it (its classes, messages and bodies), so retries and
errors read exactly as with openai's ``post``, at 0.3 ms less CPU a call. Its reply is read
as plain JSON (``read_completion``, which a batch's output lines go through too). The body
we send is plain JSON already, so the typed ``chat.completions.create`` would only add its
parameter transformation: 1.6 ms of CPU per call against 2.8 ms on the 2-core machine we
measure on; building openai's ``ChatCompletion`` from the reply cost 0.25-0.4 ms more
(``python -m bench.client_reply``; both in docs/performance.md).

Asked with ``top_logprobs``, a completion also carries the log-probability of each generated
token and of its most likely alternatives (OpenAI's ``logprobs.content``), kept as plain JSON
for the call cache and for ``judge.grading.logprobs``.

Each HTTP attempt holds a place in the endpoint's quota (``judge.models.limiter``) while it is
out, not the whole call: an attempt is what the server counts against ``concurrency`` and
``requests_per_minute`` (a retry is one more request to it), and a call sleeping through its
backoff or a Retry-After would otherwise keep a slot that other workers could use.
"""

from __future__ import annotations

import json
import math
import ssl
import time
from dataclasses import dataclass
from typing import Any

import httpx2
import openai
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt
from tenacity.wait import wait_random_exponential

from judge.config import EndpointConfig
from judge.errors import EndpointError
from judge.models.limiter import Limiter, QuotaUnavailable, local_limiter

RETRYABLE = (
    openai.RateLimitError,
    openai.InternalServerError,
    openai.APITimeoutError,
    openai.APIConnectionError,
)
MAX_RETRY_AFTER_S = 120.0  # a longer Retry-After is treated as this, so no call hangs for hours
FATAL = (openai.AuthenticationError, openai.PermissionDeniedError, openai.NotFoundError)
IMPOSSIBLE_LOGPROB = -9999.0
"""Stands in for a log-probability of minus infinity (OpenAI's own convention), which JSON,
and so the cache's JSON column on PostgreSQL, cannot hold."""

TokenLogprobs = list[dict[str, Any]]
"""One ``{"token": str, "logprob": float, "top": [[token, logprob], ...]}`` per generated
token, ``top`` holding the alternatives the endpoint reported, most likely first."""


@dataclass(frozen=True)
class Completion:
    text: str | None
    finish_reason: str | None
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    """Seconds from the first attempt to the reply, retries and backoff included, waits for
    the endpoint's quota left out."""
    attempts: int
    logprobs: TokenLogprobs | None = None
    """The reply's token log-probabilities; None when not asked for or none were returned."""
    cached_prompt_tokens: int = 0
    """Of ``prompt_tokens``, those the provider served from its prompt cache (the usage's
    ``prompt_tokens_details.cached_tokens``; 0 when not reported)."""


class CallFailed(Exception):
    """A call that failed for good (retries used up, or an error not worth retrying)."""

    def __init__(self, reason: str, attempts: int) -> None:
        super().__init__(reason)
        self.reason = reason
        self.attempts = attempts


def _is_retryable(exc: BaseException) -> bool:
    return isinstance(exc, RETRYABLE)


def retry_after_seconds(exc: BaseException | None) -> float | None:
    """Seconds asked for by a Retry-After (or retry-after-ms) header, if any."""
    response = getattr(exc, "response", None)
    if response is None:
        return None
    headers = response.headers
    try:
        if "retry-after-ms" in headers:
            return float(headers["retry-after-ms"]) / 1000
        if "retry-after" in headers:
            return float(headers["retry-after"])
    except ValueError:
        return None  # an HTTP date: fall back to exponential backoff
    return None


class ModelClient:
    """Calls one endpoint; thread-safe, so a pool of workers can share it.

    ``limiter`` keeps the endpoint's quota: the shared one in Redis that
    ``judge.models.limiter.limiter_for`` builds from the settings, or by default the
    process's own (``requests_per_minute`` within this process).
    """

    def __init__(
        self, name: str, config: EndpointConfig, *, limiter: Limiter | None = None
    ) -> None:
        self.name = name
        self.config = config
        self.limiter = limiter if limiter is not None else local_limiter()
        # One connection pool (openai's default client: its limits, redirects) for both
        # openai's own calls (/models) and the completions posted by ``_post``.
        self._http = openai.DefaultHttpxClient(timeout=config.timeout_s)
        self._client = openai.OpenAI(
            base_url=config.base_url,
            api_key=config.api_key(),
            timeout=config.timeout_s,
            max_retries=0,
            http_client=self._http,
        )
        # What openai's ``post`` would send, worked out once instead of per call: the route's
        # URL and its headers (key, user agent and platform, retry count 0 as with
        # ``max_retries=0``, read timeout).
        self._url = str(self._client.base_url).rstrip("/") + "/chat/completions"
        self._headers = {
            **{k: v for k, v in self._client.default_headers.items() if isinstance(v, str)},
            **self._client.auth_headers,
            "x-stainless-retry-count": "0",
            "x-stainless-read-timeout": str(config.timeout_s),
        }
        self._backoff = wait_random_exponential(multiplier=0.5, max=config.max_backoff_s)

    @property
    def model(self) -> str:
        return self.config.model

    def served_models(self) -> list[str]:
        """Model names listed by the endpoint's /models route."""
        try:
            return [m.id for m in self._client.models.list()]
        except openai.APIConnectionError as exc:
            raise EndpointError(
                f"cannot reach endpoint {self.name!r} at {self.config.base_url} ({exc}). "
                "Is the server running? For the embedded model run `fairjudge model serve`; "
                "otherwise check base_url in the config."
            ) from None
        except openai.AuthenticationError:
            raise EndpointError(
                f"endpoint {self.name!r} rejected the API key from "
                f"${self.config.api_key_env or '(none)'}"
            ) from None

    def check_model(self) -> None:
        """Refuse a model name the endpoint does not serve (some answer with another one)."""
        if not self.config.check_model:
            return
        try:
            served = self.served_models()
        except EndpointError:
            raise
        except openai.APIError:
            return  # no /models route: nothing to check against
        if served and self.config.model not in served:
            raise EndpointError(
                f"endpoint {self.name!r} at {self.config.base_url} serves "
                f"{', '.join(served)}, not {self.config.model!r}; fix `model` in "
                f"[endpoints.{self.name}] or start the server with that model"
            )

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        asked = retry_after_seconds(exc)
        if asked is not None:  # the server's wish wins over our own backoff schedule
            return min(max(asked, 0.0), MAX_RETRY_AFTER_S)
        return float(self._backoff(state))

    def _post(self, body: dict[str, Any]) -> httpx2.Response:
        """POST one completion body, raising what openai's ``post`` raises for the same
        reply: ``APITimeoutError``, ``APIConnectionError``, or for a 4xx/5xx the
        ``APIStatusError`` subclass openai makes from that response (same class, message
        and body). openai's own request path (options copied, headers rebuilt, the reply
        wrapped and unwrapped) cost 0.3 ms of CPU a call over the HTTP request itself
        (docs/performance.md); the body is JSON already, serialised as openai does."""
        content = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
        request = self._http.build_request(
            "POST", self._url, headers=self._headers, content=content
        )
        try:
            response = self._http.send(request)
        except httpx2.TimeoutException as err:
            raise openai.APITimeoutError(request=request) from err
        except (httpx2.RequestError, ssl.SSLError) as err:
            raise openai.APIConnectionError(request=request) from err
        if response.is_error:
            raise self._client._make_status_error_from_response(response) from None
        return response

    def response_format(self, schema: dict[str, Any] | None) -> dict[str, Any] | None:
        if schema is None or self.config.structured_output == "none":
            return None
        if self.config.structured_output == "json_object_schema":
            return {"type": "json_object", "schema": schema}
        return {
            "type": "json_schema",
            "json_schema": {"name": "grade", "schema": schema, "strict": True},
        }

    def chat_body(
        self,
        messages: list[dict[str, str]],
        *,
        temperature: float,
        max_tokens: int,
        schema: dict[str, Any] | None = None,
        seed: int | None = None,
        top_logprobs: int | None = None,
    ) -> dict[str, Any]:
        """The /v1/chat/completions body of one call: what ``complete`` posts, and what a
        batch input file holds for the same call (``judge.models.batch``)."""
        body: dict[str, Any] = {
            "model": self.config.model,
            "messages": messages,
            "temperature": temperature,
            "max_tokens": max_tokens,
        }
        fmt = self.response_format(schema)
        if fmt is not None:
            body["response_format"] = fmt
        if seed is not None:
            body["seed"] = seed
        if top_logprobs is not None:
            body["logprobs"] = True
            body["top_logprobs"] = top_logprobs
        return body

    def complete(
        self,
        messages: list[dict[str, str]],
        *,
        temperature: float,
        max_tokens: int,
        schema: dict[str, Any] | None = None,
        seed: int | None = None,
        top_logprobs: int | None = None,
    ) -> Completion:
        """One chat completion, retried on transient failures; raises CallFailed.

        With ``top_logprobs`` (N), the endpoint is asked for each token's log-probability and
        its N likeliest alternatives, read into ``Completion.logprobs``.
        """
        kwargs = self.chat_body(
            messages,
            temperature=temperature,
            max_tokens=max_tokens,
            schema=schema,
            seed=seed,
            top_logprobs=top_logprobs,
        )
        attempts = 0
        queued = 0.0  # seconds spent waiting for the quota, left out of the latency

        def once() -> Any:
            nonlocal attempts, queued
            asked = time.perf_counter()
            with self.limiter.hold(self.config):
                queued += time.perf_counter() - asked
                attempts += 1
                return self._post(kwargs)

        retrying = Retrying(
            retry=retry_if_exception(_is_retryable),
            stop=stop_after_attempt(self.config.max_retries + 1),
            wait=self._wait,
            reraise=True,
        )
        start = time.perf_counter()
        try:
            result = retrying(once)
        except FATAL as exc:
            raise EndpointError(
                f"endpoint {self.name!r} refused the call ({type(exc).__name__}: "
                f"{exc.message}); check the API key and the model name"
            ) from None
        except openai.APIStatusError as exc:
            raise CallFailed(f"HTTP {exc.status_code}: {exc.message}", attempts) from None
        except (openai.APITimeoutError, openai.APIConnectionError) as exc:
            raise CallFailed(f"{type(exc).__name__}: {exc}", attempts) from None
        except openai.APIError as exc:  # e.g. a body that is not a chat completion
            raise CallFailed(f"{type(exc).__name__}: {exc}", attempts) from None
        except QuotaUnavailable as exc:  # Redis down for long: a failed call, kept as such
            raise CallFailed(str(exc), attempts) from None
        latency = time.perf_counter() - start - queued
        try:
            body = result.json()
        except ValueError:
            body = None
        done = read_completion(
            body, logprobs=top_logprobs is not None, latency_s=latency, attempts=attempts
        )
        if done is None:
            raise CallFailed(f"malformed completion: {result.text[:300]}", attempts)
        return done


def read_completion(
    body: Any, *, logprobs: bool, latency_s: float, attempts: int
) -> Completion | None:
    """A chat completion's JSON body read into a ``Completion`` (None: it is not one): the
    first choice's text (None when it has none) and finish reason, the usage counts (0 when
    missing; the cached prompt tokens at most the prompt's), and with ``logprobs`` the tokens'
    log-probabilities (``token_logprobs``).
    Live replies and a batch's output lines are read by this one function."""
    if not isinstance(body, dict):
        return None
    try:
        choice = body["choices"][0]
        text = choice["message"].get("content")
        finish = choice.get("finish_reason")
        usage = body.get("usage") or {}
        prompt = _count(usage.get("prompt_tokens"))
        details = usage.get("prompt_tokens_details")
        cached = details.get("cached_tokens") if isinstance(details, dict) else None
        return Completion(
            text=text if isinstance(text, str) or text is None else str(text),
            finish_reason=finish if isinstance(finish, str) else None,
            prompt_tokens=prompt,
            completion_tokens=_count(usage.get("completion_tokens")),
            latency_s=latency_s,
            attempts=attempts,
            logprobs=token_logprobs(choice) if logprobs else None,
            # A cached count above the prompt's is not one to price: capped at the prompt's.
            cached_prompt_tokens=min(_count(cached), prompt),
        )
    except (AttributeError, IndexError, KeyError, TypeError, ValueError):
        return None


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def token_logprobs(choice: dict[str, Any]) -> TokenLogprobs | None:
    """The choice's ``logprobs.content`` (plain JSON, as the endpoint sent it) in our form;
    None when there is none or an entry lacks a token or a numeric log-probability (half a
    list would misplace tokens)."""
    content = (choice.get("logprobs") or {}).get("content")
    if not content or not isinstance(content, list):
        return None
    read: TokenLogprobs = []
    for entry in content:
        token, logprob = _token_and_logprob(entry)
        if token is None or logprob is None:
            return None
        top = []
        for alternative in entry.get("top_logprobs") or []:
            alt_token, alt_logprob = _token_and_logprob(alternative)
            if alt_token is None or alt_logprob is None:
                return None
            top.append([alt_token, alt_logprob])
        read.append({"token": token, "logprob": logprob, "top": top})
    return read


def _token_and_logprob(entry: Any) -> tuple[str | None, float | None]:
    if not isinstance(entry, dict):
        return None, None
    token = entry.get("token")
    logprob = entry.get("logprob")
    if not isinstance(token, str) or isinstance(logprob, bool):
        return None, None
    if not isinstance(logprob, int | float) or math.isnan(logprob):
        return token, None
    return token, max(float(logprob), IMPOSSIBLE_LOGPROB)
