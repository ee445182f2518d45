"""A base_url never holds a secret, in any of the forms people write one, and runs are keyed on
its normal form. Every URL and key below is made up by hand for the test."""

from __future__ import annotations

import hashlib
import importlib.util
import json
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from judge.config import EndpointConfig, load_settings
from judge.endpoint_url import identity_url, looks_like_key, redacted
from judge.errors import ConfigError

# The secret part of every refused URL holds this marker, so a test can check that no error
# message quotes it.
KEY = "sk-proj-4fQ9xZ2LmN8pR7tV1wY3aB5c"
HEX = "9f86d081884c7d659a2feaa0c55ad015"  # 32 hex digits (sha256 of "test", cut)
B64 = "QWxhZGRpbjpvcGVuIHNlc2FtZQ=="  # base64 of "Aladdin:open sesame"

# (URL, the secret in it): one per form the issue lists, and some more.
SECRET_URLS = [
    (f"https://user:{KEY}@api.example/v1", KEY),  # userinfo: user and password
    (f"https://{KEY}@api.example/v1", KEY),  # userinfo: a user name alone
    (f"https://api.example/v1?api_key={KEY}", KEY),
    (f"https://api.example/v1?x=1&Api-Key={KEY}", KEY),  # case and '-' do not matter
    (f"https://api.example/v1?x-api-key={KEY}", KEY),
    ("https://apim.example/openai?subscription-key=abc123", "abc123"),  # Azure APIM
    ("https://fn.example/api/v1?code=Zm9vYmFy", "Zm9vYmFy"),  # Azure Functions key
    ("https://blob.example/v1?sv=2024&sig=a1b2c3", "a1b2c3"),  # SAS signature
    ("https://api.example/v1?ACCESS_TOKEN=t0k3n", "t0k3n"),
    ("https://api.example/v1?token=t0k3n", "t0k3n"),
    ("https://api.example/v1?secret=hunter2", "hunter2"),
    ("https://api.example/v1?password=hunter2", "hunter2"),
    ("https://api.example/v1?auth=hunter2", "hunter2"),
    ("https://api.example/v1?Signature=hunter2", "hunter2"),
    ("https://api.example/v1?apikey=hunter2", "hunter2"),
    ("https://api.example/v1?key=hunter2", "hunter2"),
    ("https://api.example/v1?x-goog-api-key=hunter2", "hunter2"),  # 'key' inside the name
    (f"https://api.example/v1?q={KEY}", KEY),  # an innocent name, a key for a value
    (f"https://api.example/{KEY}/v1", KEY),  # a path segment: an sk- key
    (f"https://api.example/v1/{HEX}", HEX),  # a path segment: hex of 20+
    (f"https://api.example/v1/{B64}", B64),  # a path segment: base64 of 20+
    ("https://api.example/hf_AbCdEfGhIjKlMnOpQrStUv/v1", "hf_AbCdEfGhIjKlMnOpQrStUv"),
    ("https://api.example/eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2ln/v1", "eyJhbGci"),  # JWT
    ("https://api.example/v1/x7Kp2Qm9Zr4Tw8Ly3Nv6", "x7Kp2Qm9Zr4Tw8Ly3Nv6"),  # base62, 20
    (f"https://api.example/v1#{KEY}", KEY),  # a fragment
    ("https://api.example/v1#key", "#key"),
    # Matrix parameters (issue 41: this first one was stored and printed in reports).
    ("http://127.0.0.1:8834/v1;key=s3cr3tVALUE", "s3cr3tVALUE"),
    ("http://127.0.0.1:8834/v1;jsessionid=s3cr3tVALUE", "s3cr3tVALUE"),
    ("https://api.example/v1;x=1;token=s3cr3tVALUE/chat", "s3cr3tVALUE"),
    ("https://api.example/v1%3Bkey=s3cr3tVALUE", "s3cr3tVALUE"),  # ';' percent-encoded
    ("https://api.example/key=s3cr3tVALUE/v1", "s3cr3tVALUE"),  # a name=value segment
    ("https://api.example/v1?api-version=1;key=s3cr3tVALUE", "s3cr3tVALUE"),  # ';' in a query
]

ORDINARY_URLS = [
    "http://127.0.0.1:8765/v1",
    "http://localhost:11434/v1",  # Ollama
    "http://localhost:1234/v1/",  # LM Studio, trailing slash
    "https://api.openai.com/v1",
    "https://openrouter.ai/api/v1",
    "https://api.together.xyz/v1",
    "https://my-resource.openai.azure.com/openai/deployments/my-model",
    "https://my-resource.openai.azure.com/openai/deployments/gpt-4o-mini-2024-07-18"
    "?api-version=2024-02-15-preview",
    "https://api-inference.huggingface.co/models/meta-llama/Meta-Llama-3.1-8B-Instruct/v1",
    "https://api.fireworks.ai/inference/v1",
    "https://gpu.example/vllm/DeepSeek-R1-Distill-Qwen-32B/v1",
    "https://gpu.example/v1/a1b2c3d4-e5f6-7a8b-9c0d-e1f2a3b4c5d6",  # a UUID: short hex pieces
    "http://[::1]:8000/v1",
]


def _config(tmp_path: Path, base_url: str) -> Path:
    path = tmp_path / "fairjudge.toml"
    path.write_text(f'[endpoints.embedded]\nbase_url = "{base_url}"\nmodel = "m"\n')
    return path


