"""The judge's counterfactual check: judging swapped copies of a run's answers."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from judge.progress import Progress
from server.usecases.context import make_client
from server.usecases.rubrics import rubrics

# Only what every command needs is imported here. The stages, the model client (openai), the
# reports (matplotlib) and the reliability section (scipy, scikit-learn, pandas) are imported
# inside the functions that use them, so a command that only reads the store starts in a
# fraction of the time (see tests/server/test_startup.py).
if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from judge.config import Settings
    from judge.reports.sections import Report
    from judge.trust.rejudge import CounterfactualRun


def swap_kinds(chosen: Sequence[str], available: Sequence[str]) -> list[str]:
    """The swap kinds asked for: ``all`` means every kind of the list."""
    kinds = list(dict.fromkeys(chosen))
    return list(available) if "all" in kinds else kinds


def counterfactual_audit(
    engine: Engine,
    settings: Settings,
    judge_run_id: int,
    *,
    swap: Sequence[str],
    swaps_file: str | Path | None = None,
    limit: int | None = None,
    progress: Progress | None = None,
) -> CounterfactualRun:
    """Judge a counterfactual copy of a judge run's answers (``swap``: names, gender, race
    or all; ``swaps_file``: a swap list of the user's own) with the run's own endpoint and
    settings; resumable. Everything is checked before any call: the swap list, the kinds,
    that the run scored something and that its judge can be reproduced."""
    from judge.endpoint_url import check_same_server
    from judge.prompts import PromptBook
    from judge.store.engine import session_scope
    from judge.store.queries import get_judge_run
    from judge.trust.rejudge import run_counterfactual
    from judge.trust.swaps import load_swaps

    swaps = load_swaps(swaps_file)
    kinds = swap_kinds(swap, swaps.kinds)
    chosen = swaps.select(kinds)
    with session_scope(engine) as session:
        jrun = get_judge_run(session, judge_run_id)
        endpoint, judged_at = jrun.endpoint_name, jrun.base_url
        rubric_set = rubrics(settings, session, judge_run_id=judge_run_id)
    # The copy must be judged by the same server as the run, or the comparison mixes two.
    check_same_server(
        f"judge run {judge_run_id}", judged_at, endpoint, settings.endpoint(endpoint).base_url
    )
    return run_counterfactual(
        engine, make_client(settings, endpoint), PromptBook(settings.prompts_path()),
        rubric_set, judge_run_id, kinds, chosen, limit=limit, progress=progress,
    )  # fmt: skip


def diagnostics(
    engine: Engine,
    settings: Settings,
    judge_run_id: int,
    *,
    tolerance: float = 0.0,
    margin: float | None = None,
) -> Report:
    """The judge diagnostics report of one judge run (``judge-audit show``), read in a
    session of its own: self-preference, counterfactual copies, order, length, cost."""
    from judge.store.engine import session_scope
    from server.usecases.reports import diagnostics_report

    with session_scope(engine) as session:
        return diagnostics_report(
            session, judge_run_id, tolerance=tolerance, settings=settings, margin=margin
        )


def judge_run_status(engine: Engine, judge_run_id: int) -> tuple[str, str | None]:
    """A judge run's status and its detail (why it is incomplete, say)."""
    from judge.store.engine import session_scope
    from judge.store.queries import get_judge_run

    with session_scope(engine) as session:
        run = get_judge_run(session, judge_run_id)
        return run.status, run.status_detail
