"""``kill -9`` of a ``--batch`` judge command at each step of a batch's life, then a rerun:
the batch is resumed, never sent twice (the stub counts uploads and creations), and the run
ends complete. The command is a real subprocess (tests/support/batch_command.py); the stub
holds its reply at the chosen step until the command is dead, so the kill lands exactly
there."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from judge.config import EndpointConfig, Settings, load_settings
from judge.data.datasets import import_items
from judge.models.batch import BatchApi, BatchState
from judge.models.batch_options import BatchOptions
from judge.models.transport import BatchTransport
from judge.store.engine import make_engine, session_scope
from judge.store.tables import BatchJob
from server import usecases
from server.usecases.batch import judge_batch
from server.usecases.requests import JudgeRequest
from tests.support import stores
from tests.support.batch_runs import judgments_by_key, write_batch_config
from tests.support.factories import SAMPLE
from tests.support.stub_batch import BatchScript, BatchStub

ROOT = Path(__file__).resolve().parents[3]
LIMIT = 24
JUDGMENTS = 36  # 18 S1 items x ICS + 6 S2 items x (TCS, PCS, ETCS), as in test_batch.py

# Real kills (SIGKILL of a subprocess), at the two moments a batch spends the longest in:
# (step the stub holds, before or after doing it, the job's state the kill leaves behind)
KILLS = [
    # Between upload and create: the file's id is written down, no batch exists yet.
    ("create", "before", "uploaded"),
    # Between create and download: the batch's id is written down, it is being polled.
    ("poll", "before", "submitted"),
]
# The instants between a step done at the provider and its result written down, where a
# process dies only by chance: simulated in-process by an exception that no handler catches
# (``Died``), raised right after the provider did the step, which leaves the store exactly
# as a kill at that instant would. (step, the job's state left)
DEATHS = [
    ("upload", "intent"),  # the file is stored; its id never written: found again by name
    ("create", "uploaded"),  # the batch exists; its id never written: found by its file
    ("download", "submitted"),  # the batch ended; its output never stored
]


@pytest.fixture
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Engine, str]]:
    if getattr(request, "param", "sqlite") == "sqlite":
        url = stores.copy_store(request.getfixturevalue("sample_template"), tmp_path / "k.db")
        engine = make_engine(url)
    else:
        url = str(request.getfixturevalue("pg_url"))
        engine = make_engine(url)
        with session_scope(engine) as session:
            import_items(session, SAMPLE, stores.SAMPLE_DATASET)
    yield engine, url
    engine.dispose()


def _started(config: Path) -> subprocess.Popen[bytes]:
    """The batch command, started now and given its run's id later (``_killed_at``)."""
    command = [sys.executable, "-m", "tests.support.batch_command", str(config), "-"]
    return subprocess.Popen(
        command, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )


def _killed_at(stub: BatchStub, proc: subprocess.Popen[bytes], gen: int) -> None:
    """Give the command its run, wait until the stub holds the step it was told to, then
    SIGKILL the command."""
    assert proc.stdin is not None
    proc.stdin.write(f"{gen}\n".encode())
    proc.stdin.flush()
    deadline = time.monotonic() + 60
    while not stub.state.held.wait(0.01):
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"the command ended before the step: {out.decode()} {err.decode()}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail("the stub never reached the step")
    proc.kill()  # SIGKILL: no cleanup of any kind runs
    proc.communicate(timeout=30)
    stub.release()


Dying = Callable[[BatchStub, Path], Callable[[Settings, int], None]]
"""Given the stub and the config, what makes a batch command die once given the settings and
the generation run (it may start a process before the run exists)."""


