"""FairJudge's own Label Studio server, and the connection campaigns use to reach a server.

Label Studio pins libraries the project cannot share (``openai<2``), so it lives in its own
virtual environment and runs as a detached child process. Its venv, data, log, pid file and
admin login sit in one folder (``[labelstudio] home``, by default ``<state_dir>/labelstudio``):

    venv/          the server's virtual environment (installed once, ``install``, by uv, or
                   pip where uv is missing; their output goes to venv-install.log beside it)
    data/          its SQLite database and uploads (LABEL_STUDIO_BASE_DATA_DIR)
    user-home/     $HOME for the server, which writes a settings folder there
    admin.json     the admin's email, password and API token (mode 0600, made once)
    labelstudio.log, labelstudio.pid

Everything here talks to the server over plain HTTP (``urllib``) or through its own
``label-studio`` command; only ``annotation.labelstudio.client`` imports label-studio-sdk.
Secrets (the admin password, API tokens) never reach a log line, an error message or a repr.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from annotation.errors import LabelStudioError
from annotation.labelstudio.probes import (
    alive,
    answers,
    can_log_in,
    http_get,
    log_tail,
    login_token,
    port_busy,
    send_signal,
    served_version,
    sign_up,
    token_works,
)
from judge.config import LabelStudioConfig

if TYPE_CHECKING:
    from judge.config import Settings

Say = Callable[[str], None]
"""Receives one line for people about a long step (installing, starting)."""

ADMIN_EMAIL = "admin@fairjudge.local"
PROGRESS_EVERY_S = 10.0
"""Seconds between two progress lines while the installer runs or the server starts."""
START_TIMEOUT_S = 300.0
"""A first start migrates the database: 25-40 s on an idle 2-core machine, 80 s on a busy one."""
STOP_TIMEOUT_S = 15.0

# Label Studio reads every setting under its LABEL_STUDIO_ prefix and also without it. These
# unprefixed names are common in shells and CI and would change the server if inherited: its
# address (HOST, PORT), test and debug behaviour (CI, DEBUG), its database (DJANGO_DB,
# DATABASE_NAME) and the key that signs its sessions (SECRET_KEY, else kept in data/.env).
AMBIENT_NAMES = ("HOST", "PORT", "CI", "DEBUG", "DJANGO_DB", "DATABASE_NAME", "SECRET_KEY")


def _quiet(line: str) -> None:
    """A ``Say`` that says nothing."""


@dataclass(frozen=True, repr=False)
class Connection:
    """Where campaigns reach Label Studio and the API token they send
    (``Authorization: Token <token>``). The token is left out of ``repr`` and ``str``, so a
    logged or printed connection never shows it."""

    url: str
    token: str
    managed: bool = True

    def __repr__(self) -> str:
        return f"Connection(url={self.url!r}, token='<hidden>', managed={self.managed})"


@dataclass(frozen=True, repr=False)
class AdminLogin:
    """The admin user FairJudge creates on its own server's first start (``admin.json``)."""

    email: str
    password: str
    token: str

    def __repr__(self) -> str:
        return f"AdminLogin(email={self.email!r}, password='<hidden>', token='<hidden>')"


@dataclass(frozen=True)
class ServiceStatus:
    """Where a Label Studio runs and whether FairJudge can use it.

    ``running``: FairJudge's own process is alive (for an external server: it answers);
    ``answers``: ``/health`` answers 200; ``token_works``: the API token is accepted (None
    when nothing answers, or no token is set); ``version``: the installed or served release.
    """

    managed: bool
    running: bool
    answers: bool
    url: str
    pid: int | None
    version: str | None
    token_works: bool | None
    installed: bool
    venv: str | None
    data_dir: str | None
    log: str | None


# --- the server FairJudge runs ----------------------------------------------------------


