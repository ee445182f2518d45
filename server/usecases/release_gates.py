"""Release gates (``fairjudge gate``): a gates file checked against stored judge runs.

The file is read and checked for shape (``judge.reports.gates``), its runs are found in the
store (an id, a ``[runs]`` name, or a ``latest`` selector), each run's item scores are read
once and the figures each gate names are looked for (``judge.reports.gate_checks``). Every
problem of the file, of its runs and of its figures is collected and raised at once as one
``InvalidInputError`` with its lines; then, and only then, every gate is evaluated. (Job
sizing's gates are another thing: ``server.usecases.gates``.)
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, cast

from judge.errors import InvalidInputError

if TYPE_CHECKING:
    from sqlmodel import Session

    from judge.metrics import ItemScore
    from judge.reports.gate_checks import GateResult
    from judge.reports.gates import Gate, GatesFile, RunRef, Selector
    from judge.reports.sections import Table
    from judge.store.tables import JudgeRun
    from server.tables import GateVerdict


@dataclass(frozen=True)
class GatesReport:
    """The verdict of a gates file: every gate's result, the run each reference named, and
    the seconds the evaluation took."""

    source: str
    results: list[GateResult]
    refs: dict[str, int]
    seconds: float

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.results)

    @property
    def failed(self) -> list[GateResult]:
        return [r for r in self.results if not r.passed]

    def to_json(self) -> dict[str, Any]:
        from judge.reports.gate_report import gates_json

        return gates_json(self.results, self.source, self.refs)

    def junit(self) -> str:
        from judge.reports.gate_report import junit_xml

        return junit_xml(self.results, seconds=self.seconds)

    def table(self) -> Table:
        from judge.reports.gate_report import gates_table

        return gates_table(self.results, self.source)


def read_gates_file(path: str | Path) -> str:
    """The file's text, or one line saying why it cannot be read."""
    file = Path(path)
    try:
        return file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InvalidInputError(f"{file}: no such gates file") from None
    except UnicodeDecodeError as exc:
        raise InvalidInputError(
            f"{file}: not UTF-8 text (byte {exc.start}); save the gates file as UTF-8"
        ) from None
    except OSError as exc:
        raise InvalidInputError(f"{file}: cannot be read: {exc.strerror or exc}") from None


def _select(session: Session, selector: Selector) -> int | None:
    """The newest judge run matching the selector (``judge.reports.gates.Selector``)."""
    from sqlmodel import col, select

    from judge.store.tables import Dataset, GenerationRun, JudgeRun

    query = (
        select(JudgeRun.id)
        .join(GenerationRun, col(GenerationRun.id) == col(JudgeRun.generation_run_id))
        .join(Dataset, col(Dataset.id) == col(GenerationRun.dataset_id))
    )
    if selector.model is not None:
        query = query.where(GenerationRun.model == selector.model)
    if selector.judge_model is not None:
        query = query.where(JudgeRun.model == selector.judge_model)
    if selector.dataset is not None:
        query = query.where(Dataset.name == selector.dataset)
    return session.exec(query.order_by(col(JudgeRun.id).desc()).limit(1)).first()


def resolve_runs(
    session: Session, parsed: GatesFile, gates: Sequence[Gate]
) -> tuple[dict[RunRef, int], list[tuple[int, str]]]:
    """Each run of ``[runs]`` and each reference the gates use -> its judge run id, and a
    problem (at its ``[runs]`` line, else at the first gate using it) for each that names no
    stored run."""
    from judge.reports.gates import Selector, gate_refs
    from judge.store.tables import JudgeRun

    found: dict[RunRef, int] = {}
    problems: list[tuple[int, str]] = []
    for ref in dict.fromkeys([*parsed.runs, *gate_refs(gates)]):
        first = next((g for g in gates if ref in g.runs), None)
        key = {"figure": "run", "paired": "compare", "qualified": "qualified"}
        at = first.line_of(key[first.kind]) if first else 1
        line = parsed.runs_lines.get(str(ref), at) if ref in parsed.runs else at
        target = parsed.runs.get(ref, Selector()) if isinstance(ref, str) else ref
        named = f"runs.{ref}" if ref in parsed.runs else (
            f"gate {first.index} ({first.name!r})" if first else str(ref))  # fmt: skip
        if isinstance(target, Selector):
            run_id = _select(session, target)
            if run_id is None:
                problems.append((line, f"{named}: no judge run is {target.says()}"))
                continue
        else:
            run_id = target
            if session.get(JudgeRun, run_id) is None:
                problems.append(
                    (line, f"{named}: no judge run {run_id} in the store; see `fairjudge runs`")
                )
                continue
        found[ref] = run_id
    return found, problems


class _JudgmentColumns(NamedTuple):
    """The columns of a judgment that ``combine_item_scores`` reads."""

    id: int
    rubric: str
    status: str
    score: int | None
    reason: str | None


class _ItemColumns(NamedTuple):
    id: int
    key: str
    stage: str
    factor: str
    scenario: str