def _kill_and_rerun(tmp_path: Path, engine: Engine, url: str, left: str, die: Dying) -> None:
    """Answer the sample's first items, have a batch command die as ``die`` says, then
    rerun it here: one upload, one batch, every judgment scored."""
    with BatchStub(BatchScript(window_s=0.1)) as stub:
        config = write_batch_config(tmp_path / "batch.toml", stub.base_url, url)
        settings = load_settings(config)
        dying = die(stub, config)
        gen = usecases.generate(
            engine, settings, usecases.GenerateRequest(dataset=stores.SAMPLE_DATASET, limit=LIMIT)
        ).run_id
        dying(settings, gen)
        with Session(engine) as session:
            jobs = session.exec(select(BatchJob)).all()
        assert [j.state for j in jobs] == [left]

        result = judge_batch(
            engine, settings, JudgeRequest(generation_run_id=gen), options=BatchOptions(poll_s=0.02)
        )
        assert (stub.state.uploads, stub.state.creations) == (1, 1)
    assert result.status == "finished" and result.missing == []
    rows = judgments_by_key(engine, result.run_id)
    assert len(rows) == JUDGMENTS and {j.status for j in rows.values()} == {"scored"}
    with Session(engine) as session:
        jobs = session.exec(select(BatchJob)).all()
    assert [(j.state, j.calls, j.answered) for j in jobs] == [("collected", JUDGMENTS, JUDGMENTS)]


def _kill(step: str, when: str) -> Dying:
    def kill(stub: BatchStub, config: Path) -> Callable[[Settings, int], None]:
        proc = _started(config)  # its imports overlap the test's own work
        stub.hold(step, when)
        return lambda settings, gen: _killed_at(stub, proc, gen)

    return kill


@pytest.mark.parametrize(("step", "when", "left"), KILLS)
def test_a_batch_killed_is_resumed_and_never_sent_twice(
    tmp_path: Path, store: tuple[Engine, str], step: str, when: str, left: str
) -> None:
    _kill_and_rerun(tmp_path, *store, left, _kill(step, when))


@pytest.mark.postgres
@pytest.mark.parametrize("store", ["postgres"], indirect=True)
def test_a_batch_killed_between_create_and_download_resumes_on_postgres(
    tmp_path: Path, store: tuple[Engine, str]
) -> None:
    step, when, left = KILLS[1]

    _kill_and_rerun(tmp_path, *store, left, _kill(step, when))


class Died(BaseException):
    """Stands for the process dying: no ``except Exception`` handler catches it."""


class DyingApi(BatchApi):
    """The real Batch API client, dying right after the provider did ``step``."""

    def __init__(self, name: str, config: EndpointConfig, step: str) -> None:
        super().__init__(name, config)
        self.step = step

    def upload(self, filename: str, content: bytes) -> str:
        file_id = super().upload(filename, content)
        if self.step == "upload":
            raise Died
        return file_id

    def create(self, input_file_id: str, metadata: dict[str, str]) -> BatchState:
        state = super().create(input_file_id, metadata)
        if self.step == "create":
            raise Died
        return state

    def content(self, file_id: str) -> bytes:
        if self.step == "download":
            raise Died
        return super().content(file_id)


@pytest.mark.parametrize(("step", "left"), DEATHS)
def test_a_batch_whose_command_died_right_after_a_step_is_resumed_and_never_sent_twice(
    tmp_path: Path, store: tuple[Engine, str], step: str, left: str
) -> None:
    from judge.grading import judging
    from judge.grading.rubrics import load_rubrics
    from judge.models.client import ModelClient
    from judge.prompts import PromptBook

    engine = store[0]

    def die(stub: BatchStub, config: Path) -> Callable[[Settings, int], None]:
        def dies(settings: Settings, gen: int) -> None:
            endpoint = settings.endpoint("test")
            with pytest.raises(Died):
                judging.judge(
                    engine, ModelClient("test", endpoint), PromptBook(settings.prompts_path()),
                    load_rubrics(settings.prompts_path()), settings.judge, gen,
                    transport=BatchTransport(
                        DyingApi("test", endpoint, step), BatchOptions(poll_s=0.02)
                    ),
                )  # fmt: skip

        return dies

    _kill_and_rerun(tmp_path, *store, left, die)
