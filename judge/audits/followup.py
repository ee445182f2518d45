"""The award audit's follow-up explanations: classes from a judge model and from people, the
chi-square test of chosen group x class, and how well the judge agrees with the people.

A judge's reply is read as the judge's grades are (``judge.grading.parsing``): a reply whose
class cannot be read is stored as ``unparsed`` with its raw text, never guessed. People's
classes come from a CSV (``answer_id,label``) written by ``export_rows``; the exported rows
do not say which group the chosen student belongs to.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from judge.audits.award import FOLLOWUP_CLASSES, FollowupAnalysis, analyze_followup
from judge.audits.base import ANSWERED, FOLLOWUP
from judge.costs import estimate, measured_tokens_per_char
from judge.errors import InvalidInputError
from judge.models.cache import CallCacheView, CallOutcome, cached_complete, call_key
from judge.models.client import ModelClient
from judge.prices import Prices
from judge.progress import Progress
from judge.prompts import PromptBook
from judge.runs import Row, RunSummary, run_lease, store_results
from judge.stats.baseline import Flag
from judge.stats.coefficient import DEFAULT_OPTIONS, BootstrapOptions, Coefficient
from judge.stats.matrix import RatingMatrix
from judge.stats.raters import RaterPairAgreement, krippendorff_alphas, pairwise_kappa
from judge.store.engine import session_scope
from judge.store.tables import AuditAnswer, AuditLabel, AuditRun, utcnow

LABELLED = "labelled"
UNPARSED = "unparsed"
ERROR = "error"
CODES = {name: code for code, name in enumerate(FOLLOWUP_CLASSES, start=1)}
EXPORT_COLUMNS = ("answer_id", "level", "winner", "other", "explanation", "label")
CLASS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "explanation": {"type": "string"},
        "class": {"type": "string", "enum": list(FOLLOWUP_CLASSES)},
    },
    "required": ["explanation", "class"],
    "additionalProperties": False,
}
_WORD = re.compile(r"\b(" + "|".join(FOLLOWUP_CLASSES) + r")\b", re.IGNORECASE)


def judge_source(client: ModelClient) -> str:
    return f"judge:{client.name}/{client.model}"


def human_source(annotator: str) -> str:
    return f"human:{annotator}"


@dataclass(frozen=True)
class ClassReading:
    status: str  # labelled or unparsed
    label: str | None
    explanation: str | None
    reason: str | None = None


def read_class(text: str | None) -> ClassReading:
    """The class a judge's reply gives: a JSON object's ``class``, else the one class word on
    the reply's last non-empty line; anything else is unparsed.

    >>> read_class('{"explanation": "takes it back", "class": "indecisive"}').label
    'indecisive'
    >>> read_class("It cites steadier answers.\\nClass: Justified").label
    'justified'
    >>> read_class("indecisive or irrational, hard to say").status
    'unparsed'
    """
    if text is None or not text.strip():
        return ClassReading(UNPARSED, None, None, "empty reply")
    for line in reversed(text.strip().splitlines()):
        start = line.find("{")
        if start < 0:
            continue
        try:
            obj = json.loads(line[start : line.rfind("}") + 1])
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict) and "class" in obj:
            value = str(obj["class"]).strip().lower()
            explanation = obj.get("explanation")
            if value in FOLLOWUP_CLASSES:
                return ClassReading(
                    LABELLED, value, None if explanation is None else str(explanation)
                )
            return ClassReading(UNPARSED, None, None, f"class {value!r} is not one of the three")
    last = text.strip().splitlines()[-1]
    words = {w.lower() for w in _WORD.findall(last)}
    if len(words) == 1:
        return ClassReading(LABELLED, words.pop(), text.strip())
    reason = "several classes named" if len(words) > 1 else "no class named on the last line"
    return ClassReading(UNPARSED, None, None, reason)


def classify_followups(
    engine: Engine,
    client: ModelClient,
    book: PromptBook,
    run_id: int,
    *,
    temperature: float = 0.0,
    max_tokens: int = 256,
    progress: Progress | None = None,
) -> RunSummary:
    """Ask the judge ``client`` for the class of every follow-up explanation of the run it has
    not classified yet. Failed calls are asked again; a reply whose class could not be read
    stays stored with its raw text (asked again, the call cache would give the same reply)."""
    source = judge_source(client)
    with run_lease(engine, AuditRun.run_kind, run_id):
        with session_scope(engine) as session:
            check_award_run(session, run_id)
            for old in session.exec(
                select(AuditLabel).where(
                    AuditLabel.run_id == run_id,
                    AuditLabel.source == source,
                    AuditLabel.status == ERROR,
                )
            ):
                session.delete(old)
            session.flush()
            tasks = _to_classify(session, book, run_id, source)
        cache = CallCacheView(engine, client.model)

        def work(task: tuple[int | None, list[dict[str, str]]]) -> tuple[Row, list[CallOutcome]]:
            answer_id, messages = task
            outcome = cached_complete(
                client,
                cache,
                messages,
                sample_index=0,
                temperature=temperature,
                max_tokens=max_tokens,
                schema=CLASS_SCHEMA,
            )
            row: Row = {
                "answer_id": answer_id,
                "run_id": run_id,
                "source": source,
                "label": None,
                "explanation": None,
                "raw_text": None,
                "cache_key": outcome.key,
                "created_at": utcnow(),
            }
            if outcome.failure is not None:
                row.update(status=ERROR, explanation=outcome.failure.reason)
                return row, [outcome]
            assert outcome.completion is not None
            reading = read_class(outcome.completion.text)
            row.update(
                status=reading.status,
                label=reading.label,
                explanation=reading.explanation or reading.reason,
                raw_text=outcome.completion.text,
            )
            return row, [outcome]

        return store_results(
            engine,
            AuditLabel.__table__,  # type: ignore[attr-defined]
            run_id,
            tasks,
            work,
            concurrency=client.config.concurrency,
            label="status",
            progress=progress,
        )


def _to_classify(
    session: Session, book: PromptBook, run_id: int, source: str
) -> list[tuple[int | None, list[dict[str, str]]]]:
    """The run's answered follow-ups ``source`` has no class for (a failed call counts as
    none: it is asked again), each with the prompt that asks for its class."""
    done = set(
        session.exec(
            select(AuditLabel.answer_id).where(
                AuditLabel.run_id == run_id, AuditLabel.source == source, AuditLabel.status != ERROR
            )
        )
    )
    tasks = []
    for answer in session.exec(_followups(run_id)):
        if answer.id in done:
            continue
        meta = dict(answer.meta or {})
        prompt = book.followup_class_prompt(
            winner=meta["winner"],
            other=meta["other"],
            total=int(meta["level"]),
            items=int(meta.get("items", 20)),
            explanation=answer.raw_text or "",
        )
        tasks.append((answer.id, prompt.messages))
    return tasks


def classify_dry_run(
    engine: Engine,
    client: ModelClient,
    book: PromptBook,
    run_id: int,
    *,
    temperature: float = 0.0,
    max_tokens: int = 256,
    prices: Prices | None = None,
) -> dict[str, Any]:
    """What ``classify_followups`` with these settings would send and cost, nothing sent or
    stored: the follow-ups still to classify, those the call cache answers, and an estimate
    of the rest (``judge.costs``: one call each, replies at most ``max_tokens``)."""
    with session_scope(engine) as session:
        check_award_run(session, run_id)
        tasks = _to_classify(session, book, run_id, judge_source(client))
        ratio = measured_tokens_per_char(session, client.model)
    cache = CallCacheView(engine, client.model)
    to_send = [
        messages
        for _, messages in tasks
        if not cache.has(
            call_key(
                client,
                messages,
                sample_index=0,
                temperature=temperature,
                max_tokens=max_tokens,
                schema=CLASS_SCHEMA,
            )  # fmt: skip
        )
    ]
    guess = estimate(
        to_send, max_tokens=max_tokens, prices=prices, tokens_per_char=ratio, repairs=False
    )
    return {
        "audit_run_id": run_id,
        "endpoint": client.name,
        "model": client.model,
        "followups_to_classify": len(tasks),
        "cached_calls": len(tasks) - len(to_send),
        "calls_to_send": len(to_send),
        "estimate": guess.to_json(),
    }


def _followups(run_id: int) -> Any:
    return (
        select(AuditAnswer)
        .where(
            AuditAnswer.run_id == run_id,
            AuditAnswer.turn == FOLLOWUP,
            AuditAnswer.status == ANSWERED,
        )
        .order_by(col(AuditAnswer.id))
    )


def followup_answers(session: Session, run_id: int) -> list[AuditAnswer]:
    """An award run's answered follow-ups, oldest first (the ones ``export_rows`` lists)."""
    check_award_run(session, run_id)
    return list(session.exec(_followups(run_id)))