def run_item_scores(session: Session, run: JudgeRun) -> list[ItemScore]:
    """``judge.metrics.item_scores`` of a run, its rows read as plain columns instead of ORM
    objects (half the time or less on a run of thousands of judgments, and a gates file reads
    several runs); the same rows in the same order, combined by the same function."""
    from sqlalchemy import select as sa_select
    from sqlmodel import col

    from judge.metrics import combine_item_scores, truncated_parts
    from judge.store.tables import Item, Judgment

    rows = session.execute(
        sa_select(
            col(Judgment.id), col(Judgment.rubric), col(Judgment.status), col(Judgment.score),
            col(Judgment.reason), col(Item.id), col(Item.key), col(Item.stage),
            col(Item.factor), col(Item.scenario),
        )
        .join(Item)
        .where(col(Judgment.judge_run_id) == run.id)
        .order_by(col(Item.id), col(Judgment.rubric), col(Judgment.sample_index))
    ).all()  # fmt: skip
    pairs = [(_JudgmentColumns(*r[:5]), _ItemColumns(*r[5:])) for r in rows]
    cut = truncated_parts(session, run.generation_run_id)
    return combine_item_scores(cast(Any, pairs), run.aggregation, cut)


def check_gates(session: Session, text: str, *, source: str) -> GatesReport:
    """Every gate of the file in ``text`` evaluated on the stored runs, or one
    ``InvalidInputError`` listing every problem of the file with its line (nothing
    evaluated)."""
    from judge.reports.gate_checks import (
        GateInputs,
        RubricStanding,
        evaluate,
        missing_figures,
        run_figures,
    )
    from judge.reports.gates import QUALIFIED, parse_gates
    from judge.store.tables import JudgeRun
    from server.usecases.standing import run_standing

    start = time.perf_counter()
    parsed = parse_gates(text)
    refs, problems = resolve_runs(session, parsed, parsed.gates)
    problems += parsed.problems
    usable = [g for g in parsed.gates if all(r in refs for r in g.runs)]
    scores = {}
    for run_id in sorted(set(refs.values())):
        run = session.get(JudgeRun, run_id)
        assert run is not None
        scores[run_id] = run_item_scores(session, run)
    standing = {
        run_id: {
            rubric: RubricStanding(rubric, s.validated, s.says)
            for rubric, s in run_standing(session, run_id).items()
        }
        for run_id in sorted({refs[g.runs[0]] for g in usable if g.kind == QUALIFIED})
    }
    inputs = GateInputs(refs, scores, standing)
    figures = {run_id: run_figures(s) for run_id, s in scores.items()}
    problems += missing_figures(usable, inputs, figures)
    if problems:
        raise InvalidInputError(
            f"{source}: {len(problems)} problem(s) in the gates file; nothing was evaluated",
            sorted(set(problems)),
        )
    results = evaluate(parsed.gates, inputs, figures)
    named = {str(k): v for k, v in refs.items()}
    return GatesReport(source, results, named, time.perf_counter() - start)


def check_gates_file(session: Session, path: str | Path) -> GatesReport:
    """``check_gates`` on the file at ``path``."""
    return check_gates(session, read_gates_file(path), source=str(path))


def gate_verdict(
    session: Session, text: str, *, source: str, record: str | None
) -> tuple[GatesReport, int | None]:
    """``check_gates`` on ``text``, the verdict kept under ``record`` unless it is None
    (``record_verdict``): what ``fairjudge gate`` and ``POST /api/v1/gates`` both do. The
    report, and the kept verdict's row id (None: not kept)."""
    report = check_gates(session, text, source=source)
    kept = None if record is None else record_verdict(session, report, record)
    return report, kept


def record_verdict(session: Session, report: GatesReport, name: str) -> int:
    """Keep ``report`` under ``name`` (``server.tables.GateVerdict``) in the caller's session;
    its row id. The API and the dashboard show each name's newest."""
    from server.tables import GateVerdict

    if not name.strip():
        raise InvalidInputError("--record: give a name to keep the verdict under")
    row = GateVerdict(
        name=name, source=report.source, passed=report.passed, n_gates=len(report.results),
        n_failed=len(report.failed), seconds=report.seconds, result=report.to_json(),
    )  # fmt: skip
    session.add(row)
    session.flush()
    assert row.id is not None
    return row.id


def last_verdicts(session: Session, *, name: str | None = None) -> list[GateVerdict]:
    """The newest verdict kept under each name (only ``name``'s when given), newest first;
    NotFoundError when ``name`` has none."""
    from sqlalchemy import func
    from sqlmodel import col, select

    from judge.errors import NotFoundError
    from server.tables import GateVerdict

    newest = select(func.max(GateVerdict.id)).group_by(col(GateVerdict.name))
    if name is not None:
        newest = newest.where(GateVerdict.name == name)
    rows = session.exec(
        select(GateVerdict)
        .where(col(GateVerdict.id).in_(newest))
        .order_by(col(GateVerdict.id).desc())
    ).all()
    if name is not None and not rows:
        raise NotFoundError(f"no gates verdict is kept under {name!r}; see GET /api/v1/gates")
    return list(rows)
