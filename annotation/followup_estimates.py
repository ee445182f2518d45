"""The award audit's follow-up classes corrected by people's classes: for one award run, the
share of follow-up explanations in each class (indecisive, justified, irrational), overall
and per chosen group, three ways side by side, and the gap between the two chosen groups.

- **judge-only**: the judge's classes of every follow-up whose class could be read. Its
  interval is narrow, but it measures what the judge says, bias included.
- **human-only**: people's classes of the follow-ups they classified.
- **prediction-powered** (PPI++, ``judge.stats.ppi``): ``y`` is 100 where people put the
  follow-up in the class (else 0), ``yhat`` the judge's 100/0 on the same follow-ups, and
  ``yhat_unlabelled`` the judge's 100/0 on the follow-ups it classified readably that people
  did not (ppi_py's convention: each follow-up in one set only). Where people classified
  every follow-up the judge classified in a cell, it is the people's share (``lam`` 0).

The chosen group is the group of the student the model under test chose in its first answer
(``meta["chosen"]``, 'A' or 'B', as ``judge.audits.followup.followup_analysis`` groups them);
the gap is A's share minus B's, each group tuned on its own data (``ppi_gap``), with the
interval of the difference itself. Values are percent (0-100; a gap in percentage points);
intervals are normal (``1 - alpha``), Student t under 30 classified follow-ups (``n - 1``
degrees of freedom; for a gap the fewer of the two groups'), and clipped to [0, 100]
([-100, 100] for a gap).

**Several people on one follow-up.** Each person's class counts as a fraction of a vote: a
follow-up two people classified, one 'justified' and one 'irrational', is 50 justified and 50
irrational. No tie needs breaking, nothing is thrown away, and with one person per follow-up
it is that person's class. The human share then estimates the class a person picked at
random among the annotators would give.

**Design.** People's classes come from ``import-labels``, the labels route or a Label Studio
follow-up campaign; none of them stores the probability with which a follow-up was chosen.
So: where people classified *every* answered follow-up, human-only is the census (its interval
is for the model's behaviour beyond these prompts) and prediction-powered adds nothing, as
nothing is left for the judge to fill in; it is given as missing with that reason. Where they
classified a subset, human-only and prediction-powered are refused with the reason unless
``assume_random`` says to treat the subset as a simple random sample (design "assumed
random"). That assumption is checked as ``estimates --assume-random`` checks it
(``annotation.estimate_checks.check_values``): per class, the judge's 0/100 for the class on
the follow-ups people classified against those on the others (standardised difference and
Welch's t, Bonferroni over the classes, the bounds of ``[estimates]``). A subset unlike the
rest (people classified the follow-ups the judge called justified, say) is refused with the
numbers, unless ``accept_unrepresentative`` says to use it all the same, which the design's
name then says. Judge replies whose class could not be read (``unparsed``, or calls that failed)
are left out of every estimate and counted; a follow-up people classified but the judge did
not readably is used by human-only, not by prediction-powered, and counted too.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from sqlmodel import Session, select

from annotation.estimate_checks import Representativeness, check_values, guarded
from annotation.estimates import (
    HUMAN_ONLY,
    JUDGE_ONLY,
    PPI,
    Design,
    Estimate,
    finite,
    judge_only_estimate,
)
from judge.audits.award import FOLLOWUP_CLASSES
from judge.audits.followup import LABELLED, UNPARSED, followup_answers
from judge.config_estimates import EstimatesConfig
from judge.errors import InvalidInputError, NotFoundError
from judge.reports.sections import Table
from judge.stats.ppi import SMALL_N, Group, classical_mean, gap_df, interval, ppi_gap, ppi_mean
from judge.store.tables import AuditAnswer, AuditLabel

ALL = "all"
SIDES = ("A", "B")
BOUNDS = (0.0, 100.0)
JUDGED = "every follow-up the judge classified"
CENSUS = "census"
ASSUMED = "assumed random"
CENSUS_REASON = (
    "people classified every follow-up: the human-only share is the census, and "
    "prediction-powered adds nothing (no follow-up is left for the judge to fill in)"
)
VOTES = (
    "several people on one follow-up: each person's class counts as a fraction of a vote "
    "(two people, justified and irrational: 50 % each)"
)


# ---------------------------------------------------------------- results


@dataclass(frozen=True)
class ClassShare:
    """One class's share of the follow-ups of one cell: every follow-up (``chosen`` "all")
    or those after the model chose group A or B. ``followups``: the cell's answered
    follow-ups, classified or not."""

    chosen: str  # "all", "A" or "B"
    group: str  # "all", or the chosen group's label from the names file
    label: str  # indecisive, justified or irrational
    followups: int
    judge_only: Estimate
    human_only: Estimate
    prediction_powered: Estimate

    @property
    def best(self) -> Estimate:
        """Prediction-powered where it is given, human-only for a census, else judge-only."""
        return _best(self.judge_only, self.human_only, self.prediction_powered)

    def to_dict(self) -> dict[str, Any]:
        return {**finite(asdict(self)), "best": self.best.brief()}


@dataclass(frozen=True)
class ClassGap:
    """Group A's share of a class minus group B's, three ways (``n``, ``N``: both groups)."""

    label: str
    a: str  # group A's label
    b: str
    judge_only: Estimate
    human_only: Estimate
    prediction_powered: Estimate

    @property
    def best(self) -> Estimate:
        return _best(self.judge_only, self.human_only, self.prediction_powered)

    def to_dict(self) -> dict[str, Any]:
        return {**finite(asdict(self)), "best": self.best.brief()}


def _rated_text(n: int) -> str:
    """A row's count of people's follow-ups, marked under ``SMALL_N``: '18 (< 30)'."""
    return f"{n} (< {SMALL_N})" if 0 < n < SMALL_N else str(n)


def _best(judge_only: Estimate, human_only: Estimate, ppi: Estimate) -> Estimate:
    if ppi.value is not None:
        return ppi
    if human_only.value is not None and human_only.design == CENSUS:
        return human_only
    return judge_only


@dataclass(frozen=True)
class FollowupCounts:
    """What the estimates read: follow-ups, the judge's classes by outcome, people's."""

    followups: int  # answered follow-ups of the run
    judge_classified: int  # a class could be read
    judge_unparsed: int  # the judge replied, its class could not be read (left out)
    judge_failed: int  # the call failed for good (left out; `classify` sends it again)
    judge_missing: int  # never sent to the judge
    people: list[str]  # annotators who classified some
    human_classified: int  # follow-ups with at least one person's class
    human_labels: int  # classes people gave, all together
    several_people: int  # follow-ups classified by more than one person
    human_unjudged: int  # classified by people, no readable judge class: not in PPI


@dataclass(frozen=True)
class FollowupEstimates:
    """An award run's follow-up class shares, three ways, per cell and class, and the
    gaps between the chosen groups."""

    audit_run: int
    judge: str  # the judge's source, judge:<endpoint>/<model>
    groups: dict[str, str]  # "A" and "B" -> the groups' labels
    alpha: float
    design: Design
    counts: FollowupCounts
    shares: list[ClassShare]
    gaps: list[ClassGap]

    def to_dict(self) -> dict[str, Any]:
        design = {k: getattr(self.design, k) for k in ("name", "usable", "description", "reason")}
        design["representativeness"] = finite(self.design.checked)
        return {
            "audit_run": self.audit_run,
            "judge": self.judge,
            "groups": dict(self.groups),
            "alpha": self.alpha,
            "design": design,
            "people_combined": VOTES,
            "counts": asdict(self.counts),
            "shares": [s.to_dict() for s in self.shares],
            "gaps": [g.to_dict() for g in self.gaps],
        }

    def notes(self) -> list[str]:
        c, level = self.counts, f"{100 * (1 - self.alpha):g} %"
        notes = [
            f"design: {self.design.name} ({self.design.description})",
            f"{c.followups} follow-up(s); the judge ({self.judge}) classified {c.judge_classified}"
            f", {c.judge_unparsed} reply(ies) unreadable, {c.judge_failed} call(s) failed, "
            f"{c.judge_missing} not sent (all left out); people ({len(c.people)}) classified "
            f"{c.human_classified}, {c.human_unjudged} of them without a readable judge class "
            "(human-only only)",
            f"{level} intervals (normal; Student t under {SMALL_N} classified follow-ups), "
            "clipped to [0, 100]. judge-only: its bias included; human-only: the follow-ups "
            "people classified; prediction-powered: the judge's classes of the others, "
            "corrected by people's on the follow-ups both classified (PPI++).",
            VOTES,
        ]
        estimates = [e for s in self.shares for e in (s.human_only, s.prediction_powered)]
        estimates += [e for g in self.gaps for e in (g.human_only, g.prediction_powered)]
        counted = Counter(e.reason for e in estimates if e.reason)
        notes += [f"n/a in {k} estimate(s): {why}" for why, k in counted.most_common()]
        small = sum(e.small_sample for e in estimates if e.value is not None)
        if small:
            notes.append(
                f"{small} estimate(s) rest on fewer than {SMALL_N} classified follow-ups per "
                f"group (rows marked '(< {SMALL_N})'): their intervals are t intervals, and "
                "approximate"
            )
        return notes

    def tables(self) -> list[Table]:
        """The shares and the gaps as report tables (the first carries the notes)."""
        rows = []
        for s in self.shares:
            ppi = s.prediction_powered
            effective = "" if ppi.effective_n is None else f"{ppi.effective_n:.0f}"
            rows.append(
                [s.group, s.label, s.judge_only.text(), s.human_only.text(), ppi.text(),
                 _rated_text(s.human_only.n), str(s.judge_only.N), effective]
            )  # fmt: skip
        shares = Table(
            f"Follow-up classes of award run {self.audit_run}: share of follow-ups (%)",
            ["chosen", "class", JUDGE_ONLY, HUMAN_ONLY, PPI, "n people", "N judge",
             "effective n"],
            rows,
            self.notes(),
            key_columns=2,
        )  # fmt: skip
        a, b = self.groups["A"], self.groups["B"]
        gap_rows = [
            [g.label, g.judge_only.text(sign="+"), g.human_only.text(sign="+"),
             g.prediction_powered.text(sign="+"), g.prediction_powered.reason]
            for g in self.gaps
        ]  # fmt: skip
        gaps = Table(
            f"Gap in each class's share (percentage points): chose {a} minus chose {b}",
            ["class", JUDGE_ONLY, HUMAN_ONLY, PPI, "note"],
            gap_rows,
        )
        return [shares, gaps]


# ---------------------------------------------------------------- what the store holds


@dataclass(frozen=True)
class _Data:
    chosen: dict[int, str]  # follow-up -> "A" or "B"
    groups: dict[str, str]
    judge: dict[int, str]  # follow-up -> the judge's readable class
    votes: dict[int, Counter[str]]  # follow-up -> people's classes counted
    counts: FollowupCounts


def _judge_source(labels: Sequence[AuditLabel], run_id: int, judge: str | None) -> str:
    judges = sorted({lab.source for lab in labels if lab.source.startswith("judge:")})
    if judge is not None:
        if judge not in judges:
            known = ", ".join(judges) or "none"
            raise InvalidInputError(
                f"audit run {run_id} has no follow-up classes from {judge!r}; judges: {known}"
            )
        return judge
    if not judges:
        raise NotFoundError(
            f"audit run {run_id} has no follow-up classes from a judge yet: "
            f"`fairjudge audit award classify {run_id}` (POST .../classify) asks for them"
        )
    if len(judges) > 1:
        raise InvalidInputError(
            f"audit run {run_id} has follow-up classes from {len(judges)} judges; name one "
            f"(--judge, judge=): {', '.join(judges)}"
        )
    return judges[0]


def _load(session: Session, run_id: int, judge: str | None) -> tuple[str, _Data]:
    answers: list[AuditAnswer] = followup_answers(session, run_id)
    labels = list(session.exec(select(AuditLabel).where(AuditLabel.run_id == run_id)))
    source = _judge_source(labels, run_id, judge)
    chosen = {a.id or 0: str(a.meta["chosen"]) for a in answers}
    first = answers[0].meta if answers else {}
    groups = {"A": str(first.get("group_a", "A")), "B": str(first.get("group_b", "B"))}
    judged: dict[int, str] = {}
    statuses: Counter[str] = Counter()
    votes: dict[int, Counter[str]] = defaultdict(Counter)
    people = set()
    for lab in labels:
        if lab.answer_id not in chosen:
            continue
        if lab.source == source:
            statuses[lab.status] += 1
            if lab.status == LABELLED and lab.label is not None:
                judged[lab.answer_id] = lab.label
        elif lab.source.startswith("human:") and lab.status == LABELLED and lab.label:
            votes[lab.answer_id][lab.label] += 1
            people.add(lab.source.removeprefix("human:"))
    failed = sum(k for status, k in statuses.items() if status not in (LABELLED, UNPARSED))
    counts = FollowupCounts(
        followups=len(chosen),
        judge_classified=len(judged),
        judge_unparsed=statuses[UNPARSED],
        judge_failed=failed,
        judge_missing=len(chosen) - sum(statuses.values()),
        people=sorted(people),
        human_classified=len(votes),
        human_labels=sum(sum(v.values()) for v in votes.values()),
        several_people=sum(1 for v in votes.values() if sum(v.values()) > 1),
        human_unjudged=sum(1 for i in votes if i not in judged),
    )
    return source, _Data(chosen, groups, judged, dict(votes), counts)


def followup_design(counts: FollowupCounts, *, assume_random: bool) -> Design:
    """The design people's classes allow (see the module docstring)."""
    n, total = counts.human_classified, counts.followups
    if n == 0:
        return Design(
            "no labels",
            False,
            "no person's classes",
            "no person has classified the follow-ups yet (import-labels, the labels route or "
            "a follow-up campaign)",
        )
    if n >= total:
        return Design(CENSUS, True, CENSUS_REASON)
    if assume_random:
        return Design(
            ASSUMED,
            True,
            f"the {n} follow-ups people classified, of {total}, treated as a simple random "
            "sample of the run's follow-ups, unweighted, as asked; the intervals hold only if "
            "they were drawn that way",
        )
    return Design(
        "refused",
        False,
        "no design to weight people's classes by",
        f"no human-only or prediction-powered estimate: people classified {n} of the run's "
        f"{total} follow-ups, and classes from import-labels, the labels route or a follow-up "
        "campaign carry no inclusion probabilities, so how those follow-ups were chosen is "
        "unknown; or pass --assume-random (assume_random=true) to treat them as a simple "
        "random sample of the run's follow-ups",
    )