def check_award_run(session: Session, run_id: int) -> AuditRun:
    run = session.get(AuditRun, run_id)
    if run is None:
        raise InvalidInputError(f"no audit run {run_id}; `fairjudge audit runs` lists them")
    if run.suite != "award":
        raise InvalidInputError(
            f"audit run {run_id} is a {run.suite} audit; only award audits have follow-ups"
        )
    return run


def export_rows(session: Session, run_id: int) -> list[dict[str, Any]]:
    """The run's follow-up explanations for people to classify (fill in ``label``). The
    chosen student's group is left out, so it cannot sway the reader."""
    check_award_run(session, run_id)
    return [
        {
            "answer_id": a.id,
            "level": a.meta["level"],
            "winner": a.meta["winner"],
            "other": a.meta["other"],
            "explanation": a.raw_text,
            "label": "",
        }
        for a in session.exec(_followups(run_id))
    ]


def import_labels(engine: Engine, run_id: int, path: Path | str, annotator: str) -> dict[str, int]:
    """Store one person's classes from a CSV with columns ``answer_id`` and ``label`` (other
    columns ignored; a blank label skips the row): ``store_labels``, with problems named by
    the file's line."""
    try:
        with Path(path).open(newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            header = reader.fieldnames or []
            rows = list(reader)
    except OSError as exc:
        raise InvalidInputError(f"cannot read {path}: {exc.strerror or exc}") from None
    if "answer_id" not in header or "label" not in header:
        raise InvalidInputError(f"{path}: the header needs answer_id and label, got {header}")
    entries = [
        (line, row.get("answer_id"), row.get("label") or "")
        for line, row in enumerate(rows, start=2)  # line 1 is the header
        if (row.get("label") or "").strip()
    ]
    return store_labels(engine, run_id, annotator, entries, what=f"{path}: rows to fix")


def store_labels(
    engine: Engine,
    run_id: int,
    annotator: str,
    entries: Sequence[tuple[int, Any, str]],
    *,
    what: str = "labels to fix",
) -> dict[str, int]:
    """Store one person's classes given as ``(position, answer_id, label)`` entries. The whole
    batch is checked first: any bad entry refuses it all (``InvalidInputError`` whose
    problems name each entry by its position, headed by ``what``). A class given again
    replaces the person's earlier one."""
    if not annotator.strip():
        raise InvalidInputError("name the annotator whose classes these are")
    source = human_source(annotator.strip())
    with session_scope(engine) as session:
        check_award_run(session, run_id)
        known = {a.id for a in session.exec(_followups(run_id))}
        problems: list[tuple[int, str]] = []
        wanted: dict[int, str] = {}
        for where, raw_id, raw_label in entries:
            label = raw_label.strip().lower()
            try:
                answer_id = int(raw_id)
            except (TypeError, ValueError):
                problems.append((where, f"answer_id {raw_id!r} is not a number"))
                continue
            if answer_id not in known:
                problems.append((where, f"answer {answer_id} is not a follow-up of run {run_id}"))
            elif label not in FOLLOWUP_CLASSES:
                problems.append((where, f"label {label!r} is not one of {list(FOLLOWUP_CLASSES)}"))
            elif wanted.get(answer_id, label) != label:
                problems.append((where, f"answer {answer_id} is given two different labels"))
            else:
                wanted[answer_id] = label
        if problems:
            raise InvalidInputError(what, problems)
        have = {
            lab.answer_id: lab
            for lab in session.exec(
                select(AuditLabel).where(AuditLabel.run_id == run_id, AuditLabel.source == source)
            )
        }
        added = changed = 0
        for answer_id, label in wanted.items():
            old = have.get(answer_id)
            if old is None:
                session.add(
                    AuditLabel(answer_id=answer_id, run_id=run_id, source=source,
                               status=LABELLED, label=label)
                )  # fmt: skip
                added += 1
            elif old.label != label:
                old.label, old.created_at = label, utcnow()
                changed += 1
    return {"added": added, "changed": changed, "unchanged": len(wanted) - added - changed}


def labels_by_source(session: Session, run_id: int) -> dict[str, dict[int, str]]:
    """Every source's readable classes: source -> answer id -> class."""
    out: dict[str, dict[int, str]] = {}
    for lab in session.exec(
        select(AuditLabel).where(AuditLabel.run_id == run_id, AuditLabel.status == LABELLED)
    ):
        assert lab.label is not None
        out.setdefault(lab.source, {})[lab.answer_id] = lab.label
    return out


def label_counts(session: Session, run_id: int) -> dict[str, dict[str, int]]:
    """Per source, how many classes were read and how many replies were not."""
    out: dict[str, dict[str, int]] = {}
    for lab in session.exec(select(AuditLabel).where(AuditLabel.run_id == run_id)):
        counts = out.setdefault(lab.source, {})
        counts[lab.status] = counts.get(lab.status, 0) + 1
    return out


def followup_analysis(session: Session, run_id: int, source: str) -> FollowupAnalysis:
    """The chi-square tests of chosen group x class on ``source``'s classes."""
    labels = labels_by_source(session, run_id).get(source)
    if not labels:
        raise InvalidInputError(f"audit run {run_id} has no follow-up classes from {source}")
    rows = [
        (int(a.meta["level"]), str(a.meta["chosen"]), labels[a.id])
        for a in session.exec(_followups(run_id))
        if a.id in labels
    ]
    return analyze_followup(rows)


BESIDE_CHANCE = ("exact_agreement", "majority_baseline", "kappa", "ac1")
"""A judge's classes against a person's: raw agreement beside the majority baseline, kappa
(unweighted: the classes have no order) and Gwet's AC1, as ``judge_vs_human`` gives them."""


@dataclass(frozen=True)
class JudgeVsPerson:
    """One judge's classes against one person's on the follow-ups both classified: the
    coefficients of ``BESIDE_CHANCE``, the person's most frequent class and the flags
    (``judge.stats.baseline``) that say when the agreement flatters the judge."""

    judge: str
    person: str
    n: int
    coefficients: dict[str, Coefficient]
    majority_class: str | None
    flags: list[Flag]

    def to_dict(self) -> dict[str, Any]:
        return {
            "judge": self.judge,
            "person": self.person,
            "n": self.n,
            **{k: c.to_dict() for k, c in self.coefficients.items()},
            "majority_class": self.majority_class,
            "flags": [f.to_dict() for f in self.flags],
        }


def judge_vs_people(
    by_source: dict[str, dict[int, str]], options: BootstrapOptions
) -> list[JudgeVsPerson]:
    """Every judge source (``judge:...``) against every other source (people's), on the
    follow-ups both classified; a pair with none in common is left out."""
    from judge.stats.baseline import agreement_flags
    from judge.stats.pairs import pair_agreement

    names = {code: name for name, code in CODES.items()}
    out = []
    for judge in sorted(s for s in by_source if s.startswith("judge:")):
        for person in sorted(s for s in by_source if not s.startswith("judge:")):
            shared = sorted(set(by_source[judge]) & set(by_source[person]))
            if not shared:
                continue
            x = [CODES[by_source[judge][i]] for i in shared]
            y = [CODES[by_source[person][i]] for i in shared]
            found = pair_agreement(x, y, options=options, labels=tuple(CODES.values()),
                                   sides=(judge, person))  # fmt: skip
            coefficients = {k: found.coefficients[k] for k in BESIDE_CHANCE}
            majority = found.majority_category
            named = names.get(majority) if majority is not None else None
            # The flags' own words name no code (the classes have no number).
            flags = agreement_flags(found.coefficients, None)
            out.append(JudgeVsPerson(judge, person, len(shared), coefficients, named, flags))
    return out


@dataclass(frozen=True)
class LabelAgreement:
    """How the sources' classes agree: Krippendorff's alpha (nominal) over all sources and
    Cohen's kappa (unweighted) for every pair, with bootstrap CIs; and each judge against
    each person beside chance (``judge_vs_people``)."""

    sources: list[str]
    alpha_nominal: Coefficient
    pairwise: list[RaterPairAgreement]
    judge_vs_people: list[JudgeVsPerson] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "sources": self.sources,
            "alpha_nominal": self.alpha_nominal.to_dict(),
            # Unweighted kappa only: the classes have no order, so a weighted kappa means
            # nothing here.
            "pairwise_kappa": [
                {
                    "raters": list(p.raters),
                    "n": p.n,
                    "kappa": p.coefficients["kappa"].to_dict()
                    if "kappa" in p.coefficients
                    else None,
                }
                for p in self.pairwise
            ],  # fmt: skip
            "judge_vs_people": [j.to_dict() for j in self.judge_vs_people],
        }


