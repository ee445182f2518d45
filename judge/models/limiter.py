"""One quota per endpoint: how many calls may be in flight at once (``concurrency``) and how
many may start in a minute (``requests_per_minute``), kept for every process that calls it.

Two limiters keep it, behind one protocol (``Limiter.hold``):

- ``RedisLimiter`` keeps the quota in Redis, so that every process, Celery worker and machine
  calling an endpoint draws on the same one. ``limiter_for`` builds it once per process from
  ``[workers] limiter_url`` (or the broker's URL when that is ``redis://``).
- ``LocalLimiter`` is what a process without Redis gets: ``requests_per_minute`` within the
  process; concurrency stays what it always was, the run's number of threads.

The quota belongs to a server and model, not to an endpoint's name: its key is the base URL
in its normal form (``judge.endpoint_url.identity_url``) and the model, so two names for one
server and model share it. In Redis an endpoint's quota is two sorted sets under
``<prefix>:<identity url>|<model>``:

- ``:slots`` holds one random token per call in flight, scored by the moment (ms, Redis's
  clock) its lease ends. A slot is taken by one Lua script that first drops lapsed leases,
  so a process killed with SIGKILL (which gives nothing back) loses its slots one lease later.
- ``:starts`` holds one token per call started in the last window (60 s), scored by its
  start: a sliding window, so no minute whatever its start sees more than the limit.

The same script takes the slot and the start together or neither, and reads the time from
Redis (``TIME``), so workers whose clocks disagree still agree on the quota. A lease lasts
``LEASE_TIMEOUTS`` times the endpoint's ``timeout_s``; one thread per process renews the
leases it holds every ``timeout_s``, so a long call keeps its slot and a dead process's slots
come back within ``3 x timeout_s`` (6 minutes at the default 120 s).

Redis going away mid-run never lets a call out unmetered: the call waits, retrying every
second, with a warning in the log (then every 30 s) naming Redis's URL without its password;
after ``max_outage_s`` (5 minutes) calls fail as ``QuotaUnavailable``, which the client
records as a failed call (``CallFailed``) to retry on resume. Redis unreachable when the
limiter is built is one clear error instead.
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
import uuid
from collections import deque
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit

from judge.config import EndpointConfig, Settings
from judge.endpoint_url import identity_url
from judge.errors import ConfigError, EndpointError

log = logging.getLogger(__name__)

WINDOW_S = 60.0
"""The window ``requests_per_minute`` counts over; a parameter of the limiters only so that
tests can shorten the minute."""
LEASE_TIMEOUTS = 3.0
"""A slot's lease, in multiples of the endpoint's ``timeout_s``; renewed every ``timeout_s``."""
POLL_S = (0.01, 0.05)
"""Bounds of the random wait before asking again for a slot while all are taken."""
REDIS_RETRY_S = 1.0
"""Wait between two tries while Redis cannot be reached."""
LOG_EVERY_S = 30.0
"""How often an outage of Redis is logged again while it lasts."""
MAX_OUTAGE_S = 300.0
"""How long calls wait for an unreachable Redis before they fail (``QuotaUnavailable``)."""
PREFIX = "fairjudge:quota"

# KEYS: slots, starts. ARGV: token, concurrency, lease ms, limit per window (0 = none),
# window ms. Returns 0 when the slot (and start) are taken, -1 when every slot is in use,
# or the ms until the oldest start leaves the window. A token already holding a slot (a
# reply lost to a timeout, asked again) gets it back, so asking twice never takes two.
TAKE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease = tonumber(ARGV[3])
local function keep(key, ms)
  if redis.call('PTTL', key) < ms then redis.call('PEXPIRE', key, ms) end
end
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  redis.call('ZADD', KEYS[1], now + lease, ARGV[1])
  keep(KEYS[1], lease)
  return 0
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then
  return -1
end
local limit = tonumber(ARGV[4])
if limit > 0 then
  local window = tonumber(ARGV[5])
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - window)
  if redis.call('ZCARD', KEYS[2]) >= limit then
    local oldest = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
    return math.max(1, tonumber(oldest[2]) + window - now)
  end
  redis.call('ZADD', KEYS[2], now, ARGV[1])
  keep(KEYS[2], window)
end
redis.call('ZADD', KEYS[1], now + lease, ARGV[1])
keep(KEYS[1], lease)
return 0
"""

