"""Dashboard figures kept in the store, and computed ahead when a job ends.

A page's figures on a 10,000-judgment run take seconds to compute (agreement's bootstrap
alone about ten). The dashboard keeps them in each web worker's memory
(server/dashboard/cache.py), but a worker that has just started, another worker, or another
machine would compute them again. So they are also kept in the store (``dashboardfigure``),
by page (``PageKey``) with the store's version they were computed at: any process that finds
the same version reuses them, and a new version (a row added, a status changed) makes them
stale. When a job ends, the worker that ran it computes the pages of the judge run it touched
(``warm_after_job``): the first person to open them finds them ready.

The figures are pickled, compressed and signed with the server's secret (``<state_dir>/
server-secret``, the key that signs session cookies): a row the server did not write, or one
written by a server with another secret, is refused before it is unpickled and the page is
computed from the rows. Unpickling also takes an allow-list (``_Figures``: plain values,
dates, NumPy arrays, FairJudge's own dataclasses and enums, no dotted names). Kept figures
are keyed by the store's version together with the format of kept figures, FairJudge's
version and the endpoints' prices (``version_text``), and are not used once older than
``STORED_MAX_AGE_S``.
"""

from __future__ import annotations

import hashlib
import hmac
import io
import json
import logging
import pickle
import time
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, is_dataclass
from datetime import UTC, datetime, timedelta
from enum import Enum
from typing import TYPE_CHECKING, Any

from judge.hashing import sha256
from server.usecases.dashboard import PageKey, default_pages, page_figures, page_key, store_version

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine
    from sqlmodel import Session

    from judge.config import Settings

__all__ = [
    "Stored",
    "dump",
    "load",
    "read",
    "runs_kept",
    "runs_of_result",
    "signing_key",
    "version_text",
    "warm_after_job",
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
RECENT_RUNS = 2
"""Besides the job's own runs, how many runs with kept figures a job computes again when it
ends (most recently computed first): a job's new rows make every kept figure stale (the
store's version is one for the whole store). Kept small: a run's pages cost a worker tens of
seconds on 10,000 judgments, and a run of small jobs must not keep the workers busy."""

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
    from server.usecases.store import secret_key

    return secret_key(settings.state_dir).encode()


def version_text(version: tuple[Any, ...], settings: Settings | None) -> str:
    """What kept figures are keyed by, as stored (a digest): the store's version
    (``store_version``), the format of kept figures, FairJudge's version, and the endpoints'
    prices (a run's cost is read from the config, not the store)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as package_version

    try:
        ours = package_version("fairjudge")
    except PackageNotFoundError:  # run from a checkout that is not installed
        ours = "unknown"
    prices = {
        name: [e.input_price_per_mtok, e.output_price_per_mtok, e.batch_discount]
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
    from sqlmodel import col, select

    from judge.store.tables import DashboardFigure

    row = session.exec(
        select(DashboardFigure.computed_at, DashboardFigure.seconds, DashboardFigure.data)
        .where(col(DashboardFigure.key) == sha256(key.text()),
               col(DashboardFigure.version) == version)
    ).first()  # fmt: skip
    if row is None:
        return None
    at = row[0] if row[0].tzinfo else row[0].replace(tzinfo=UTC)
    if datetime.now(UTC) - at > timedelta(seconds=STORED_MAX_AGE_S):
        return None
    try:
        value = load(row[2], sign)
    except Exception as exc:  # another server's secret, another FairJudge, or not ours
        log.warning("kept figures of %s could not be read back (%s); computing them", key, exc)
        return None
    return Stored(value, at, row[1])


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
    from judge.store.tables import DashboardFigure

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


def warm_run(engine: Engine, settings: Settings, judge_run_id: int) -> dict[str, float]:
    """Compute and keep the figures of the run's pages as its link opens them
    (``default_pages``), at the store's version now; seconds per page. Pages whose figures
    are kept at this version already are skipped (0 s)."""
    from sqlmodel import Session

    took: dict[str, float] = {}
    sign = signing_key(settings)
    for page, options in default_pages(settings):
        key = page_key(page, judge_run_id, options)
        with Session(engine) as session:
            version = version_text(store_version(session), settings)
            if read(session, key, version, sign) is not None:
                took[page] = 0.0
                continue
            start = time.perf_counter()
            value = page_figures(session, key, settings)
            seconds = time.perf_counter() - start
        write(engine, key, version, value, sign=sign, at=datetime.now(UTC), seconds=seconds)
        took[page] = round(seconds, 2)
    return took


def runs_kept(engine: Engine, limit: int = RECENT_RUNS) -> list[int]:
    """Judge runs that have kept figures, most recently computed first."""
    from sqlalchemy import func
    from sqlmodel import Session, col, select

    from judge.store.tables import DashboardFigure

    with Session(engine) as session:
        rows = session.exec(
            select(DashboardFigure.judge_run_id, func.max(DashboardFigure.computed_at))
            .where(col(DashboardFigure.judge_run_id).is_not(None))
            .group_by(col(DashboardFigure.judge_run_id))
            .order_by(func.max(DashboardFigure.computed_at).desc())
            .limit(limit)
        ).all()
    return [int(run) for run, _ in rows if run is not None]


def runs_of_result(result: Any) -> list[int]:
    """The judge runs a job's result names: the run it judged (``judge_run_id``), the run
    whose checks it added to (``checked_judge_run_id``), a sweep's runs (``judge_run_ids``)."""
    if not isinstance(result, dict):
        return []
    named = [result.get("checked_judge_run_id"), result.get("judge_run_id")]
    named += list(result.get("judge_run_ids") or [])
    return [r for r in named if isinstance(r, int) and not isinstance(r, bool)]


def warm_after_job(engine: Engine, settings: Settings, runs: Iterable[int]) -> None:
    """After a job: compute the pages of the judge runs it touched (``runs``) and again those
    of the runs with kept figures (``RECENT_RUNS``), which its new rows made stale. Never
    raises: a figure that fails here is computed, and its error shown, when its page opens."""
    from sqlmodel import Session

    from judge.store.tables import JudgeRun

    try:
        chosen = list(dict.fromkeys([*runs, *runs_kept(engine)]))
    except Exception as exc:  # the store is busy or going away: the pages can wait
        log.warning("dashboard figures not computed ahead: %s", exc)
        return
    for run_id in chosen:
        try:
            with Session(engine) as session:
                if session.get(JudgeRun, run_id) is None:
                    continue
            took = warm_run(engine, settings, run_id)
            log.info("dashboard figures of judge run %s computed ahead: %s", run_id, took)
        except Exception as exc:
            log.warning("dashboard figures of judge run %s not computed ahead: %s", run_id, exc)
