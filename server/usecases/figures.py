"""Dashboard figures kept in the store, and computed ahead off the job slots.

A page's figures on a 10,000-judgment run take seconds to compute (agreement's bootstrap
alone about ten). The dashboard keeps them in each web worker's memory
(server/kept/cache.py), but a worker that has just started, another worker, or another
machine would compute them again. So they are also kept in the store (``dashboardfigure``),
by page (``PageKey``) with the version of the rows that page reads (``run_version``: the
judge run's own judgments, answers, ratings, campaigns): any process that finds the same
version reuses them, and a write to the run's rows makes them stale. A write to another
run's rows leaves them as they are.

Computing ahead (``server.usecases.warming``) happens on a thread of its own, never inside a
job's slot, and by one process at a time per run (``CLAIM``, ``warm_claimed`` here).

The figures are pickled, compressed and signed with the server's secret (``<state_dir>/
server-secret``, the key that signs session cookies): a row the server did not write, or one
written by a server with another secret, is refused before it is unpickled and the page is
computed from the rows. Unpickling also takes an allow-list (``_Figures``: plain values,
dates, NumPy arrays, FairJudge's own dataclasses and enums, no dotted names). Kept figures
are keyed by the run's version together with the format of kept figures, FairJudge's
version and the endpoints' prices (``version_text``), and are not used once older than
``STORED_MAX_AGE_S``.
"""

from __future__ import annotations

import hashlib
import hmac
import io
import json
import logging
import os
import pickle
import time
import zlib
from dataclasses import dataclass, is_dataclass
from datetime import UTC, datetime, timedelta
from enum import Enum
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as package_version
from typing import TYPE_CHECKING, Any

from judge.errors import FairJudgeError, NotFoundError
from judge.hashing import sha256
from server.usecases.dashboard import (
    DERIVED,
    PageKey,
    default_pages,
    derived_figures,
    page_figures,
    page_key,
    run_version,
)
from server.usecases.store import secret_key

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine
    from sqlmodel import Session

    from judge.config import Settings

__all__ = [
    "Stored",
    "dump",
    "load",
    "read",
    "read_latest",
    "child_init",
    "compute_in_child",
    "compute_page",
    "keep",
    "signing_key",
    "version_text",
    "warm_claimed",
    "warm_run",
    "write",
]

log = logging.getLogger("fairjudge.figures")

FORMAT = 1
"""The format of kept figures: raise it when a kept type changes shape, so that figures kept
by the older code are computed again instead of read."""
STORED_MAX_AGE_S = 7 * 24 * 3600.0
"""Kept figures older than this are computed again even when the store's version is the same:
a bound on staleness should an in-place edit escape the version."""
CLAIM = "figures"
"""The lease (``judge.runs.run_lease``, kind ``figures``) a warmer holds on a judge run while
it computes the run's pages, so that warmers in several processes, on one machine or many,
never compute the same run's figures at once: its row's insert fails on the key (SQLite and
PostgreSQL alike) while a live process holds it, a heartbeat renews it however long the
pages take, and it is freed when they are done, at once when its holder dies on the same
host, after ``judge.runs.LEASE_SECONDS`` elsewhere."""

_BUILTINS = frozenset(
    {"list", "dict", "set", "frozenset", "tuple", "str", "int", "float", "complex", "bool",
     "bytes", "bytearray", "range", "slice", "NoneType"}
)  # fmt: skip
_ALLOWED = {
    "builtins": _BUILTINS,
    "datetime": frozenset({"datetime", "date", "time", "timedelta", "timezone"}),
    "collections": frozenset({"OrderedDict", "defaultdict", "Counter"}),
    "copyreg": frozenset({"_reconstructor"}),
    "numpy": frozenset({"ndarray", "dtype"}),
    "numpy.core.multiarray": frozenset({"_reconstruct", "scalar"}),
    "numpy._core.multiarray": frozenset({"_reconstruct", "scalar"}),
    "numpy.dtypes": None,  # NumPy's dtype classes (Float64DType, ...): names ending DType
}
"""Globals a kept figure may name, beyond FairJudge's own dataclasses and enums (None: every
name in that module)."""
_OURS = ("judge.", "annotation.", "server.")