def representative(
    data: _Data, rules: EstimatesConfig, *, accepted: bool = False
) -> Representativeness:
    """The random-subset check of people's follow-ups (a ``Representativeness``): per class,
    the judge's 0/100 for it on the follow-ups people classified against the others'."""
    judged = {
        label: {i: 100.0 if c == label else 0.0 for i, c in data.judge.items()}
        for label in FOLLOWUP_CLASSES
    }
    rated = {label: set(data.votes) for label in FOLLOWUP_CLASSES}
    return check_values(judged, rated, rules, accepted=accepted)


# ---------------------------------------------------------------- one cell


def _values(data: _Data, ids: Sequence[int], label: str) -> tuple[dict[int, float], ...]:
    """The judge's 100/0 for the class on each follow-up it classified, and people's share
    of votes for it (percent) on each follow-up they classified."""
    judge = {i: 100.0 if data.judge[i] == label else 0.0 for i in ids if i in data.judge}
    human = {
        i: 100.0 * data.votes[i][label] / sum(data.votes[i].values())
        for i in ids
        if i in data.votes
    }
    return judge, human


def _few(n: int, what: str) -> str:
    return f"{'no' if n == 0 else f'only {n}'} {what} here (2 are needed)"


def _cell(
    judge: Mapping[int, float], human: Mapping[int, float], design: Design, alpha: float
) -> tuple[Estimate, Estimate, Estimate]:
    N, rated = len(judge), sorted(human)
    both = [i for i in rated if i in judge]
    if judge:
        judge_only = judge_only_estimate(list(judge.values()), "share", BOUNDS, JUDGED)
    else:
        why = "no follow-up here has a class from the judge"
        judge_only = Estimate.refused(JUDGE_ONLY, 0, 0, JUDGED, why)
    if not design.usable:
        return (
            judge_only,
            Estimate.refused(HUMAN_ONLY, len(rated), N, design.name, design.reason),
            Estimate.refused(PPI, len(both), N, design.name, design.reason),
        )
    if len(rated) < 2:
        why = _few(len(rated), "follow-up(s) classified by people")
        human_only = Estimate.refused(HUMAN_ONLY, len(rated), N, design.name, why)
    else:
        m = classical_mean([human[i] for i in rated], alpha=alpha)
        human_only = Estimate.of(m, HUMAN_ONLY, N, design.name, BOUNDS)
    if design.name == CENSUS:
        return judge_only, human_only, Estimate.refused(PPI, len(both), N, CENSUS, CENSUS_REASON)
    if len(both) < 2:
        why = _few(len(both), "follow-up(s) classified by people and readably by the judge")
        return judge_only, human_only, Estimate.refused(PPI, len(both), N, design.name, why)
    g = _group(judge, human)
    if all(i in human for i in judge):  # nothing left for the judge: the people's share
        m = classical_mean(g.y, alpha=alpha)
    else:
        m = ppi_mean(g.y, g.yhat, g.yhat_unlabelled, alpha=alpha)
    return judge_only, human_only, Estimate.of(m, PPI, N, design.name, BOUNDS)


