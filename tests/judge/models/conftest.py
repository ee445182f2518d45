"""The machine's Redis for the quota tests, each test under a key prefix of its own."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
import redis

REDIS_URL = "redis://127.0.0.1:6379/0"


@pytest.fixture
def quota_prefix() -> Iterator[str]:
    """A key prefix no other test uses on the Redis at ``REDIS_URL``; its keys are deleted
    afterwards.

    Without a reachable Redis the test is skipped on a developer's machine but fails in CI
    (``CI=true``), where Redis is always started, as with PostgreSQL (tests/conftest.py).
    """
    client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2)
    try:
        client.ping()
    except redis.RedisError as exc:
        client.close()
        why = f"Redis is not reachable on 127.0.0.1:6379 ({exc})"
        if os.environ.get("CI", "").lower() in ("true", "1"):
            pytest.fail(f"{why}; CI must run the Redis tests")
        pytest.skip(why)
    prefix = f"fairjudge-test:{uuid.uuid4().hex[:12]}"
    try:
        yield prefix
    finally:
        for key in client.scan_iter(match=f"{prefix}:*"):
            client.delete(key)
        client.close()