class _Figures(pickle.Unpickler):
    """Unpickles kept figures, refusing any global outside the allow-list."""

    def find_class(self, module: str, name: str) -> Any:
        if "." in name:  # an attribute path would reach past the named global
            raise pickle.UnpicklingError(f"a kept figure may not name a path ({module}: {name})")
        names = _ALLOWED.get(module, frozenset())
        if module in _ALLOWED and (name in names if names is not None else name.endswith("DType")):
            return super().find_class(module, name)
        if module.startswith(_OURS):
            found = super().find_class(module, name)
            if isinstance(found, type) and (is_dataclass(found) or issubclass(found, Enum)):
                return found
        raise pickle.UnpicklingError(f"a kept figure may not name {module}.{name}")


def dump(value: Any, key: bytes) -> bytes:
    """``value`` pickled and compressed, behind its HMAC-SHA256 under ``key``."""
    data = zlib.compress(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL), 1)
    return hmac.new(key, data, hashlib.sha256).digest() + data


def load(blob: bytes, key: bytes) -> Any:
    """Kept figures read back: ValueError when they are not signed with ``key``,
    pickle.UnpicklingError when they name a type not allowed."""
    mac, data = blob[:32], blob[32:]
    if not hmac.compare_digest(mac, hmac.new(key, data, hashlib.sha256).digest()):
        raise ValueError("not signed with this server's secret")
    return _Figures(io.BytesIO(zlib.decompress(data))).load()


def signing_key(settings: Settings) -> bytes:
    return secret_key(settings.state_dir).encode()


def version_text(version: tuple[Any, ...], settings: Settings | None) -> str:
    """What kept figures are keyed by, as stored (a digest): the store's version
    (``store_version``), the format of kept figures, FairJudge's version, and the endpoints'
    prices (a run's cost is read from the config, not the store)."""

    try:
        ours = package_version("fairjudge")
    except PackageNotFoundError:  # run from a checkout that is not installed
        ours = "unknown"
    prices = {
        name: [
            e.input_price_per_mtok,
            e.output_price_per_mtok,
            e.batch_discount,
            e.cached_input_price_per_mtok,
        ]
        for name, e in sorted((settings.endpoints if settings else {}).items())
    }
    return sha256(repr((FORMAT, ours, json.dumps(prices), version)))


@dataclass(frozen=True)
class Stored:
    """Figures found in the store: the value, when they were computed and how long it took."""

    value: Any
    at: datetime
    seconds: float


def read(session: Session, key: PageKey, version: str, sign: bytes) -> Stored | None:
    """The figures kept for ``key`` at ``version``, signed with ``sign``; None when there are
    none, they were computed at another version or too long ago (``STORED_MAX_AGE_S``), or
    they cannot be read back (logged, then computed anew)."""
    found = _kept_row(session, key, sign, version=version, max_age_s=STORED_MAX_AGE_S)
    return None if found is None else found[1]


def read_latest(session: Session, key: PageKey, sign: bytes) -> tuple[str, Stored] | None:
    """The figures kept for ``key`` at whatever version and age (``write`` keeps one row per
    page: the latest computed), with that version; None when there are none or they cannot
    be read back. What a page shows, said to be stale, while it is computed again."""
    return _kept_row(session, key, sign)


def _kept_row(
    session: Session,
    key: PageKey,
    sign: bytes,
    *,
    version: str | None = None,
    max_age_s: float | None = None,
) -> tuple[str, Stored] | None:
    """The latest row kept for ``key`` (at ``version`` when one is given), with its version,
    read back; None when there is none, it is older than ``max_age_s``, or it cannot be read
    back (logged)."""
    from sqlmodel import col, select

    from server.tables import DashboardFigure

    query = select(
        DashboardFigure.version, DashboardFigure.computed_at, DashboardFigure.seconds,
        DashboardFigure.data,
    ).where(col(DashboardFigure.key) == sha256(key.text()))  # fmt: skip
    if version is not None:
        query = query.where(col(DashboardFigure.version) == version)
    row = session.exec(query.order_by(col(DashboardFigure.computed_at).desc())).first()
    if row is None:
        return None
    at = row[1] if row[1].tzinfo else row[1].replace(tzinfo=UTC)
    if max_age_s is not None and datetime.now(UTC) - at > timedelta(seconds=max_age_s):
        return None
    try:
        value = load(row[3], sign)
    except Exception as exc:  # another server's secret, another FairJudge, or not ours
        log.warning("kept figures of %s could not be read back (%s)", key, exc)
        return None
    return row[0], Stored(value, at, row[2])


