"""``python -m tests.support.batch_job CONFIG JOB``: one worker's take of a queued job
(``server.jobs.running.run_job``, as the server's worker runs it) in a process of its own,
so that tests can kill it with SIGKILL at a chosen step of its batch. JOB ``-`` reads the
job's id from stdin once the modules are imported, so a test can start the process first
and queue the job meanwhile."""

from __future__ import annotations

import sys

from judge.config import load_settings
from server.jobs.running import run_job
from server.usecases.context import open_store


def main(argv: list[str]) -> int:
    import judge.grading.judging  # noqa: F401  (imported before the job's id is read)

    job_id = int(sys.stdin.readline() if argv[1] == "-" else argv[1])
    settings = load_settings(argv[0])
    engine = open_store(settings)
    print(run_job(engine, settings, job_id))
    engine.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
