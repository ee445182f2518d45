"""Plain probes of a Label Studio server and of its process, with no SDK: does it answer, which
version it serves, does a token or a login work, sign-up, and whether a port is taken or a
process alive."""

from __future__ import annotations

import html
import http.cookiejar
import json
import os
import re
import socket
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from annotation.errors import LabelStudioError

PROBE_TIMEOUT_S = 2.0


def http_get(
    url: str, *, token: str | None = None, timeout: float = PROBE_TIMEOUT_S
) -> tuple[int, bytes] | None:
    """(status, body) of a GET, or None when nothing answers at ``url``."""
    headers = {"Authorization": f"Token {token}"} if token else {}
    try:
        with urllib.request.urlopen(
            urllib.request.Request(url, headers=headers), timeout=timeout
        ) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, b""
    except (urllib.error.URLError, OSError, ValueError):
        return None


def answers(url: str, *, timeout: float = PROBE_TIMEOUT_S) -> bool:
    """Whether a Label Studio answers at ``url``: ``/health`` (or, on servers without it, the
    login page) replies 200."""
    base = url.rstrip("/")
    for path in ("/health", "/user/login/"):
        reply = http_get(base + path, timeout=timeout)
        if reply is None:
            return False
        if reply[0] == 200:
            return True
    return False


def token_works(url: str, token: str, *, timeout: float = PROBE_TIMEOUT_S) -> bool:
    """Whether the server accepts ``token``: ``GET /api/current-user/whoami`` replies 200."""
    reply = http_get(url.rstrip("/") + "/api/current-user/whoami", token=token, timeout=timeout)
    return reply is not None and reply[0] == 200


def served_version(url: str, *, timeout: float = PROBE_TIMEOUT_S) -> str | None:
    """The release a server reports at ``/api/version`` (e.g. '1.23.2'), or None."""
    reply = http_get(url.rstrip("/") + "/api/version", timeout=timeout)
    if reply is None or reply[0] != 200:
        return None
    try:
        release = json.loads(reply[1]).get("release")
    except (ValueError, AttributeError):
        return None
    return str(release) if release else None


def signed_in(
    url: str, email: str, password: str, *, timeout: float
) -> urllib.request.OpenerDirector | None:
    """A cookie-keeping opener signed in as ``email`` through the login form a person uses, or
    None when the server refuses the password: fetch the form (it sets the CSRF cookie and
    field), post it, then ask ``whoami`` with the session cookie. A wrong password re-shows
    the form and leaves the session anonymous."""
    base = url.rstrip("/")
    opener = urllib.request.build_opener(
        urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
    )
    try:
        with opener.open(base + "/user/login/", timeout=timeout) as reply:
            page = reply.read().decode("utf-8", errors="replace")
        found = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
        if found is None:
            return None
        form = urllib.parse.urlencode(
            {"csrfmiddlewaretoken": found[1], "email": email, "password": password}
        ).encode()
        login = urllib.request.Request(
            base + "/user/login/", data=form, headers={"Referer": base + "/user/login/"}
        )
        with opener.open(login, timeout=timeout):
            pass
        with opener.open(base + "/api/current-user/whoami", timeout=timeout) as reply:
            signed = str(json.load(reply).get("email", "")).lower() == email.lower()
    except (urllib.error.URLError, OSError, ValueError):
        return None
    return opener if signed else None


def can_log_in(url: str, email: str, password: str, *, timeout: float = PROBE_TIMEOUT_S) -> bool:
    """Whether a person can sign in with ``email`` and ``password`` through the login form."""
    return signed_in(url, email, password, timeout=timeout) is not None


def login_token(
    url: str, email: str, password: str, *, timeout: float = PROBE_TIMEOUT_S
) -> str | None:
    """The API token of ``email``, read as the person reads it (signed in with the login form,
    then their account's token), or None when the password is refused. Over HTTP only: no
    ``label-studio`` command, which costs a Django start (about 7 s of CPU here)."""
    opener = signed_in(url, email, password, timeout=timeout)
    if opener is None:
        return None
    try:
        with opener.open(url.rstrip("/") + "/api/current-user/token", timeout=timeout) as reply:
            token = json.load(reply).get("token")
    except (urllib.error.URLError, OSError, ValueError):
        return None
    return str(token) if token else None


