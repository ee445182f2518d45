"""``python -m tests.support.batch_command CONFIG GENERATION_RUN [POLL_S]``: judge a
generation run through the Batch API in a process of its own, as ``fairjudge judge RUN
--batch`` does, but started before its run exists, so that tests can kill it with SIGKILL
at a chosen step. GENERATION_RUN ``-`` reads the run's id from stdin once the modules are
imported (3 s of a 2-core machine's time, mostly openai's), so a test can start the command
first and make the run meanwhile."""

from __future__ import annotations

import sys

from judge.config import load_settings
from judge.models.batch_options import BatchOptions
from server.usecases.batch import batch_summary_lines, judge_batch
from server.usecases.context import open_store
from server.usecases.requests import JudgeRequest


def main(argv: list[str]) -> int:
    import judge.grading.judging  # noqa: F401  (imported before the run's id is read)

    run_id = int(sys.stdin.readline() if argv[1] == "-" else argv[1])
    settings = load_settings(argv[0])
    engine = open_store(settings)
    poll_s = float(argv[2]) if len(argv) > 2 else 0.02
    result = judge_batch(
        engine,
        settings,
        JudgeRequest(generation_run_id=run_id),
        options=BatchOptions(poll_s=poll_s),
    )
    print("\n".join(batch_summary_lines(result)))
    engine.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