def write(
    engine: Engine,
    key: PageKey,
    version: str,
    value: Any,
    *,
    sign: bytes,
    at: datetime,
    seconds: float,
) -> None:
    """Keep ``value`` as the figures of ``key`` at ``version``, signed with ``sign``
    (replacing what was kept for ``key``). When another process keeps the same page at the
    same moment, the figures it kept stay."""
    from sqlalchemy import delete
    from sqlalchemy.exc import IntegrityError

    from judge.store.engine import session_scope
    from server.tables import DashboardFigure

    digest = sha256(key.text())
    data = dump(value, sign)
    try:
        with session_scope(engine) as session:
            session.execute(delete(DashboardFigure).where(DashboardFigure.key == digest))  # type: ignore[arg-type]
            session.add(
                DashboardFigure(
                    key=digest, page=key.text()[:500], judge_run_id=key.judge_run_id,
                    version=version, computed_at=at, seconds=seconds, data=data,
                )
            )  # fmt: skip
    except IntegrityError:
        log.info("figures of %s were kept by another process meanwhile", key)


def compute_page(
    engine: Engine, settings: Settings, key: PageKey, version: str, sign: bytes
) -> Stored:
    """Compute ``key``'s figures from the rows in a session of their own and keep them at
    ``version`` for every process (``keep``). A page drawn from another (``DERIVED``: the
    HTML of a report) is drawn from that one's kept figures, or computes and keeps both."""
    from sqlmodel import Session

    began = time.perf_counter()
    with Session(engine) as session:
        if key.page in DERIVED:
            base = PageKey(DERIVED[key.page], key.judge_run_id, key.options)
            found = read(session, base, version, sign)
            if found is None:
                value = page_figures(session, base, settings)
                found = keep(engine, base, version, value, sign, time.perf_counter() - began)
            value = derived_figures(key, found.value)
        else:
            value = page_figures(session, key, settings)
    seconds = time.perf_counter() - began
    pid = os.getpid()
    log.info("figures of %s computed off the request in %.2f s (pid %d)", key.text(), seconds, pid)
    return keep(engine, key, version, value, sign, seconds)


CHILD_NICE = 10
"""How much lower than the web process's the CPU priority of the processes that compute a
page's figures for it is (``compute_in_child``): a request thread, which only reads kept
rows and draws them, is scheduled before them on a busy machine."""
CLAIM_WAIT_S = 600.0
"""How long a computation for a page waits for the warmer holding the run's claim
(``CLAIM``) to keep that page before computing it itself."""
_CHILD_ENGINES: dict[str, Engine] = {}


def child_init() -> None:
    """In a process started (spawn) to compute figures for a web process: a lower priority
    (``CHILD_NICE``) and log lines that name the process."""
    logging.basicConfig(
        level=logging.INFO, format="[%(asctime)s] [figures %(process)d] %(message)s"
    )
    try:
        os.nice(CHILD_NICE)
    except OSError as exc:  # not allowed: the same priority
        log.info("figures computed at the web process's priority (%s)", exc)


def compute_in_child(
    url: str, settings: Settings, key: PageKey, version: str, sign: bytes, fresh: bool = False
) -> tuple[datetime, float, Any]:
    """``compute_page`` in a process of its own (never the web process's interpreter, whose
    request threads would wait for the GIL): when the figures were kept and how long they
    took, with the value itself only when the store could not keep it (None otherwise: the
    web process reads the kept row). A page a live warmer computes ahead (``default_pages``)
    while it holds the run's claim is waited for, not computed twice."""
    from sqlmodel import Session

    from judge.store.engine import make_engine

    engine = _CHILD_ENGINES.get(url)
    if engine is None:
        engine = _CHILD_ENGINES[url] = make_engine(url)
    deadline = time.monotonic() + CLAIM_WAIT_S
    while not fresh:  # computed again when asked (``?fresh=1``), never the kept row read back
        with Session(engine) as session:
            found = read(session, key, version, sign)
        if found is not None:
            return found.at, found.seconds, None
        ahead = (key.page, key.options) in default_pages(settings)  # what a warmer computes
        if not ahead or time.monotonic() > deadline or not _claimed(engine, key.judge_run_id):
            break
        time.sleep(0.5)
    made = compute_page(engine, settings, key, version, sign)
    with Session(engine) as session:
        kept = read(session, key, version, sign) is not None
    return made.at, made.seconds, None if kept else made.value


