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


def cache_key(
    base_url: str, model: str, messages: Messages, params: dict[str, Any], sample_index: int
) -> str:
    """Content hash of one call; identical inputs give identical keys on any machine.

    The endpoint's base URL is part of the key: two servers that both call their model
    "gpt-4o-mini" must not share answers.
    """
    payload = {
        "endpoint": base_url.rstrip("/"),
        "model": model,
        "messages": messages,
        "params": params,
        "sample": sample_index,
    }
    return sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":")))
