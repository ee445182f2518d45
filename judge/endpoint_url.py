"""An endpoint's ``base_url``: refusing secrets written into it, and the form runs are keyed on.

A base URL is stored with every run, shown in reports and logged in error messages, so it
must never carry a key. ``secret_problem`` finds one in any of the places people put keys:
a user name or password (``https://user:key@host``), a query parameter whose name says it
is a credential (``?api-key=``, ``?code=``, ``?sig=`` ...) or whose value looks like one, a
path segment that looks like a key (``/sk-...``, 20+ hex or base64 characters, a JWT), a
matrix parameter (``/v1;key=...``: any ``;`` in the path, written or percent-encoded), a
``name=value`` path segment naming a credential, and a ``#fragment``. Its message says what
kind of secret it found and where, never the secret or the URL.

The limit, said plainly: a key written as a bare path segment that reads like a word or a
model name (``/v1/mysecretword``) cannot be told from an ordinary path segment, so it is let
through. Only the forms above are recognised; keys belong in ``api_key_env``.

``identity_url`` is the URL with cosmetic differences removed (scheme and host case, a
default port, trailing slashes, query order), so ``http://Host:80/v1/`` and
``http://host/v1`` are one server for run identity while a real change of server is not.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit

from judge.errors import InvalidInputError

FIX = "put the key in an environment variable and name it in api_key_env"
"""What every refusal tells the user to do instead."""

# Query parameter names (lower case, '-' and '_' removed) that always carry a credential:
# keys (OpenAI-style, Azure API Management's subscription-key, Google's key), Azure
# Functions' ``code``, SAS signatures ``sig``, OAuth tokens and plain passwords.
SECRET_PARAMS = frozenset(
    [
        "key", "apikey", "xapikey", "subscriptionkey", "ocpapimsubscriptionkey", "code",
        "sig", "signature", "token", "accesstoken", "idtoken", "refreshtoken", "authtoken",
        "bearer", "jwt", "secret", "clientsecret", "password", "passwd", "pwd", "pass",
        "auth", "authorization", "credential", "credentials", "session", "sessionid",
    ]
)  # fmt: skip

# Parts of a parameter name that mark it as a credential wherever they appear
# (``x-goog-api-key``, ``my_token``, ``client_secret_v2``).
SECRET_PARTS = ("key", "token", "secret", "passw", "signature", "credential", "auth")

# Well-known key formats: OpenAI/Anthropic ``sk-``, Hugging Face ``hf_``, Groq ``gsk_``,
# GitHub ``ghp_``/``github_pat_``, GitLab ``glpat-``, xAI ``xai-``, Slack ``xox?-``,
# Google ``AIza``, and JSON Web Tokens (``eyJ...``).
_KEY_PREFIX = re.compile(
    r"^(?:(?:sk|rk|pk|hf|gsk|ghp|gho|ghu|ghs|ghr|github_pat|glpat|xai|xox[abposr]|pypi|npm)"
    r"[-_][A-Za-z0-9_\-]{16,}|AIza[A-Za-z0-9_\-]{20,}|eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-.]+)$"
)
_HEX = re.compile(r"^[0-9a-fA-F]{20,}$")
_BASE64 = re.compile(r"^[A-Za-z0-9+/=]{20,}$")
_PIECES = re.compile(r"[-_.~]")
_BASE64URL = re.compile(r"^[A-Za-z0-9_\-]{20,}$")

SWITCH_RATE = 0.4
"""Share of character-class changes (``_switch_rate``) from which a 20+ character
base64url segment counts as a key: model names measured 0.06 to 0.33 (e.g.
``InternVL2-Llama3-76B``), 95 % of random 20-character keys 0.39 or more."""

MIN_TOKEN = 20
"""Characters a random-looking run needs before it counts as a key (the issue's rule: hex or
base64 of 20 or more characters). Model names split into short words (``Meta``, ``Llama``,
``3.1``, ``8B``), so they stay far below it."""


def _switch_rate(text: str) -> float:
    """How often a character's class (digit, lower, upper) differs from the one before, per
    letter or digit: about 0.6 in a random key, under 0.35 in model names, whose words keep
    one case (``Meta-Llama-3.1-8B-Instruct``: 0.19)."""

    def kind(c: str) -> str | None:
        return "d" if c.isdigit() else "l" if c.islower() else "u" if c.isupper() else None

    alnum = sum(c.isalnum() for c in text)
    switches = sum(
        1
        for a, b in zip(text, text[1:], strict=False)
        if kind(a) and kind(b) and kind(a) != kind(b)
    )
    return switches / max(1, alnum)


def looks_like_key(text: str) -> bool:
    """Whether a path segment or query value looks like a credential.

    >>> looks_like_key("sk-proj-4fQ9xZ2LmN8pR7tV1wY3")
    True
    >>> looks_like_key("9f86d081884c7d659a2feaa0c55ad015")  # 32 hex characters
    True
    >>> [looks_like_key(s) for s in ("v1", "openai", "my-model", "Meta-Llama-3.1-8B-Instruct")]
    [False, False, False, False]
    """
    text = unquote(text)
    if _KEY_PREFIX.match(text):
        return True
    for piece in _PIECES.split(text):
        if _HEX.match(piece) and any(c.isdigit() for c in piece):
            return True
        if _BASE64.match(piece) and _mixed(piece):
            return True
    # A base64url key whose '-' and '_' cut it into short pieces: its case flips too often
    # for a name made of words.
    return bool(_BASE64URL.match(text)) and _mixed(text) and _switch_rate(text) >= SWITCH_RATE


def _mixed(text: str) -> bool:
    """Digits and letters of both cases: what random keys have and words do not."""
    return (
        any(c.isdigit() for c in text)
        and any(c.islower() for c in text)
        and any(c.isupper() for c in text)
    )


def _secret_param(name: str) -> bool:
    flat = name.lower().replace("-", "").replace("_", "")
    return flat in SECRET_PARAMS or any(part in flat for part in SECRET_PARTS)


def secret_problem(url: str) -> str | None:
    """What kind of secret ``url`` holds and where (never the secret itself), or None."""
    try:
        parts = urlsplit(url.strip())
        user, password = parts.username, parts.password
    except ValueError:
        return "it is not a valid URL"
    if user or password or "@" in parts.netloc:
        return "a user name or password before the host (user:key@host)"
    if "#" in url:
        return "a #fragment (servers never see it; keys are often pasted there)"
    # ';' separates query parameters on some servers too (``?a=1;key=...``).
    for name, value in parse_qsl(parts.query.replace(";", "&"), keep_blank_values=True):
        if _secret_param(name):
            return f"a query parameter named {name!r}, which carries a credential"
        if looks_like_key(value):
            return f"a query parameter {name!r} whose value looks like a key"
    for position, segment in enumerate(s for s in parts.path.split("/") if s):
        plain = unquote(segment)
        if ";" in plain:  # ``/v1;key=...``: no OpenAI-compatible server uses them
            return f"a matrix parameter (;name=value) in path segment {position + 1}"
        name, equals, value = plain.partition("=")
        if equals and (_secret_param(name) or looks_like_key(value)):
            return f"path segment {position + 1}, a name=value pair that carries a credential"
        if looks_like_key(segment):
            return f"path segment {position + 1}, which looks like a key or token"
    return None


def check_base_url(url: str, *, where: str = "base_url") -> str:
    """``url`` unchanged, or ValueError naming the kind of secret (and never the URL)."""
    problem = secret_problem(url)
    if problem is not None:
        raise ValueError(f"{where} must not hold a secret; it has {problem}: {FIX}")
    parts = urlsplit(url.strip())
    try:
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        raise ValueError(f"{where} has a port that is not a number from 0 to 65535") from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise ValueError(
            f"{where} must be an http:// or https:// URL with a host, "
            "such as http://127.0.0.1:8000/v1"
        )
    return url


_DEFAULT_PORTS = {"http": 80, "https": 443}


def identity_url(url: str) -> str:
    """The server a URL names, as runs are keyed on it: scheme and host lower-cased, a
    default port dropped, trailing slashes removed, query parameters sorted.

    >>> identity_url("HTTP://LocalHost:80/v1/")
    'http://localhost/v1'
    >>> identity_url("https://x.openai.azure.com/openai/deployments/Gpt4/?b=2&a=1")
    'https://x.openai.azure.com/openai/deployments/Gpt4?a=1&b=2'
    """
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:  # an IPv6 address keeps its brackets
        host = f"[{host}]"
    port = parts.port
    if port is not None and port != _DEFAULT_PORTS.get(scheme):
        host += f":{port}"
    path = re.sub(r"/{2,}", "/", parts.path).rstrip("/")
    query = urlencode(sorted(parse_qsl(parts.query, keep_blank_values=True)))
    return f"{scheme}://{host}{path}" + (f"?{query}" if query else "")


def same_server(a: str, b: str) -> bool:
    """Whether two base URLs name the same server (``identity_url`` of both agree)."""
    return identity_url(a) == identity_url(b)


def check_same_server(run: str, stored: str, endpoint: str, url: str) -> None:
    """Refuse to go on with a stored run (``run``, e.g. "judge run 4") at another server
    than the one it was made at: its rows would mix two servers' answers under one run."""
    if same_server(stored, url):
        return
    raise InvalidInputError(
        f"{run} was made at {identity_url(redacted(stored))}, but endpoint {endpoint!r} now "
        f"points to {identity_url(redacted(url))}; set its base_url back to continue that "
        "run, or start a run at the new server (it is another run)"
    )


