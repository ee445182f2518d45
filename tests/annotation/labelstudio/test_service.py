"""FairJudge's own Label Studio (annotation.labelstudio.service) against the real server: it
starts and accepts its admin token, refuses a busy port, keeps its data over a restart,
signs people up with passwords they can log in with and read their own tokens by, and never
shows a secret.
"""

from __future__ import annotations

import json
import socket
import stat
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import Engine

from annotation.errors import LabelStudioError
from annotation.labelstudio.annotators import add_annotator, list_annotators
from annotation.labelstudio.client import LabelStudioClient
from annotation.labelstudio.probes import served_version
from annotation.labelstudio.service import (
    ADMIN_EMAIL,
    Connection,
    LabelStudioService,
    connection,
)
from judge.config import EMBEDDED_ENDPOINT, LabelStudioConfig, Settings
from judge.store.engine import session_scope
from tests.support.factories import free_port


def api(url: str, token: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
    """A plain HTTP call to Label Studio's API (status, parsed JSON), independent of the code
    under test."""
    request = urllib.request.Request(
        url + path,
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Authorization": f"Token {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            return reply.status, json.load(reply)
    except urllib.error.HTTPError as exc:
        return exc.code, None


def admin_file(service: LabelStudioService) -> dict[str, str]:
    data: dict[str, str] = json.loads(service.admin_file.read_text())
    return data


def settings_with(state_dir: Path, labelstudio: dict[str, Any]) -> Settings:
    """Settings with the built-in embedded endpoint and the given [labelstudio] table."""
    return Settings.model_validate(
        {
            "state_dir": str(state_dir),
            "endpoints": {"embedded": EMBEDDED_ENDPOINT},
            "labelstudio": labelstudio,
        }
    )


def test_it_answers_and_accepts_the_admin_token(labelstudio: LabelStudioService) -> None:
    status = labelstudio.status()
    assert status.running and status.answers and status.token_works is True
    # The pid is the process listening on the port: read back from the pid file we wrote.
    assert status.pid == int(labelstudio.pid_file.read_text())
    # The version the server itself reports at /api/version is the one we asked pip for
    # (LabelStudioConfig's default, 1.23.2, as pinned in FACTS.md).
    assert status.version == "1.23.2"
    assert served_version(labelstudio.url) == "1.23.2"
    # Independent check of the token: the server says whose it is. The email is the one
    # written to admin.json, which is readable by its owner only.
    admin = admin_file(labelstudio)
    code, me = api(labelstudio.url, admin["token"], "/api/current-user/whoami")
    assert (code, me["email"]) == (200, ADMIN_EMAIL)
    assert stat.S_IMODE(labelstudio.admin_file.stat().st_mode) == 0o600
    assert len(admin["token"]) == 40 and int(admin["token"], 16) >= 0


def test_a_busy_port_is_refused_before_launching(
    labelstudio: LabelStudioService, tmp_path: Path
) -> None:
    # A port some other program listens on: Label Studio would silently move to the next one.
    port = free_port()
    with socket.socket() as other:
        other.bind(("127.0.0.1", port))
        other.listen()
        config = LabelStudioConfig(port=port, home=str(tmp_path / "ls"))
        service = LabelStudioService(config, tmp_path, venv=labelstudio.venv)
        with pytest.raises(LabelStudioError) as raised:
            service.start()
    message = str(raised.value)
    assert f"port {port}" in message and "[labelstudio]" in message
    assert not service.pid_file.exists()  # nothing was launched


def test_a_server_that_dies_while_starting_reports_its_log(
    labelstudio: LabelStudioService, tmp_path: Path
) -> None:
    # A database file that is not SQLite: the real server exits while starting up.
    config = LabelStudioConfig(port=free_port(), home=str(tmp_path / "ls"))
    service = LabelStudioService(config, tmp_path, venv=labelstudio.venv)
    service.data_dir.mkdir(parents=True)
    (service.data_dir / "label_studio.sqlite3").write_bytes(b"not a database" * 100)
    with pytest.raises(LabelStudioError) as raised:
        service.start(timeout=120)
    message = str(raised.value)
    assert "exited with code" in message and str(service.log_file) in message
    assert not service.pid_file.exists() and service.stop() is False


def test_data_survives_a_restart(labelstudio: LabelStudioService) -> None:
    token = admin_file(labelstudio)["token"]
    title = f"restart-{uuid.uuid4().hex[:8]}"
    code, project = api(labelstudio.url, token, "/api/projects/", {"title": title})
    assert code == 201
    assert labelstudio.stop() is True
    assert labelstudio.stop() is False  # a second stop finds nothing running
    assert not labelstudio.status().answers
    started = time.monotonic()
    labelstudio.start()
    print(f"restart answered in {time.monotonic() - started:.1f} s")
    # Read back through plain HTTP: the project we created, by id and title.
    code, again = api(labelstudio.url, token, f"/api/projects/{project['id']}/")
    assert (code, again["title"]) == (200, title)


def test_a_second_start_is_a_no_op(labelstudio: LabelStudioService) -> None:
    pid = labelstudio.status().pid
    assert labelstudio.start().pid == pid


def test_the_environment_turns_off_outbound_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Unprefixed names Label Studio also reads (FACTS.md): a shell or CI may set them.
    for name, value in {"HOST": "0.0.0.0", "PORT": "1", "CI": "true", "DEBUG": "1"}.items():
        monkeypatch.setenv(name, value)
    service = LabelStudioService(LabelStudioConfig(), tmp_path)
    env = service.environment()
    # Expected values written by hand from FACTS.md's "Label Studio" section.
    assert {k: env[k] for k in env if k.startswith("LABEL_STUDIO_") and "SENTRY" in k} == {
        "LABEL_STUDIO_SENTRY_DSN": "",
        "LABEL_STUDIO_FRONTEND_SENTRY_DSN": "",
    }
    assert env["LABEL_STUDIO_LATEST_VERSION_CHECK"] == "false"
    assert env["LABEL_STUDIO_COLLECT_ANALYTICS"] == "false"
    assert env["LABEL_STUDIO_ENABLE_LEGACY_API_TOKEN"] == "true"
    assert env["LABEL_STUDIO_BASE_DATA_DIR"] == str(tmp_path / "labelstudio" / "data")
    assert env["HOME"].startswith(str(tmp_path / "labelstudio"))
    assert not {"HOST", "PORT", "CI", "DEBUG"} & env.keys()
    admin = admin_file(service)
    assert (env["LABEL_STUDIO_USERNAME"], env["LABEL_STUDIO_USER_TOKEN"]) == (
        "admin@fairjudge.local",
        admin["token"],
    )
    # Made once: a second service on the same home reads the same login.
    again = LabelStudioService(LabelStudioConfig(), tmp_path).environment()
    assert again["LABEL_STUDIO_PASSWORD"] == env["LABEL_STUDIO_PASSWORD"] == admin["password"]


def test_secrets_stay_out_of_reprs_logs_and_status(labelstudio: LabelStudioService) -> None:
    admin = admin_file(labelstudio)
    conn = labelstudio.connection()
    assert conn.token == admin["token"]
    shown = [repr(conn), str(conn), repr(labelstudio.admin()), repr(labelstudio.status())]
    shown.append(labelstudio.log_file.read_text(errors="replace"))
    for text in shown:
        assert admin["token"] not in text and admin["password"] not in text


def test_a_person_signs_in_and_reads_their_own_token(labelstudio: LabelStudioService) -> None:
    """``sign_up`` gives a password the login form accepts, and ``login_token`` reads the
    person's own API token with it. Checked independently: the server says the token is
    this person's (``whoami`` with it), and a wrong password signs nobody in."""
    admin = admin_file(labelstudio)["token"]
    email = f"rater-{uuid.uuid4().hex[:8]}@example.org"
    user_id = labelstudio.sign_up(email, "correct-horse-7")
    assert labelstudio.can_log_in(email, "correct-horse-7")
    assert not labelstudio.can_log_in(email, "wrong-horse-7")
    token = labelstudio.login_token(email, "correct-horse-7")
    code, me = api(labelstudio.url, token, "/api/current-user/whoami")
    assert (code, me["email"], me["id"]) == (200, email, user_id)
    assert token != admin
    with pytest.raises(LabelStudioError, match="could not sign in"):
        labelstudio.login_token(email, "wrong-horse-7")
    with pytest.raises(LabelStudioError, match="could not sign in"):
        labelstudio.login_token(f"nobody-{uuid.uuid4().hex[:6]}@example.org", "correct-horse-7")


def test_an_annotator_signs_up_through_the_invite_link(
    labelstudio: LabelStudioService, engine: Engine
) -> None:
    """``add_annotator`` on FairJudge's own server: the person signs up through the invite
    link with the password it returns, in one HTTP exchange. Checked independently through
    the API with the admin's token: the account's names are what ``create_user`` gives, it is
    in the admin's organization, and the password works (and a wrong one does not)."""
    admin = admin_file(labelstudio)["token"]
    client = LabelStudioClient(labelstudio.url, admin)
    email = f"Sign.Up-{uuid.uuid4().hex[:8]}@Example.org"
    with session_scope(engine) as session:
        person = add_annotator(session, client, email, "Ada Lovelace", service=labelstudio)
    assert person.created and person.password
    code, user = api(labelstudio.url, admin, f"/api/users/{person.user_id}/")
    assert code == 200
    # Recorded as the sign-up form keeps it, in lower case (ratings pulled later carry the
    # address Label Studio holds), with the address as user name, as `create_user` names it.
    assert person.email == email.lower()
    assert (user["email"], user["username"]) == (email.lower(), email.lower())
    with session_scope(engine) as session:
        assert [a["email"] for a in list_annotators(session)] == [email.lower()]
    assert (user["first_name"], user["last_name"]) == ("Ada", "Lovelace")
    _, me = api(labelstudio.url, admin, "/api/current-user/whoami")
    _, members = api(
        labelstudio.url, admin, f"/api/organizations/{me['active_organization']}/memberships"
    )
    listed = members["results"] if isinstance(members, dict) else members
    assert person.user_id in {
        m["user"]["id"] if isinstance(m["user"], dict) else m["user"] for m in listed
    }
    assert labelstudio.can_log_in(email, person.password)
    assert not labelstudio.can_log_in(email, person.password + "x")
    # The address is taken now: the form's own reason comes back, and nothing is created.
    with pytest.raises(LabelStudioError, match="already exists"):
        labelstudio.sign_up(email.lower(), "another-horse-8")
    with pytest.raises(LabelStudioError, match="refused to sign"):
        labelstudio.sign_up(f"short-{uuid.uuid4().hex[:6]}@example.org", "x")


def test_connection_to_an_external_server_takes_the_token_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    settings = settings_with(
        tmp_path, {"url": "http://ls.example:8080/", "token_env": "FJ_TEST_LS_TOKEN"}
    )
    monkeypatch.delenv("FJ_TEST_LS_TOKEN", raising=False)
    with pytest.raises(LabelStudioError, match="FJ_TEST_LS_TOKEN"):
        connection(settings)
    monkeypatch.setenv("FJ_TEST_LS_TOKEN", "abc123secret")
    conn = connection(settings)
    assert (conn.url, conn.token, conn.managed) == ("http://ls.example:8080", "abc123secret", False)
    assert "abc123secret" not in repr(conn)


def test_connection_to_our_server_says_how_to_start_it(tmp_path: Path) -> None:
    # Nothing listens on a free port: campaigns are told the command that starts it.
    settings = settings_with(tmp_path, {"port": free_port()})
    with pytest.raises(LabelStudioError, match="fairjudge labelstudio start"):
        connection(settings)


@pytest.mark.parametrize("installer", ["uv", "pip"])
def test_a_failed_install_reports_the_log(
    tmp_path: Path, installer: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No label-studio 0.0.0 exists on any index: the installer fails, whether online or not.
    # pip is the fallback where uv's binary cannot be found.
    if installer == "pip":
        import uv

        def no_uv() -> str:
            raise FileNotFoundError("uv")

        monkeypatch.setattr(uv, "find_uv_bin", no_uv)
    service = LabelStudioService(LabelStudioConfig(version="0.0.0"), tmp_path)
    lines: list[str] = []
    with pytest.raises(LabelStudioError) as raised:
        service.install(lines.append)
    message = str(raised.value)
    assert f"({installer} exited with" in message and str(service.install_log) in message
    assert lines[0].startswith("installing Label Studio 0.0.0 into ")
    assert f"with {installer}" in lines[0]
    assert not service.installed()


def test_connection_repr_masks_the_token() -> None:
    # Built by hand: no server needed to check what a repr shows.
    assert repr(Connection("http://x", "s3cr3t")) == (
        "Connection(url='http://x', token='<hidden>', managed=True)"
    )
