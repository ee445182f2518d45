"""A judge run's standing per rubric (``fairjudge checks standing``): validated, not
validated, failed validation or stale, read from the qualification records
``server.usecases.qualify`` stores. The newest record for the same configuration (base URL
as stored, model, prompt variant, template hash, rubric, scale, temperature) decides, one
made on the same model's answers first; "stale" when ratings of that rubric were stored,
edited or withdrawn after the record. Also the standing beside every figure (reports, CSV
rows, the audits' judge-classified parts) and ``--require-qualified``.

**Whose answers.** A record says which model's answers the judge was qualified on (the
generation run's model). A run judging another model's answers is not validated by it
unless the judge-human relation transports (``annotation.transport.rubric_transport``, on
every stored rating of the rubric on both models' answers, at ``[estimates]
transport_alpha``'s default 0.05): without ratings on the other model's answers, or when
the relation differs, the standing says "not validated: validated on A's answers, not on
B's" with the command that checks it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlmodel import col, select

from judge.errors import UnqualifiedError
from judge.reports.sections import Section, Table
from judge.store.engine import session_scope
from judge.store.queries import JudgeRunInfo, get_generation_run, get_judge_run
from judge.store.tables import JudgeQualification
from server.usecases.qualify import (
    CONFIG_FIELDS,
    FAILED_VALIDATION,
    NOT_VALIDATED,
    STALE,
    VALIDATED,
    aware_utc,
    configuration_of,
    newest_rating_time,
    run_configuration,
    run_rubrics,
)
from server.usecases.runs import judge_run_info

if TYPE_CHECKING:
    from sqlmodel import Session

    from annotation.estimate_results import Estimates
    from annotation.transport import Transport
    from judge.store.tables import JudgeRun
    from server.usecases.agreement import Agreement, AgreementRequest


@dataclass(frozen=True)
class Standing:
    """One rubric's standing for one judge run: ``state`` one of ``STATES`` and the words
    people read (how, when, on how many ratings)."""

    rubric: str
    state: str
    says: str
    qualification: int | None = None
    answers_model: str | None = None  # the model whose answers the judge was qualified on

    @property
    def validated(self) -> bool:
        return self.state == VALIDATED

    def to_dict(self) -> dict[str, Any]:
        return {
            "rubric": self.rubric,
            "state": self.state,
            "says": self.says,
            "qualification": self.qualification,
            "answers_model": self.answers_model,
        }


def _when(t: datetime) -> str:
    return aware_utc(t).strftime("%Y-%m-%d %H:%M UTC")


def _differs(config: dict[str, Any], record: JudgeQualification) -> list[str]:
    mine = configuration_of(record)
    return [k.replace("_", " ") for k in CONFIG_FIELDS if mine[k] != config[k]]


def rubric_standing(session: Session, run: JudgeRun, rubric: str) -> Standing:
    """The standing of ``run`` on ``rubric`` (see the module docstring)."""

    assert run.id is not None
    records = session.exec(
        select(JudgeQualification)
        .where(JudgeQualification.rubric == rubric)
        .order_by(col(JudgeQualification.id).desc())
    ).all()
    if not records:
        return Standing(rubric, NOT_VALIDATED, f"not validated: no qualification for {rubric}")
    config = run_configuration(session, run, rubric)
    matching = [r for r in records if not _differs(config, r)]
    if not matching:
        nearest = records[0]
        return Standing(
            rubric,
            NOT_VALIDATED,
            f"not validated: the qualification of judge run {nearest.judge_run_id} for "
            f"{rubric} covers another configuration ({', '.join(_differs(config, nearest))} "
            "differs)",
        )
    mine = _answers_model(session, run.generation_run_id)
    same = [r for r in matching if _answers_model(session, r.generation_run_id) == mine]
    record = (same or matching)[0]
    assert record.id is not None
    theirs = _answers_model(session, record.generation_run_id)
    how = (
        f"checks qualify on judge run {record.judge_run_id}, on {theirs}'s answers, "
        f"{_when(record.created_at)}, on {record.n_ratings} ratings"
    )
    if record.outcome != "qualified":
        return Standing(rubric, FAILED_VALIDATION, f"failed validation ({how}): {record.line}",
                        record.id, theirs)  # fmt: skip
    newest = newest_rating_time(session, record.generation_run_id, rubric)
    through = aware_utc(record.ratings_through) if record.ratings_through else None
    if newest is not None and (through is None or newest > through):
        return Standing(
            rubric,
            STALE,
            f"stale: ratings of {rubric} changed on {_when(newest)}, after the qualification "
            f"({how}); run `fairjudge checks qualify {record.judge_run_id} --rubric "
            f"{rubric}` again",
            record.id,
            theirs,
        )
    kappa = record.evidence.get("kappa_quadratic", {}).get("value")
    shown = f"; weighted kappa {kappa:.2f}" if isinstance(kappa, (int, float)) else ""
    says = f"validated ({how}; alt-test at epsilon {record.epsilon:g}{shown})"
    if theirs != mine:
        return _across_models(session, run, record, rubric, (theirs, mine), says)
    return Standing(rubric, VALIDATED, says, record.id, theirs)


def _answers_model(session: Session, generation_run_id: int) -> str:
    return get_generation_run(session, generation_run_id).model


TRANSPORT_LEVEL = 0.05
"""The F-test's level for a qualification's transport ([estimates] transport_alpha's default)."""


def _across_models(
    session: Session,
    run: JudgeRun,
    record: JudgeQualification,
    rubric: str,
    models: tuple[str, str],
    validated: str,
) -> Standing:
    """A record learnt on ``models[0]``'s answers, for a run on ``models[1]``'s: validated
    only when the judge-human relation transports (the module docstring)."""
    from annotation.transport import rubric_transport
    from judge.errors import InvalidInputError

    theirs, mine = models
    check = f"`fairjudge estimates {run.id} --transport {record.judge_run_id}`"
    try:
        found = rubric_transport(
            session, [record.judge_run_id, int(run.id or 0)], rubric, level=TRANSPORT_LEVEL
        )
        why = found.verdict(TRANSPORT_LEVEL)
        passed = bool(found.transports)
    except InvalidInputError as exc:
        why, passed = str(exc), False
    if passed:
        return Standing(
            rubric,
            VALIDATED,
            f"{validated}; on {mine}'s answers through the transport check: the judge-human "
            f"relation {why}",
            record.id,
            theirs,
        )
    return Standing(
        rubric,
        NOT_VALIDATED,
        f"not validated: validated on {theirs}'s answers, not on {mine}'s (check transport: "
        f"{check}; {why})",
        record.id,
        theirs,
    )


def run_standing(session: Session, judge_run_id: int) -> dict[str, Standing]:
    """Rubric -> standing, for every rubric the judge run judged."""

    run = get_judge_run(session, judge_run_id)
    return {r: rubric_standing(session, run, r) for r in run_rubrics(session, judge_run_id)}


def standing_json(standing: dict[str, Standing]) -> dict[str, dict[str, Any]]:
    return {rubric: s.to_dict() for rubric, s in standing.items()}


def require_qualified(
    session: Session, judge_run_id: int, rubrics: Sequence[str] | None = None
) -> dict[str, Standing]:
    """The run's standing, or ``UnqualifiedError`` naming the first rubric used (``rubrics``,
    or every rubric the run judged) that is not validated and why."""
    standing = run_standing(session, judge_run_id)
    used = [r for r in (rubrics if rubrics is not None else standing) if r in standing]
    for rubric in used:
        s = standing[rubric]
        if not s.validated:
            raise UnqualifiedError(
                f"judge run {judge_run_id} is not qualified for {rubric}: {s.says} "
                "(--require-qualified)"
            )
    return standing


def standing_in(engine: Any, judge_run_id: int) -> dict[str, Standing]:
    """``run_standing`` in a session of its own."""

    with session_scope(engine) as session:
        return run_standing(session, judge_run_id)


def require_in(engine: Any, judge_run_id: int, rubrics: Sequence[str] | None = None) -> None:
    """``require_qualified`` in a session of its own."""

    with session_scope(engine) as session:
        require_qualified(session, judge_run_id, rubrics)


STANDING_COLUMN = "judge_standing"
"""The column every CSV row naming a rubric gets in a judge run's report."""


def standing_note(standing: dict[str, Standing]) -> str:
    """One line for the top of a report: how many rubrics are validated."""
    if not standing:
        return "Judge standing: the run judged no rubric yet."
    valid = [r for r, s in standing.items() if s.validated]
    if len(valid) == len(standing):
        return f"Judge standing: validated for every rubric ({', '.join(valid)})."
    if not valid:
        return (
            "Judge standing: NOT VALIDATED for any rubric it scored; its figures are not "
            "verdicts until it is qualified (`fairjudge checks qualify`)."
        )
    rest = [r for r in standing if r not in valid]
    return (
        f"Judge standing: validated for {', '.join(valid)}; not for {', '.join(rest)} "
        "(see each rubric's line)."
    )


def standing_section(standing: dict[str, Standing]) -> Any:
    """The report's first section: each rubric's standing, next to the figures that
    follow (report.json's ``standing``; each CSV row naming a rubric gets ``judge_standing``
    from ``mark_rows``, so the report's first CSV stays its metrics)."""

    rows = [[r, s.state, s.says] for r, s in standing.items()]
    return Section(
        title="Judge standing",
        json_key="standing",
        payload={"summary": standing_note(standing), "rubrics": standing_json(standing)},
        tables=[Table("Judge standing per rubric", ["rubric", "standing", "detail"], rows)],
        notes=[standing_note(standing)],
    )  # fmt: skip


def state_of(standing: dict[str, Standing], rubric: str) -> str:
    """``rubric``'s state in ``standing``; "not validated" for a rubric it lacks."""
    s = standing.get(rubric)
    return s.state if s else NOT_VALIDATED


def _row_rubric(row: dict[str, Any]) -> str | None:
    """The rubric a CSV row names: its ``rubric``, else the rubric of its stage metric
    (``metric``: a name of ``judge.metrics.STAGE_METRICS``)."""
    from judge.metrics import STAGE_METRICS

    rubric = row.get("rubric")
    if isinstance(rubric, str):
        return rubric
    metric = row.get("metric")
    return next((m.rubric for m in STAGE_METRICS if m.name == metric), None)


def mark_rows(sections: Sequence[Any], standing: dict[str, Standing]) -> None:
    """Give every CSV row of ``sections`` that names a rubric its standing, in place, so a
    figure exported alone still says whether its judge was validated."""
    for section in sections:
        for rows in section.csv.values():
            for row in rows:
                rubric = row.get("rubric")
                if isinstance(rubric, str) and STANDING_COLUMN not in row:
                    row[STANDING_COLUMN] = state_of(standing, rubric)


def mark_compared_rows(
    sections: Sequence[Any], standings: dict[int, dict[str, Standing]], pair: Sequence[int] = ()
) -> None:
    """``mark_rows`` for a comparison of judge runs (``standings``: run -> its standing):
    a row naming its ``judge_run_id`` gets that run's standing; a paired row (A against B,
    ``pair``) gets ``judge_standing_a`` and ``judge_standing_b``. The rubric is the row's,
    or its stage metric's."""
    for section in sections:
        for rows in section.csv.values():
            for row in rows:
                rubric = _row_rubric(row)
                if rubric is None or STANDING_COLUMN in row:
                    continue
                run = row.get("judge_run_id")
                if isinstance(run, int) and run in standings:
                    row[STANDING_COLUMN] = state_of(standings[run], rubric)
                elif len(pair) == 2:
                    for side, run_id in zip(("a", "b"), pair, strict=True):
                        row[f"{STANDING_COLUMN}_{side}"] = state_of(standings[run_id], rubric)


def _target_rubric(name: str) -> str:
    """The rubric of an estimate's target: a stage metric's, else the target is a rubric."""
    return _row_rubric({"metric": name}) or name


def estimates_json(payload: dict[str, Any], standing: dict[str, Standing]) -> dict[str, Any]:
    """The estimates' JSON (``Estimates.to_dict()``) with the run's ``standing`` per rubric
    and each cell's (and the gap's) ``judge_standing``, as the report's CSV rows have it."""
    out = {**payload, "standing": standing_json(standing)}
    for key in ("metrics", "rubrics"):
        out[key] = [{**c, STANDING_COLUMN: state_of(standing, c["rubric"])} for c in payload[key]]
    gap = payload.get("gap")
    if gap is not None:
        out["gap"] = {**gap, STANDING_COLUMN: state_of(standing, _target_rubric(gap["target"]))}
    return out


def transport_json(
    payload: dict[str, Any], standings: dict[int, dict[str, Standing]]
) -> dict[str, Any]:
    """The transport's JSON (``Transport.to_dict()``) with each run's ``standing`` (by judge
    run, then rubric) and each model's estimate's ``judge_standing``."""
    targets = []
    for t in payload["targets"]:
        rubric = _target_rubric(t["target"])
        models = [
            {**m, STANDING_COLUMN: state_of(standings.get(m["run"]["judge_run"], {}), rubric)}
            for m in t["models"]
        ]
        targets.append({**t, "models": models})
    runs = {str(run): standing_json(s) for run, s in standings.items()}
    return {**payload, "targets": targets, "standing": runs}


def estimates_with_standing(session: Session, result: Estimates) -> dict[str, Any]:
    """``result.to_dict()`` with the judge run's standing per rubric and beside each cell
    (``estimates_json``): the JSON of the CLI and the API."""
    return estimates_json(result.to_dict(), run_standing(session, result.judge_run))


def transport_with_standing(session: Session, result: Transport) -> dict[str, Any]:
    """``result.to_dict()`` with every compared run's standing
    (``transport_json``)."""
    standings = {r.judge_run: run_standing(session, r.judge_run) for r in result.runs}
    return transport_json(result.to_dict(), standings)


def estimates_with_standing_in(engine: Any, result: Estimates) -> dict[str, Any]:
    """``estimates_with_standing`` in a session of its own."""
    with session_scope(engine) as session:
        return estimates_with_standing(session, result)


def transport_with_standing_in(engine: Any, result: Transport) -> dict[str, Any]:
    """``transport_with_standing`` in a session of its own."""
    with session_scope(engine) as session:
        return transport_with_standing(session, result)


def agreement_with_standing(session: Session, request: AgreementRequest) -> Agreement:
    """``server.usecases.agreement.agreement`` with every judge run's standing, which its
    ``to_dict`` puts in each judge's entry."""
    from server.usecases.agreement import agreement

    found = agreement(session, request)
    rubrics = found.reliability.rubrics.values()
    runs = sorted({j.judge_run for entry in rubrics for j in entry.judges})
    return replace(found, standing={r: standing_json(run_standing(session, r)) for r in runs})


def agreement_with_standing_in(engine: Any, request: AgreementRequest) -> Agreement:
    """``agreement_with_standing`` in a session of its own."""

    with session_scope(engine) as session:
        return agreement_with_standing(session, request)


@dataclass(frozen=True)
class JudgeRunStanding(JudgeRunInfo):
    """A judge run (``JudgeRunInfo``) with its standing per rubric: what the API's run
    route gives."""

    standing: dict[str, Standing] = field(default_factory=dict)


def judge_run_with_standing(session: Session, judge_run_id: int) -> JudgeRunStanding:
    """The run's listing and its standing per rubric; NotFoundError for an unknown run."""

    info = judge_run_info(session, judge_run_id)
    return JudgeRunStanding(**asdict(info), standing=run_standing(session, judge_run_id))


JUDGED_PARTS = (
    "not validated: no qualification covers a judge's classes of the award audit's follow-up "
    "explanations (qualifications cover judge runs' rubrics); compare them with people's "
    "classes in the agreement table before reading them as findings"
)


def judged_parts_standing(sources: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The standing of each judge that classified an audit's answers (``judge:...`` sources;
    people's own classes need none): not validated, with the reason."""
    return {
        s: {"state": NOT_VALIDATED, "says": JUDGED_PARTS} for s in sources if s.startswith("judge:")
    }


def judged_parts_section(standing: dict[str, dict[str, Any]]) -> Any:
    """The audit report's note, placed before the follow-up figures a judge classified."""

    return Section(
        title="Judge standing (follow-up classes)",
        json_key="judge_standing",
        payload={"sources": standing},
        notes=[f"{source}: {v['says']}" for source, v in standing.items()],
    )


def require_judged_parts(sources: Sequence[str], what: str) -> None:
    """``UnqualifiedError`` when a judge classified any part of ``what`` (an audit run)."""
    judged = [s for s in sources if s.startswith("judge:")]
    if judged:
        raise UnqualifiedError(
            f"{what}'s follow-up classes by {', '.join(judged)} are not validated: no "
            "qualification covers a judge's classes of audit answers (--require-qualified)"
        )