# KEYS: slots. ARGV: lease ms, tokens... Pushes each live token's lease end to now + lease;
# returns the tokens that were gone (given back meanwhile, lapsed, or lost by Redis).
RENEW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease = tonumber(ARGV[1])
local lost = {}
for i = 2, #ARGV do
  local ends = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if ends and tonumber(ends) > now then
    redis.call('ZADD', KEYS[1], now + lease, ARGV[i])
  else
    if ends then redis.call('ZREM', KEYS[1], ARGV[i]) end
    table.insert(lost, ARGV[i])
  end
end
if redis.call('PTTL', KEYS[1]) < lease then redis.call('PEXPIRE', KEYS[1], lease) end
return lost
"""

# KEYS: slots. Live slots (leases not yet ended).
IN_USE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf')
"""


class QuotaUnavailable(EndpointError):
    """The shared quota of the endpoints cannot be reached: Redis is down at start, or has
    been for longer than the limiter waits mid-run."""


class Limiter(Protocol):
    """Keeps each endpoint's quota; ``ModelClient`` holds it around every HTTP attempt."""

    def hold(self, endpoint: EndpointConfig) -> AbstractContextManager[None]:
        """Wait until ``endpoint``'s quota lets one more call start, and hold a place in it
        for the block; the place is given back however the block ends."""
        ...


def quota_key(endpoint: EndpointConfig) -> str:
    """What an endpoint's quota is keyed on: its server (the normal form of its base URL)
    and model, so two endpoint names for one server and model share a quota.

    >>> a = EndpointConfig(base_url="http://Host:80/v1/", model="m")
    >>> quota_key(a) == quota_key(EndpointConfig(base_url="http://host/v1", model="m"))
    True
    """
    return f"{identity_url(endpoint.base_url)}|{endpoint.model}"


def lease_s(endpoint: EndpointConfig) -> float:
    """How long a slot of ``endpoint`` outlives its holder's last renewal."""
    return LEASE_TIMEOUTS * endpoint.timeout_s


def shown_url(url: str) -> str:
    """A Redis URL fit for messages: any password replaced by ``***``, no query.

    >>> shown_url("redis://:hunter2@cache.example:6379/0?ssl_cert_reqs=none")
    'redis://:***@cache.example:6379/0'
    """
    try:
        parts = urlsplit(url)
        host = parts.netloc.rsplit("@", 1)[-1]
        user = parts.username or ""
        masked = f"{user}:***@" if parts.password is not None else (f"{user}@" if user else "")
        return urlunsplit((parts.scheme, masked + host, parts.path, "", ""))
    except ValueError:
        return "(a Redis URL that cannot be read)"


class LocalLimiter:
    """``requests_per_minute`` within one process (a sliding window per endpoint); the
    process's threads alone bound concurrency, as without a limiter."""

    def __init__(self, *, window_s: float = WINDOW_S) -> None:
        self.window_s = window_s
        self._lock = threading.Lock()
        self._starts: dict[str, deque[float]] = {}

    @contextmanager
    def hold(self, endpoint: EndpointConfig) -> Iterator[None]:
        if endpoint.requests_per_minute is not None:
            self._start(quota_key(endpoint), endpoint.requests_per_minute)
        yield

    def _start(self, key: str, limit: int) -> None:
        while True:
            with self._lock:
                now = time.monotonic()
                starts = self._starts.setdefault(key, deque())
                while starts and starts[0] <= now - self.window_s:
                    starts.popleft()
                if len(starts) < limit:
                    starts.append(now)
                    return
                wait = starts[0] + self.window_s - now
            time.sleep(wait + random.uniform(0, 0.005))


@dataclass
class _Held:
    slots: str
    lease_ms: int
    due: float  # monotonic time of the next renewal


