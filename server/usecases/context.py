"""What every use case opens: the store, a model client, an endpoint's prices, Label Studio."""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

# Only what every command needs is imported here. The stages, the model client (openai), the
# reports (matplotlib) and the reliability section (scipy, scikit-learn, pandas) are imported
# inside the functions that use them, so a command that only reads the store starts in a
# fraction of the time (see tests/server/test_startup.py).
if TYPE_CHECKING:
    from sqlalchemy.engine import Engine
    from sqlmodel import Session

    from annotation.labelstudio.client import LabelStudioClient
    from annotation.labelstudio.service import LabelStudioService
    from judge.config import Settings
    from judge.costs import Prices
    from judge.models.client import ModelClient


def open_store(settings: Settings, *, migrate: bool = True) -> Engine:
    """The store's engine; without ``migrate``, a database behind the newest schema revision
    is refused (the server and its workers never migrate on their own)."""
    from judge.store.engine import make_engine

    return make_engine(settings.database_url, migrate=migrate)


@contextmanager
def session(engine: Engine) -> Iterator[Session]:
    """A store session for the block: committed at its end, rolled back on an error."""
    from judge.store.engine import session_scope

    with session_scope(engine) as opened:
        yield opened


_CLIENTS: OrderedDict[tuple[Any, ...], ModelClient] = OrderedDict()
_CLIENTS_LOCK = threading.Lock()
KEPT_CLIENTS = 8
"""Clients kept per process, the least recently used dropped first (a dropped client still
serves whoever holds it, and closes its connections once nobody does)."""


def make_client(settings: Settings, endpoint: str) -> ModelClient:
    """A client for a named endpoint, after checking that it serves the configured model.

    Its calls keep the endpoint's quota: shared through Redis by every process and worker
    when the settings name one (``[workers] limiter_url`` or a redis:// broker; built once
    per process, and an error naming Redis when it does not answer), else this process's own.

    One client per process serves every call with the same endpoint settings, key and quota
    (clients are thread-safe): building one costs about 50 ms of CPU (openai's HTTP client
    loads the TLS certificates), which a Celery worker would otherwise pay for every part of
    every run. A forked process builds its own (connections are not shared across a fork).
    The model check runs on every call, so a server restarted with another model is caught.
    """
    from judge.models.client import ModelClient
    from judge.models.limiter import limiter_for

    config = settings.endpoint(endpoint)
    limiter = limiter_for(settings)
    key = (os.getpid(), endpoint, config.model_dump_json(), config.api_key(), limiter)
    with _CLIENTS_LOCK:
        client = _CLIENTS.get(key)
        if client is not None:
            _CLIENTS.move_to_end(key)
    if client is None:
        client = ModelClient(endpoint, config, limiter=limiter)
        with _CLIENTS_LOCK:
            client = _CLIENTS.setdefault(key, client)
            while len(_CLIENTS) > KEPT_CLIENTS:
                _CLIENTS.popitem(last=False)
    client.check_model()
    return client


def run_prices(settings: Settings | None, endpoint: str) -> Prices | None:
    """The prices of a run's judge endpoint as the config gives them now (None without a
    config, an endpoint of that name, or prices)."""
    from judge.costs import Prices

    if settings is None or endpoint not in settings.endpoints:
        return None
    return Prices.of(settings.endpoints[endpoint])


def labelstudio(settings: Settings) -> tuple[LabelStudioClient, LabelStudioService | None]:
    """A client for the Label Studio campaigns use, and FairJudge's own server's manager when
    it is that one (None for a server at ``labelstudio.url``)."""
    from annotation.labelstudio.client import LabelStudioClient
    from annotation.labelstudio.service import LabelStudioService, connection

    found = connection(settings)
    client = LabelStudioClient(found.url, found.token, timeout_s=settings.labelstudio.timeout_s)
    service = (
        LabelStudioService(settings.labelstudio, settings.state_dir) if found.managed else None
    )
    return client, service