def label_agreement(
    session: Session, run_id: int, *, options: BootstrapOptions = DEFAULT_OPTIONS
) -> LabelAgreement:
    """Agreement on the classes among every source that gave some (judges and people)."""
    by_source = labels_by_source(session, run_id)
    if len(by_source) < 2:
        raise InvalidInputError(
            f"audit run {run_id} has follow-up classes from {len(by_source)} source(s); "
            "agreement needs two (a judge and a person, or two people)"
        )
    items, raters, codes = _long(by_source)
    matrix = RatingMatrix.from_long(items, raters, codes)
    labels = tuple(CODES.values())
    alphas = krippendorff_alphas(matrix, options=options, labels=labels, warn=False)
    pairs = pairwise_kappa(matrix, options=options, labels=labels, warn=False)
    versus = judge_vs_people(by_source, options)
    return LabelAgreement(sorted(by_source), alphas["alpha_nominal"], pairs, versus)


def _long(by_source: dict[str, dict[int, str]]) -> tuple[list[int], list[str], np.ndarray]:
    items: list[int] = []
    raters: list[str] = []
    codes: list[int] = []
    for source, labels in by_source.items():
        for answer_id, label in labels.items():
            items.append(answer_id)
            raters.append(source)
            codes.append(CODES[label])
    return items, raters, np.asarray(codes, dtype=float)


def sources(session: Session, run_id: int) -> Sequence[str]:
    return sorted(labels_by_source(session, run_id))