class RedisLimiter:
    """Each endpoint's quota in Redis at ``url``, shared by every process that uses it.

    Build one per process (``limiter_for``): it owns a connection pool and the thread that
    renews the leases of the slots its calls hold. ``prefix`` namespaces the keys (tests use
    their own); ``window_s`` is the length of the "minute" of ``requests_per_minute``.
    """

    def __init__(
        self,
        url: str,
        *,
        prefix: str = PREFIX,
        window_s: float = WINDOW_S,
        max_outage_s: float = MAX_OUTAGE_S,
        socket_timeout_s: float = 5.0,
    ) -> None:
        self.shown_url = shown_url(url)
        self.prefix = prefix
        self.window_s = window_s
        self.max_outage_s = max_outage_s
        # Imported here: redis takes 0.3 s to import, which no process without a shared
        # quota should pay (every command that calls a model imports this module).
        import redis
        from redis.backoff import ExponentialBackoff
        from redis.retry import Retry

        # Any error of Redis's (refused, timed out, a replica that went read-only in a
        # failover, a wrong password) is waited out the same way, never passed on as a crash.
        self._error: type[Exception] = redis.RedisError
        try:
            self._redis = redis.Redis.from_url(
                url,
                socket_connect_timeout=socket_timeout_s,
                socket_timeout=socket_timeout_s,
                # A dropped connection is tried again at once, then after 50 ms; longer
                # outages are this module's to wait out (and to log).
                retry=Retry(ExponentialBackoff(cap=0.5, base=0.05), 2),
            )
        except ValueError:
            raise ConfigError(
                f"the shared quota's URL {self.shown_url} is not a Redis URL; [workers] "
                "limiter_url takes redis://HOST:6379/0 (or rediss://, unix://)"
            ) from None
        self._take = self._redis.register_script(TAKE)
        self._renew = self._redis.register_script(RENEW)
        self._count = self._redis.register_script(IN_USE)
        self._lock = threading.Lock()
        self._held: dict[str, _Held] = {}
        self._wake = threading.Event()
        self._renewer_pid = 0
        self._renewer_due = 0.0  # when the renewer wakes next (monotonic), unless woken
        self._down_since: float | None = None
        self._logged_at = 0.0

    def check(self) -> None:
        """Raise ``QuotaUnavailable`` (one line, naming Redis and its URL without the
        password) when Redis does not answer."""
        try:
            self._redis.ping()
        except self._error as exc:
            raise QuotaUnavailable(
                f"cannot reach Redis at {self.shown_url}, which keeps the endpoints' shared "
                f"quota ([workers] limiter_url, else a redis:// broker_url): {_why(exc)}; "
                "start Redis there or fix the URL"
            ) from None

    def keys(self, endpoint: EndpointConfig) -> tuple[str, str]:
        """The Redis keys of ``endpoint``'s slots and starts."""
        base = f"{self.prefix}:{quota_key(endpoint)}"
        return f"{base}:slots", f"{base}:starts"

    def in_use(self, endpoint: EndpointConfig) -> int:
        """Slots of ``endpoint``'s quota held now, by every process."""
        return int(self._count(keys=[self.keys(endpoint)[0]]))

    @contextmanager
    def hold(self, endpoint: EndpointConfig) -> Iterator[None]:
        slots, starts = self.keys(endpoint)
        token = uuid.uuid4().hex
        lease_ms = max(1, round(lease_s(endpoint) * 1000))
        args = [
            token,
            endpoint.concurrency,
            lease_ms,
            endpoint.requests_per_minute or 0,
            max(1, round(self.window_s * 1000)),
        ]
        self._take_slot([slots, starts], args, endpoint)
        self._track(token, _Held(slots, lease_ms, time.monotonic() + lease_ms / 3000))
        try:
            yield
        finally:
            self._give_back(slots, token, lease_ms)

    def _take_slot(self, keys: list[str], args: list[Any], endpoint: EndpointConfig) -> None:
        while True:
            try:
                wait_ms = int(self._take(keys=keys, args=args))
            except self._error as exc:
                self._unreachable(exc, endpoint)
                time.sleep(REDIS_RETRY_S * random.uniform(0.75, 1.25))
                continue
            self._reachable()
            if wait_ms == 0:
                return
            if wait_ms < 0:  # every slot in use: ask again soon
                time.sleep(random.uniform(*POLL_S))
            else:  # the window is full: ask again once its oldest start has left it
                time.sleep(wait_ms / 1000 + random.uniform(0, POLL_S[0]))

    def _give_back(self, slots: str, token: str, lease_ms: int) -> None:
        with self._lock:
            self._held.pop(token, None)
        try:
            self._redis.zrem(slots, token)
        except self._error as exc:
            log.warning(
                "could not give a slot back to Redis at %s (%s); it lapses on its own within "
                "its lease of %.0f s",
                self.shown_url,
                _why(exc),
                lease_ms / 1000,
            )

    def _unreachable(self, exc: BaseException, endpoint: EndpointConfig) -> None:
        """Log an outage (at once, then every LOG_EVERY_S); past max_outage_s, fail the
        call."""
        now = time.monotonic()
        with self._lock:
            if self._down_since is None:
                self._down_since = now
            down_for = now - self._down_since
            due = now - self._logged_at >= LOG_EVERY_S or self._logged_at < self._down_since
            if due:
                self._logged_at = now
        if down_for > self.max_outage_s:
            raise QuotaUnavailable(
                f"Redis at {self.shown_url}, which keeps the shared quota of {endpoint.model} "
                f"at {identity_url(endpoint.base_url)}, has been unreachable for "
                f"{down_for:.0f} s ({_why(exc)}); the call was not sent"
            )
        if due:
            log.warning(
                "Redis at %s, which keeps the shared quota of %s at %s, is unreachable (%s); "
                "calls wait for it and try again every %.0f s (for up to %.0f s)",
                self.shown_url,
                endpoint.model,
                identity_url(endpoint.base_url),
                _why(exc),
                REDIS_RETRY_S,
                self.max_outage_s,
            )

    def _reachable(self) -> None:
        if self._down_since is None:  # the usual case: no lock taken
            return
        with self._lock:
            since, self._down_since = self._down_since, None
        if since is not None:
            log.warning(
                "Redis at %s answers again after %.0f s; waiting calls go on",
                self.shown_url,
                time.monotonic() - since,
            )

    # Renewing the leases of the slots held by this process's calls.

    def _track(self, token: str, held: _Held) -> None:
        with self._lock:
            if self._renewer_pid != os.getpid():  # first slot, or first in a forked child
                self._held.clear()  # a parent's slots are the parent's to renew
                self._renewer_pid = os.getpid()
                threading.Thread(target=self._renew_loop, name="quota-renewer", daemon=True).start()
            self._held[token] = held
            # Woken only when this slot is due before the renewer would wake anyway: waking
            # it for every call cost a thread switch and a scan of the held slots a call.
            wake = held.due < self._renewer_due
        if wake:
            self._wake.set()

    def _renew_loop(self) -> None:
        while True:
            with self._lock:
                # Cleared under the lock, before the slots are read: a slot tracked after
                # this sets it again, so the wait below cannot miss it.
                self._wake.clear()
                now = time.monotonic()
                due = [(t, h) for t, h in self._held.items() if h.due <= now]
                for _, held in due:
                    held.due = now + held.lease_ms / 3000
                upcoming = min((h.due for h in self._held.values()), default=now + 1.0)
                self._renewer_due = upcoming
            by_key: dict[tuple[str, int], list[str]] = {}
            for token, held in due:
                by_key.setdefault((held.slots, held.lease_ms), []).append(token)
            for (slots, lease_ms), tokens in by_key.items():
                self._renew_some(slots, lease_ms, tokens)
            self._wake.wait(max(0.0, upcoming - time.monotonic()))

    def _renew_some(self, slots: str, lease_ms: int, tokens: list[str]) -> None:
        try:
            gone = self._renew(keys=[slots], args=[lease_ms, *tokens])
        except self._error as exc:
            log.warning(
                "could not renew %d slot lease(s) at Redis at %s (%s); a call still running "
                "past its lease of %.0f s may let the endpoint's quota be exceeded",
                len(tokens),
                self.shown_url,
                _why(exc),
                lease_ms / 1000,
            )
            return
        with self._lock:  # a slot given back while it was being renewed was not lost
            lost = sum(_text(t) in self._held for t in gone)
        if lost:
            log.warning(
                "%d call(s) in flight lost their slot in %s at Redis at %s (the lease of "
                "%.0f s ran out, or Redis lost its data); the quota may be exceeded until "
                "they end",
                lost,
                slots,
                self.shown_url,
                lease_ms / 1000,
            )


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _why(exc: BaseException) -> str:
    """An error's message on one line."""
    return " ".join(str(exc).split()) or type(exc).__name__


_LOCAL = LocalLimiter()
_SHARED: dict[str, RedisLimiter] = {}
_SHARED_LOCK = threading.Lock()


def local_limiter() -> LocalLimiter:
    """The process's own limiter, shared by every client without a shared quota."""
    return _LOCAL


def limiter_for(settings: Settings) -> Limiter:
    """The process's limiter for ``settings``: the shared one in Redis when the settings name
    one (built and checked once per process and URL), else the process's own.

    Raises ``QuotaUnavailable`` when that Redis does not answer."""
    url = settings.workers.quota_url()
    if not url:
        return _LOCAL
    with _SHARED_LOCK:
        found = _SHARED.get(url)
        if found is None:
            found = RedisLimiter(url)
            found.check()
            _SHARED[url] = found
    return found