def _claimed(engine: Engine, judge_run_id: int) -> bool:
    """Whether a live process holds the run's ``CLAIM`` (a warmer computing its pages)."""
    from sqlmodel import Session

    from judge.runs import lease_holder

    with Session(engine) as session:
        return lease_holder(session, CLAIM, judge_run_id) is not None


def keep(
    engine: Engine, key: PageKey, version: str, value: Any, sign: bytes, seconds: float
) -> Stored:
    """``value`` kept as ``key``'s figures at ``version``, computed now in ``seconds``; a
    store that cannot keep them costs a log line (the figures are served all the same)."""
    at = datetime.now(UTC)
    try:
        write(engine, key, version, value, sign=sign, at=at, seconds=seconds)
    except Exception as exc:
        log.warning("figures of %s not kept in the store: %s", key, exc)
    return Stored(value, at, seconds)


def warm_run(engine: Engine, settings: Settings, judge_run_id: int) -> dict[str, float | None]:
    """Compute and keep the figures of the run's pages as its link opens them and as the
    API serves them with no query (``default_pages``), at the run's version now
    (``run_version``); seconds per page. Pages whose figures are kept at this version
    already are skipped (0 s); a page drawn from another (``DERIVED``) reuses its figures.
    A page whose answer is an error (the agreement of a run nobody rated) keeps nothing
    (None): its route answers the error, which costs little, each time."""
    from sqlmodel import Session

    from judge.store.queries import get_judge_run

    with Session(engine) as session:
        get_judge_run(session, judge_run_id)  # NotFoundError for an unknown run
    took: dict[str, float | None] = {}
    sign = signing_key(settings)
    values: dict[str, Any] = {}
    spent: dict[str, float] = {}  # what computing each page took, kept or now
    for page, options in default_pages(settings):
        key = page_key(page, judge_run_id, options)
        with Session(engine) as session:
            version = version_text(run_version(session, judge_run_id), settings)
            found = read(session, key, version, sign)
            if found is not None:
                took[page], values[page], spent[page] = 0.0, found.value, found.seconds
                continue
            start = time.perf_counter()
            reused = 0.0
            base = DERIVED.get(page)
            try:
                if base in values:
                    value = derived_figures(key, values[base])
                elif page == "agreement-json" and values.get("agreement") is not None:
                    # The agreement page's figures hold this very answer (the same request
                    # at the defaults), or the reason there is none: not computed twice.
                    value, reused = values["agreement"].agreement, spent["agreement"]
                    if value is None:
                        raise NotFoundError(values["agreement"].no_ratings or "no ratings")
                else:
                    value = page_figures(session, key, settings)
            except FairJudgeError as exc:
                log.info("judge run %s: no %s to keep (%s)", judge_run_id, page, exc)
                took[page] = None
                continue
            seconds = time.perf_counter() - start + reused
        values[page], spent[page] = value, seconds
        write(engine, key, version, value, sign=sign, at=datetime.now(UTC), seconds=seconds)
        took[page] = max(0.01, round(seconds, 2))  # computed now: never the 0 of "kept already"
    return took


def warm_claimed(
    engine: Engine, settings: Settings, judge_run_id: int
) -> dict[str, float | None] | None:
    """``warm_run`` under this process's claim on the run (``CLAIM``); None, computing
    nothing, when another live process holds it: that one is computing the same pages."""
    from judge.runs import RunBusyError, run_lease

    try:
        with run_lease(engine, CLAIM, judge_run_id):
            return warm_run(engine, settings, judge_run_id)
    except RunBusyError as exc:
        log.info("judge run %s: pages left to the process computing them (%s)", judge_run_id, exc)
        return None