def _group(judge: Mapping[int, float], human: Mapping[int, float]) -> Group:
    """The follow-ups both classified, and the judge's values of those people did not."""
    both = [i for i in sorted(human) if i in judge]
    unrated = [v for i, v in judge.items() if i not in human]
    return Group([human[i] for i in both], [judge[i] for i in both], unrated)


# ---------------------------------------------------------------- gaps


def _difference(method: str, a: Estimate, b: Estimate, alpha: float) -> Estimate:
    """A minus B for two independent estimates: the difference, their variances added."""
    n, N, design = a.n + b.n, a.N + b.N, a.design
    if a.value is None or b.value is None or a.se is None or b.se is None:
        reasons = {g: e.reason for g, e in (("A", a), ("B", b)) if e.reason}
        if len(set(reasons.values())) == 1:
            reason = next(iter(reasons.values()))
        else:
            reason = "; ".join(f"group {g}: {why}" for g, why in reasons.items())
        return Estimate.refused(method, n, N, design, reason)
    value, se = a.value - b.value, math.hypot(a.se, b.se)
    df = None if method == JUDGE_ONLY else gap_df(a.n, b.n)
    low, high, name = interval(value, se, alpha, df)
    low, high = max(-100.0, low), min(100.0, high)
    effective, saved = (None, None) if method == JUDGE_ONLY else (float(n), 0.0)
    small = a.small_sample or b.small_sample
    return Estimate(
        method, value, low, high, se, n, N, effective, saved, None, design, small, "", name
    )