REDACTED = "REDACTED"


def _redacted_segment(segment: str) -> str:
    """A path segment with its matrix parameters, a credential ``name=value`` or a key-like
    whole replaced (what ``secret_problem`` refuses in a path)."""
    plain = unquote(segment)
    head, semi, _ = plain.partition(";")
    if semi:
        return f"{_redacted_segment(head)};{REDACTED}" if head else REDACTED
    name, equals, value = plain.partition("=")
    if equals and (_secret_param(name) or looks_like_key(value)):
        return REDACTED
    return REDACTED if segment and looks_like_key(segment) else segment


def redacted(url: str) -> str:
    """``url`` with every secret ``secret_problem`` looks for replaced by ``REDACTED``: the
    user name and password dropped, credential parameters' values and key-like path segments
    and query values replaced, the fragment dropped (for base URLs stored before such URLs
    were refused; see migrations 0010 and 0017). A URL with no secret comes back exactly as
    written, so a reader can pass every stored URL through it before printing it.

    >>> redacted("https://u:p@h.example/v1/sk-proj-4fQ9xZ2LmN8pR7tV1wY3?api-version=1&code=x#k")
    'https://h.example/v1/REDACTED?api-version=1&code=REDACTED'
    >>> redacted("http://127.0.0.1:8834/v1;key=SECRET")
    'http://127.0.0.1:8834/v1;REDACTED'
    >>> redacted("http://127.0.0.1:8834/v1")
    'http://127.0.0.1:8834/v1'
    """
    if secret_problem(url) is None:
        return url
    try:
        parts = urlsplit(url.strip())
        host = parts.netloc.rsplit("@", 1)[-1]
    except ValueError:
        return REDACTED
    path = "/".join(_redacted_segment(s) for s in parts.path.split("/"))
    query = urlencode(
        [
            (k, REDACTED if _secret_param(k) or looks_like_key(v) else v)
            for k, v in parse_qsl(parts.query.replace(";", "&"), keep_blank_values=True)
        ]
    )
    return f"{parts.scheme}://{host}{path}" + (f"?{query}" if query else "")
