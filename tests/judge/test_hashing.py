"""Cache keys made many at a time (``KeyHasher``, ``CallKeys``) equal the one-at-a-time key.

The reference is written out here from the key's definition (the sha256 of the payload's
compact JSON with sorted keys: judge/hashing.py ``cache_key``'s docstring and body), and
also compared with ``cache_key`` and ``call_key`` themselves, so a change to either side of
the fast path breaks the test."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from judge.config import EndpointConfig
from judge.hashing import KeyHasher, cache_key
from judge.models.cache import CallKeys, call_key
from judge.models.client import ModelClient

MESSAGES = [
    [{"role": "user", "content": "How much should Lakisha Washington offer for the car?"}],
    [
        {"role": "system", "content": "Réponds en chiffres."},
        {"role": "user", "content": "Ji-woo ü 🚲"},
    ],
    [{"role": "user", "content": 'quotes " and \\ backslashes, a "sample": 0} inside'}],
]


def by_hand(base_url: str, model: str, messages: Any, params: Any, sample: int) -> str:
    payload = {"endpoint": base_url.rstrip("/"), "model": model, "messages": messages,
               "params": params, "sample": sample}  # fmt: skip
    text = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_key_hasher_equals_the_key_made_by_hand_and_cache_key() -> None:
    params = {"temperature": 1.0, "max_tokens": 200, "response_format": None}
    for messages in MESSAGES:
        hasher = KeyHasher("http://127.0.0.1:9/v1/", "stub-model", messages, params)
        for sample in (0, 1, 9, 10, 99, 12345):
            want = by_hand("http://127.0.0.1:9/v1/", "stub-model", messages, params, sample)
            assert hasher.key(sample) == want
            assert (
                cache_key("http://127.0.0.1:9/v1/", "stub-model", messages, params, sample) == want
            )


def test_call_keys_equal_call_key_as_messages_come_and_go() -> None:
    client = ModelClient("test", EndpointConfig(base_url="http://127.0.0.1:9/v1", model="m"))
    keys = CallKeys(client, temperature=0.7, max_tokens=50)
    # the same list repeated, then another, then the first again (a new hash each change)
    order = [MESSAGES[0]] * 3 + [MESSAGES[1], MESSAGES[0], MESSAGES[2], MESSAGES[2]]
    for i, messages in enumerate(order):
        want = call_key(client, messages, sample_index=i, temperature=0.7, max_tokens=50)
        assert keys(messages, i) == want
    # an equal list that is another object gives the same key too
    copy = [dict(m) for m in MESSAGES[1]]
    assert keys(copy, 3) == call_key(client, MESSAGES[1], sample_index=3, temperature=0.7,
                                     max_tokens=50)  # fmt: skip
    # and the settings are part of the key: another temperature, another key
    other = CallKeys(client, temperature=0.0, max_tokens=50)
    assert other(MESSAGES[0], 0) != keys(MESSAGES[0], 0)
