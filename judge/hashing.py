"""Content hashes: prompts, messages, items and model calls are identified by what they hold."""

from __future__ import annotations

import hashlib
import json
from typing import Any

Messages = list[dict[str, str]]


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def messages_hash(messages: Messages) -> str:
    """A stable hash of a chat message list."""
    return sha256(json.dumps(messages, sort_keys=True, ensure_ascii=False))


def content_hash(body: Any) -> str:
    """A stable hash of any JSON-serialisable value (keys sorted)."""
    return sha256(json.dumps(body, sort_keys=True, ensure_ascii=False))


def cache_key(model: str, messages: Messages, params: dict[str, Any], sample_index: int) -> str:
    """Content hash of one call; identical inputs give identical keys on any machine.

    >>> cache_key("m", [{"role": "user", "content": "hi"}], {"temperature": 0}, 0)[:12]
    '1e4ae2ba6d4b'
    """
    payload = {"model": model, "messages": messages, "params": params, "sample": sample_index}
    return sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":")))