class LabelStudioService:
    """Install, start, stop and inspect FairJudge's own Label Studio, and run its
    server-side user commands.

    ``venv`` (or ``config.venv``) overrides where the server's virtual environment lives
    (default ``home/venv``): the tests share one across test sessions while each keeps its data
    in a fresh folder. Relative folders are taken from the working directory (``load_settings``
    has already made a config file's own relative paths absolute against its folder).
    """

    def __init__(
        self,
        config: LabelStudioConfig,
        state_dir: str | Path,
        *,
        venv: str | Path | None = None,
    ) -> None:
        self.config = config
        # Absolute from here on: the server runs with its home as working directory, where
        # a relative executable would not be found and a relative data folder would be
        # read as home/home/data.
        home = Path(config.home) if config.home else Path(state_dir) / "labelstudio"
        self.home = home.expanduser().absolute()
        chosen = venv or config.venv
        self.venv = Path(chosen).expanduser().absolute() if chosen else self.home / "venv"
        self.data_dir = self.home / "data"
        self.user_home = self.home / "user-home"
        self.admin_file = self.home / "admin.json"
        self.log_file = self.home / "labelstudio.log"
        self.pid_file = self.home / "labelstudio.pid"
        self.install_log = self.venv.parent / f"{self.venv.name}-install.log"
        self._stamp = self.venv / ".fairjudge-installed"
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """Where the server answers (a wildcard bind address is reached on loopback)."""
        host = {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "::1"}.get(
            self.config.host, self.config.host
        )
        return f"http://{f'[{host}]' if ':' in host else host}:{self.config.port}"

    @property
    def executable(self) -> Path:
        return self.venv / "bin" / "label-studio"

    # --- install ---------------------------------------------------------------------

    def installed(self) -> bool:
        """Whether the configured release finished installing into the venv."""
        try:
            stamped = self._stamp.read_text().strip()
        except OSError:
            return False
        return stamped == self.config.version and self.executable.exists()

    def installed_version(self) -> str | None:
        """The label-studio release in the venv, from its package metadata."""
        for info in self.venv.glob("lib/python*/site-packages/label_studio-*.dist-info"):
            for line in (info / "METADATA").read_text(errors="replace").splitlines():
                if line.startswith("Version:"):
                    return line.split(":", 1)[1].strip()
        return None

    def install(self, progress: Say | None = None) -> bool:
        """Create the venv and install ``label-studio==<version>`` into it (uv, or pip), once: a
        stamp file records the finished release, so later calls return False at once. The output
        goes to ``install_log``; while it runs a line reaches ``progress`` every
        ``PROGRESS_EVERY_S``. Two processes installing at once wait for each other."""
        if self.installed():
            return False
        say = progress or _quiet
        with self._install_lock(say):
            if self.installed():  # the process we waited for installed it
                return False
            version = self.config.version
            if not (self.venv / "bin" / "python").exists():
                made = subprocess.run(
                    [sys.executable, "-m", "venv", str(self.venv)], capture_output=True, text=True
                )
                if made.returncode != 0:
                    raise LabelStudioError(
                        f"cannot create a virtual environment at {self.venv}: "
                        f"{(made.stderr or made.stdout).strip()[-300:]}"
                    )
            command = _installer(self.venv / "bin" / "python", f"label-studio=={version}")
            label = f"installing Label Studio {version} into {self.venv}"
            installer = "pip" if command[0] == str(self.venv / "bin" / "python") else "uv"
            took = {"pip": "minutes with pip", "uv": "seconds with uv"}[installer]
            say(f"{label} ({took}, ~0.8 GB; log: {self.install_log})")
            with open(self.install_log, "wb") as log:
                code = self._wait(
                    subprocess.Popen(
                        command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
                    ),
                    label,
                    say,
                )
            if code != 0:
                raise LabelStudioError(
                    f"installing Label Studio {version} failed ({installer} exited with {code}): "
                    f"{log_tail(self.install_log)}; full log: {self.install_log}"
                )
            self._stamp.write_text(version + "\n")
            return True

    @contextmanager
    def _install_lock(self, say: Say) -> Iterator[None]:
        self.venv.parent.mkdir(parents=True, exist_ok=True)
        lock_path = self.venv.parent / f"{self.venv.name}.lock"
        with open(lock_path, "w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                say(f"waiting for another process installing Label Studio into {self.venv}")
                fcntl.flock(lock, fcntl.LOCK_EX)
            yield

    @staticmethod
    def _wait(process: subprocess.Popen[bytes], label: str, say: Say) -> int:
        """Wait for ``process`` with a progress line every PROGRESS_EVERY_S; an interrupt
        stops it."""
        started = time.monotonic()
        try:
            while True:
                try:
                    return process.wait(timeout=PROGRESS_EVERY_S)
                except subprocess.TimeoutExpired:
                    say(f"{label} ... {time.monotonic() - started:.0f} s")
        except BaseException:
            process.kill()
            process.wait()
            raise

    # --- admin login and environment ---------------------------------------------------

    def admin(self) -> AdminLogin:
        """The admin login, made on first use: a random password and a random 40-hex-digit
        API token, written to ``admin.json`` readable by its owner only (0600)."""
        try:
            data = json.loads(self.admin_file.read_text())
            return AdminLogin(data["email"], data["password"], data["token"])
        except FileNotFoundError:
            pass
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise LabelStudioError(
                f"{self.admin_file} is unreadable ({type(exc).__name__}); restore it, or remove "
                f"it together with {self.data_dir} to start afresh"
            ) from None
        login = AdminLogin(ADMIN_EMAIL, secrets.token_urlsafe(18), secrets.token_hex(20))
        self.home.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.admin_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            json.dump(
                {"email": login.email, "password": login.password, "token": login.token}, handle
            )
        return login

    def environment(self) -> dict[str, str]:
        """The server's environment: ours without AMBIENT_NAMES, its data folder and $HOME
        inside ``home``, the admin login it creates on first start, legacy API tokens on (the
        ``Token`` header), and its outbound calls (version check, Sentry, analytics) off."""
        admin = self.admin()
        env = {k: v for k, v in os.environ.items() if k not in AMBIENT_NAMES}
        env.update(
            HOME=str(self.user_home),
            LABEL_STUDIO_BASE_DATA_DIR=str(self.data_dir),
            LABEL_STUDIO_USERNAME=admin.email,
            LABEL_STUDIO_PASSWORD=admin.password,
            LABEL_STUDIO_USER_TOKEN=admin.token,
            LABEL_STUDIO_ENABLE_LEGACY_API_TOKEN="true",
            LABEL_STUDIO_LATEST_VERSION_CHECK="false",
            LABEL_STUDIO_SENTRY_DSN="",
            LABEL_STUDIO_FRONTEND_SENTRY_DSN="",
            LABEL_STUDIO_COLLECT_ANALYTICS="false",
        )
        return env

    # --- start, stop, status -----------------------------------------------------------

    def _pid(self) -> int | None:
        """The recorded server pid while that process lives and is a label-studio."""
        try:
            pid = int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None
        if not alive(pid):
            return None
        try:
            if b"label-studio" not in Path(f"/proc/{pid}/cmdline").read_bytes():
                return None  # the pid was reused by another program
        except OSError:
            pass
        return pid

    def start(
        self, progress: Say | None = None, *, timeout: float = START_TIMEOUT_S
    ) -> ServiceStatus:
        """Install if needed, then start the server and wait until it answers and accepts the
        admin token; a no-op when it already runs. A busy port is refused before launching
        (Label Studio would silently take the next one). Raises LabelStudioError, with the
        end of the server's log, when it exits or does not answer within ``timeout``."""
        say = progress or _quiet
        pid = self._pid()
        if pid is None:
            self.install(say)
            if port_busy(self.config.host, self.config.port):
                raise LabelStudioError(
                    f"port {self.config.port} on {self.config.host} is already in use by "
                    "another program; stop it, or choose another port: set `port` under "
                    "[labelstudio] in fairjudge.toml"
                )
            first = not (self.data_dir / "label_studio.sqlite3").exists()
            self.data_dir.mkdir(parents=True, exist_ok=True)
            self.user_home.mkdir(parents=True, exist_ok=True)
            env = self.environment()
            command = [str(self.executable), "start", "--no-browser"]
            command += ["--internal-host", self.config.host, "--port", str(self.config.port)]
            with open(self.log_file, "ab") as log:
                self._process = subprocess.Popen(
                    command,
                    env=env,
                    cwd=self.home,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                )
            pid = self._process.pid
            self.pid_file.write_text(str(pid))
            why = " (first start: it sets up its database, 30-90 s)" if first else ""
            say(f"starting Label Studio at {self.url}{why}; log: {self.log_file}")
        self._wait_until_answering(pid, say, timeout)
        if not token_works(self.url, self.admin().token, timeout=self.config.timeout_s):
            self.stop()
            raise LabelStudioError(
                f"Label Studio at {self.url} refuses the admin token in {self.admin_file}: its "
                f"data folder {self.data_dir} was set up with another admin login; restore "
                "that admin.json, or move the data folder away to start afresh"
            )
        return self.status()

    def _wait_until_answering(self, pid: int, say: Say, timeout: float) -> None:
        started = time.monotonic()
        due = started + PROGRESS_EVERY_S
        while not answers(self.url, timeout=1.0):
            now = time.monotonic()
            process = self._process if self._process and self._process.pid == pid else None
            if (process.poll() is not None) if process else not alive(pid):
                self.pid_file.unlink(missing_ok=True)
                code = f" with code {process.returncode}" if process else ""
                raise LabelStudioError(
                    f"Label Studio exited{code} while starting: {log_tail(self.log_file)}; "
                    f"full log: {self.log_file}"
                )
            if now - started > timeout:
                self.stop()
                raise LabelStudioError(
                    f"Label Studio did not answer at {self.url} within {timeout:.0f} s: "
                    f"{log_tail(self.log_file)}; full log: {self.log_file}"
                )
            if now >= due:
                due = now + PROGRESS_EVERY_S
                say(f"waiting for Label Studio at {self.url} ... {now - started:.0f} s")
            time.sleep(0.5)

    def stop(self, *, timeout: float = STOP_TIMEOUT_S) -> bool:
        """Stop the server this home started (SIGTERM, then SIGKILL after ``timeout``);
        False when none was running."""
        pid = self._pid()
        if pid is None:
            self.pid_file.unlink(missing_ok=True)
            return False
        send_signal(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if alive(pid):
            send_signal(pid, signal.SIGKILL)
        if self._process is not None and self._process.pid == pid:
            self._process.wait(timeout=5)
        else:
            try:
                os.waitpid(pid, os.WNOHANG)  # reap it if this process started it
            except ChildProcessError:
                pass  # another process started it; its parent reaps it
        self._process = None
        self.pid_file.unlink(missing_ok=True)
        return True

    def status(self) -> ServiceStatus:
        """Whether the server runs and answers, its version, and whether the admin token
        works (a few quick local requests)."""
        pid = self._pid()
        up = answers(self.url)
        works = None
        if up and self.admin_file.exists():
            works = token_works(self.url, self.admin().token, timeout=self.config.timeout_s)
        return ServiceStatus(
            managed=True,
            running=pid is not None,
            answers=up,
            url=self.url,
            pid=pid,
            version=self.installed_version() or (served_version(self.url) if up else None),
            token_works=works,
            installed=self.installed(),
            venv=str(self.venv),
            data_dir=str(self.data_dir),
            log=str(self.log_file),
        )

    def connection(self) -> Connection:
        """The URL and admin token campaigns use; LabelStudioError when it does not answer."""
        if not answers(self.url) or not self.admin_file.exists():
            raise LabelStudioError(
                f"FairJudge's Label Studio does not answer at {self.url}: run "
                "`fairjudge labelstudio start`"
            )
        return Connection(self.url, self.admin().token, managed=True)

    # --- people ----------------------------------------------------------------------------

    def sign_up(self, email: str, password: str) -> int:
        """Create ``email`` with ``password`` on this server and return its user id (see
        ``sign_up``): the admin reads the organization's invite link, the new person signs up
        through it. The person joins the admin's organization."""
        reply = http_get(self.url + "/api/invite", token=self.admin().token)
        if reply is None or reply[0] != 200:
            raise LabelStudioError(
                f"FairJudge's Label Studio at {self.url} gave no invite link "
                f"({'no answer' if reply is None else f'HTTP {reply[0]}'})"
            )
        try:
            invite = str(json.loads(reply[1])["token"])
        except (ValueError, KeyError, TypeError):
            raise LabelStudioError(f"{self.url}/api/invite gave no token") from None
        return sign_up(self.url, invite, email, password, timeout=self.config.timeout_s)

    def can_log_in(self, email: str, password: str) -> bool:
        """Whether ``email`` can sign in to this server with ``password`` (see ``can_log_in``)."""
        return can_log_in(self.url, email, password, timeout=self.config.timeout_s)

    def login_token(self, email: str, password: str) -> str:
        """The API token of ``email``, signed in with ``password`` (see ``login_token``)."""
        token = login_token(self.url, email, password, timeout=self.config.timeout_s)
        if token is None:
            raise LabelStudioError(f"{email} could not sign in to {self.url} with that password")
        return token


# --- what campaigns use -----------------------------------------------------------------


def _external_token(config: LabelStudioConfig) -> str:
    """The API token for ``config.url`` from the environment variable ``config.token_env``."""
    token = os.environ.get(config.token_env, "")
    if not token:
        raise LabelStudioError(
            f"labelstudio.url is {config.url}, but the environment variable "
            f"{config.token_env} that holds its API token is not set"
        )
    return token


def connection(settings: Settings) -> Connection:
    """The Label Studio campaigns talk to: the server at ``labelstudio.url`` with the token
    from the environment variable ``labelstudio.token_env``, or (no url) FairJudge's own
    server with its admin token. Raises LabelStudioError naming what to do when the token
    variable is unset or FairJudge's server does not answer."""
    config = settings.labelstudio
    if config.url:
        return Connection(config.url.rstrip("/"), _external_token(config), managed=False)
    return LabelStudioService(config, settings.state_dir).connection()


def server_status(settings: Settings) -> ServiceStatus:
    """The status of the Label Studio campaigns use: FairJudge's own (``status``), or the
    one at ``labelstudio.url``: whether it answers, its version, and whether the token in
    ``token_env`` works (LabelStudioError naming the variable when it is unset)."""
    config = settings.labelstudio
    if not config.url:
        return LabelStudioService(config, settings.state_dir).status()
    token = _external_token(config)
    url = config.url.rstrip("/")
    up = answers(url, timeout=config.timeout_s)
    return ServiceStatus(
        managed=False,
        running=up,
        answers=up,
        url=url,
        pid=None,
        version=served_version(url, timeout=config.timeout_s) if up else None,
        token_works=token_works(url, token, timeout=config.timeout_s) if up else None,
        installed=False,
        venv=None,
        data_dir=None,
        log=None,
    )


def _installer(python: Path, requirement: str) -> list[str]:
    """The command that installs ``requirement`` into the venv of ``python``: uv's ``pip
    install`` (a dependency of FairJudge; it downloads and links in parallel), or the venv's own
    pip where uv's binary cannot be found."""
    try:
        from uv import find_uv_bin

        uv = find_uv_bin()
    except (ImportError, FileNotFoundError):
        return [str(python), "-m", "pip", "install", "--progress-bar", "off",
                "--disable-pip-version-check", requirement]  # fmt: skip
    return [uv, "pip", "install", "--python", str(python), "--no-progress", requirement]