def sign_up(
    url: str, invite: str, email: str, password: str, *, timeout: float = PROBE_TIMEOUT_S
) -> int:
    """Create the user ``email`` with ``password`` through the sign-up form of the
    organization's invite link (``invite`` is the link's token), as a person who was sent the
    link does, and return the new user's id. Over HTTP only: an account created through the
    API has no password, and setting one takes ``label-studio reset_password``, a Django start
    (about 7 s of CPU here). LabelStudioError with the form's own complaint when it is
    refused (an address already taken, a password too weak)."""
    base = url.rstrip("/")
    page_url = f"{base}/user/signup/?{urllib.parse.urlencode({'token': invite})}"
    opener = urllib.request.build_opener(
        urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
    )
    me: dict[str, object] = {}
    try:
        with opener.open(page_url, timeout=timeout) as reply:
            page = reply.read().decode("utf-8", errors="replace")
        found = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
        if found is None:
            raise LabelStudioError(f"{base}/user/signup/ shows no sign-up form")
        form = urllib.parse.urlencode(
            {"csrfmiddlewaretoken": found[1], "email": email, "password": password}
        ).encode()
        request = urllib.request.Request(page_url, data=form, headers={"Referer": page_url})
        with opener.open(request, timeout=timeout) as reply:
            page = reply.read().decode("utf-8", errors="replace")
        try:  # signed in by the sign-up when it worked; anonymous (401) when refused
            with opener.open(base + "/api/current-user/whoami", timeout=timeout) as reply:
                me = json.load(reply)
        except urllib.error.HTTPError as exc:
            if exc.code not in (401, 403):
                raise
    except urllib.error.HTTPError as exc:
        raise LabelStudioError(f"signing {email} up at {base} failed: HTTP {exc.code}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise LabelStudioError(f"signing {email} up at {base} failed: {exc}") from None
    user_id = me.get("id")
    if str(me.get("email", "")).lower() != email.lower() or not isinstance(user_id, int):
        said = [
            html.unescape(item).strip()
            for block in re.findall(r'<ul class="field_errors">(.*?)</ul>', page, re.S)
            for item in re.findall(r"<li>(.*?)</li>", block, re.S)
        ]
        raise LabelStudioError(
            f"Label Studio refused to sign {email} up: "
            + ("; ".join(s for s in said if s) or "its form came back without a reason")
        )
    return user_id


def port_busy(host: str, port: int) -> bool:
    """Whether something holds ``port``: binding it fails, or a connection to it on
    127.0.0.1 succeeds (Label Studio's own check, which makes it move to the next port)."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        # SO_REUSEADDR, as the server sets it: a just-stopped server's TIME_WAIT
        # connections do not make the port busy, a listening socket does.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return True
    with socket.socket() as s:
        s.settimeout(1.0)
        return s.connect_ex(("127.0.0.1", port)) == 0


def log_tail(path: Path, lines: int = 4) -> str:
    """The last non-empty lines of a log, joined into one line (for an error message)."""
    try:
        with open(path, "rb") as handle:
            handle.seek(max(0, handle.seek(0, os.SEEK_END) - 16_384))
            text = handle.read().decode("utf-8", errors="replace")
    except OSError:
        return "(no log)"
    kept = [line.strip()[:300] for line in text.splitlines() if line.strip()][-lines:]
    return " | ".join(kept) or "(empty log)"


def send_signal(pid: int, signum: int) -> None:
    """Signal the server's process group (it was started in its own session), or the
    process alone when it leads no group."""
    try:
        os.killpg(pid, signum)
    except (ProcessLookupError, PermissionError):
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, exited but not yet reaped, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except (OSError, IndexError):
        return True