@pytest.mark.parametrize(("url", "secret"), SECRET_URLS)
def test_every_form_of_secret_is_refused_without_echoing_it(
    tmp_path: Path, url: str, secret: str
) -> None:
    with pytest.raises(ConfigError, match="api_key_env") as caught:
        load_settings(_config(tmp_path, url))
    message = str(caught.value)
    assert secret not in message and url not in message
    assert message.count("\n") == 1  # "<file> has invalid settings:" and the one reason


@pytest.mark.parametrize(("url", "secret"), SECRET_URLS)
def test_pydantic_itself_never_quotes_the_refused_url(url: str, secret: str) -> None:
    # Code that validates an EndpointConfig directly (an API, a job) gets the same refusal,
    # and the ValidationError's own text (which pydantic normally ends with the input) holds
    # no secret either.
    with pytest.raises(ValueError, match="api_key_env") as caught:
        EndpointConfig(base_url=url, model="m")
    assert secret not in str(caught.value)


@pytest.mark.parametrize("url", ORDINARY_URLS)
def test_ordinary_urls_are_accepted_as_written(tmp_path: Path, url: str) -> None:
    assert load_settings(_config(tmp_path, url)).endpoint("embedded").base_url == url


def test_the_documented_limit_a_word_like_segment_is_a_path(tmp_path: Path) -> None:
    # docs/configuration.md and judge/endpoint_url.py say it plainly: a key that reads like a
    # word cannot be told from a path segment, so it is accepted; a name=value segment that
    # names no credential is accepted too (only credential names and key-like values count).
    for url in ("https://api.example/v1/mysecretword", "https://gpu.example/serve/model=llama/v1"):
        assert load_settings(_config(tmp_path, url)).endpoint("embedded").base_url == url


def test_a_url_that_is_no_http_url_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="http:// or https://"):
        load_settings(_config(tmp_path, "127.0.0.1:8765/v1"))
    with pytest.raises(ConfigError, match="port"):
        load_settings(_config(tmp_path, "http://127.0.0.1:99999999/v1"))


def test_model_names_in_paths_are_not_taken_for_keys() -> None:
    # Names from the model hubs as people write them in deployment paths.
    names = [
        "v1", "openai", "deployments", "my-model", "Meta-Llama-3.1-8B-Instruct",
        "Qwen2.5-72B-Instruct-AWQ", "Mixtral-8x7B-Instruct-v0.1", "smollm2-135m-instruct",
        "DeepSeek-R1-Distill-Llama-70B-Instruct-AWQ", "NVIDIA-Llama-3.1-Nemotron-70B-Instruct-HF",
        "InternVL2-Llama3-76B", "claude-3-5-sonnet-20241022", "text-embedding-3-large",
    ]  # fmt: skip
    assert [n for n in names if looks_like_key(n)] == []


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("http://127.0.0.1:8765/v1", "http://127.0.0.1:8765/v1/"),
        ("HTTP://LocalHost:8765/v1", "http://localhost:8765/v1"),
        ("https://api.example:443/v1", "https://api.example/v1"),
        ("http://api.example:80/v1", "http://api.example/v1"),
        ("https://x.example/openai?b=2&a=1", "https://x.example/openai/?a=1&b=2"),
    ],
)
def test_cosmetic_differences_are_one_server(a: str, b: str) -> None:
    assert identity_url(a) == identity_url(b)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("http://127.0.0.1:8765/v1", "http://127.0.0.1:8766/v1"),  # another port
        ("http://127.0.0.1:8765/v1", "http://localhost:8765/v1"),  # another host name
        ("https://api.example/v1", "http://api.example/v1"),  # another scheme
        ("https://x.example/openai/deployments/A", "https://x.example/openai/deployments/a"),
        ("https://x.example/v1", "https://x.example/v2"),
    ],
)
def test_real_differences_are_two_servers(a: str, b: str) -> None:
    assert identity_url(a) != identity_url(b)


def test_redacted_keeps_the_server_and_drops_every_secret() -> None:
    for url, secret in SECRET_URLS:
        clean = redacted(url)
        assert secret not in clean
        assert urlsplit(clean).hostname == urlsplit(url).hostname  # the server stays named
    # by hand: the user, the key segment, the code's value and the fragment go
    url = f"https://u:p@h.example/v1/{KEY}?api-version=1&code=x#frag"
    assert redacted(url) == "https://h.example/v1/REDACTED?api-version=1&code=REDACTED"
    # by hand: the matrix parameter goes, the segment before it stays
    assert redacted("http://127.0.0.1:8834/v1;key=x") == "http://127.0.0.1:8834/v1;REDACTED"


def _migration() -> object:
    path = Path(__file__).parents[2] / "judge/store/migrations/versions/0010_run_server_identity.py"
    spec = importlib.util.spec_from_file_location("m0010", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("url", [*ORDINARY_URLS, "HTTP://Host:80//v1//"])
def test_migration_0010_keys_runs_as_the_code_does(url: str) -> None:
    from judge.grading.identity import server_hash

    migration = _migration()
    assert migration.identity_url(url) == identity_url(url)  # type: ignore[attr-defined]
    assert migration.server_hash("0123456789abcdef", url) == server_hash(  # type: ignore[attr-defined]
        "0123456789abcdef", url
    )
    # and both are the formula docs/judging.md states, computed here by hand
    body = json.dumps({"server": identity_url(url), "settings": "0123456789abcdef"}, sort_keys=True)
    assert server_hash("0123456789abcdef", url) == hashlib.sha256(body.encode()).hexdigest()[:16]