def _ppi_gap(
    sides: Sequence[tuple[dict[int, float], dict[int, float], tuple[Estimate, ...]]],
    alpha: float,
) -> Estimate:
    (ja, ha, ea), (jb, hb, eb) = sides
    a, b = _group(ja, ha), _group(jb, hb)
    if ea[2].value is None or eb[2].value is None or not (a.yhat_unlabelled and b.yhat_unlabelled):
        return _difference(PPI, ea[2], eb[2], alpha)
    g = ppi_gap(a, b, alpha=alpha)
    return Estimate(
        PPI, g.estimate, max(-100.0, g.ci_low), min(100.0, g.ci_high), g.se, g.a.n + g.b.n,
        len(ja) + len(jb), finite(g.effective_n), finite(g.ratings_saved), None, ea[2].design,
        g.small_sample, "", g.interval,
    )  # fmt: skip


# ---------------------------------------------------------------- the use


def followup_estimates(
    session: Session,
    run_id: int,
    *,
    judge: str | None = None,
    assume_random: bool = False,
    accept_unrepresentative: bool = False,
    rules: EstimatesConfig | None = None,
    alpha: float = 0.05,
) -> FollowupEstimates:
    """Each class's share of an award run's follow-ups, overall and per chosen group, and
    the gap between the groups, three ways (see the module docstring). ``judge`` names the
    judge's source where several judges classified them. InvalidInputError for a run that is
    not an award run, an unknown ``judge`` or several judges; NotFoundError when no judge
    has classified any follow-up. With ``assume_random`` the subset people classified is
    checked against the rest (``representative``; ``rules``: the config's ``[estimates]``
    bounds, its defaults when None) and refused when unlike it, unless
    ``accept_unrepresentative``."""
    if isinstance(alpha, bool) or not 0 < alpha < 1:
        raise InvalidInputError(f"alpha must be between 0 and 1, got {alpha!r}")
    if accept_unrepresentative and not assume_random:
        raise InvalidInputError("accept_unrepresentative goes with assume_random")
    source, data = _load(session, run_id, judge)
    design = followup_design(data.counts, assume_random=assume_random)
    if design.name == ASSUMED:
        check = representative(data, rules or EstimatesConfig(), accepted=accept_unrepresentative)
        design = guarded(design, check)
        if not design.usable:  # said of follow-ups, not of a judge run's ratings
            design = replace(
                design, description="people's classes unlike the run's other follow-ups"
            )
    by_side = {s: sorted(i for i, c in data.chosen.items() if c == s) for s in SIDES}
    cells = [(ALL, ALL, sorted(data.chosen))] + [(s, data.groups[s], by_side[s]) for s in SIDES]
    shares, gaps = [], []
    for label in FOLLOWUP_CLASSES:
        sides = []
        for chosen, group, ids in cells:
            judge_values, human = _values(data, ids, label)
            if ids:
                found = _cell(judge_values, human, design, alpha)
            else:
                why = f"no follow-up came after a choice of group {chosen} ({group})"
                found = (
                    Estimate.refused(JUDGE_ONLY, 0, 0, JUDGED, why),
                    Estimate.refused(HUMAN_ONLY, 0, 0, design.name, why),
                    Estimate.refused(PPI, 0, 0, design.name, why),
                )
            shares.append(ClassShare(chosen, group, label, len(ids), *found))
            if chosen != ALL:
                sides.append((judge_values, human, found))
        (_, _, ea), (_, _, eb) = sides
        gaps.append(
            ClassGap(
                label, data.groups["A"], data.groups["B"],
                _difference(JUDGE_ONLY, ea[0], eb[0], alpha),
                _difference(HUMAN_ONLY, ea[1], eb[1], alpha),
                _ppi_gap(sides, alpha),
            )
        )  # fmt: skip
    return FollowupEstimates(run_id, source, data.groups, alpha, design, data.counts, shares, gaps)
