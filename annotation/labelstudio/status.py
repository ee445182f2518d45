"""``campaign status``: a campaign's progress read live from Label Studio, per annotator
(complete, incomplete, skipped and held-out annotations, lead times, offset from and
agreement with the others, accuracy on gold items) and per item (short of ratings, rated
twice, skipped). Nothing is stored.

Which annotations count, and with which scores, is decided by the same rule the pull stores
by (``annotation.labelstudio.counted``): an edit the pull holds out is not counted here
either, and the author's stored rating stands in for it, so that the offsets and kappas shown
are those of the ratings the next pull leaves in the store.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from sqlmodel import Session, col, select

from annotation.errors import CampaignError
from annotation.labelstudio.campaigns import get_campaign, strategy_label
from annotation.labelstudio.client import LabelStudioClient
from annotation.labelstudio.counted import Counted, campaign_tasks, read_scores, sort_annotations
from annotation.labelstudio.quality import (
    MIN_KAPPA,
    OFFSET_MARGIN,
    Agreement,
    GoldAccuracy,
    Offsets,
    agreement,
    gold_accuracy,
    offset,
)
from judge.store.tables import Campaign, HumanRating, Item

Scores = dict[str, dict[tuple[str, str], float]]  # annotator -> (item key, rubric) -> score


@dataclass
class AnnotatorProgress:
    email: str
    done: int  # complete annotations: every rubric of the task scored
    skipped: int
    median_lead_time_s: float | None
    flags: list[str] = field(default_factory=list)
    incomplete: int = 0  # annotations that leave a rubric of their task unscored
    unreadable: int = 0  # annotations whose result cannot be read (reported by the pull)
    offset: Offsets | None = None  # mean differences from each other annotator
    agreement: Agreement | None = None  # quadratic-weighted kappa with the others
    gold: GoldAccuracy | None = None  # accuracy on the campaign's gold items
    # annotations last changed by someone else: held out by the pull, which keeps the
    # author's stored rating (counted here as the pull counts it)
    held_out: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "email": self.email,
            "done": self.done,
            "incomplete": self.incomplete,
            "unreadable": self.unreadable,
            "held_out": self.held_out,
            "skipped": self.skipped,
            "median_lead_time_s": self.median_lead_time_s,
            "offset": self.offset.to_dict() if self.offset else None,
            "agreement": self.agreement.to_dict() if self.agreement else None,
            "gold": self.gold.to_dict() if self.gold else None,
            "flags": self.flags,
        }


@dataclass
class CampaignStatus:
    campaign: Campaign
    tasks: int
    annotators: list[AnnotatorProgress]
    short: dict[str, int]  # item key -> distinct ratings, for items below the campaign's N
    rated_twice: list[tuple[str, str]]  # (annotator, item key)
    skipped_items: dict[str, int]  # item key -> skips
    # item key -> "annotator: rubric(s) left unscored", for incomplete annotations
    incomplete: dict[str, list[str]] = field(default_factory=dict)
    gold_items: int = 0
    thresholds: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        c = self.campaign
        return {
            "campaign": c.name,
            "kind": c.kind,
            "strategy": strategy_label(c),
            "tasks": self.tasks,
            "needed_per_item": c.annotators,
            "gold_items": self.gold_items,
            "thresholds": self.thresholds,
            "annotators": [a.to_dict() for a in self.annotators],
            "items_short": self.short,
            "items_incomplete": self.incomplete,
            "rated_twice": [list(p) for p in self.rated_twice],
            "skipped_items": self.skipped_items,
        }


def campaign_status(
    session: Session,
    client: LabelStudioClient,
    name: str,
    *,
    offset_margin: float = OFFSET_MARGIN,
    min_kappa: float = MIN_KAPPA,
) -> CampaignStatus:
    """Progress read live from Label Studio (nothing is stored). An annotation that leaves a
    rubric of its task unscored is incomplete, not done; annotators are flagged by
    ``_flag`` (offset beyond ``offset_margin`` levels, kappa with the others below
    ``min_kappa``), and their accuracy on gold items is shown."""
    from annotation.labelstudio.gold import gold_of

    campaign = get_campaign(session, name)
    assert campaign.id is not None
    tasks = campaign_tasks(session, campaign.id)
    exported = client.export_tasks(campaign.ls_project_id) if campaign.ls_project_id else []
    found = sort_annotations(exported, client.users(), tasks)
    tally = _Tally()
    for counted in found.counted:
        tally.add(campaign, counted)
    for who, key in found.skipped:
        tally.skipped[who] += 1
        tally.skipped_items[key] += 1
    _held_scores(session, campaign, found.held, found.cross_edited, tally)
    people = sorted(set(tally.done) | set(tally.skipped) | set(tally.incomplete)
                    | set(tally.unreadable) | set(tally.held))  # fmt: skip
    progress = [
        AnnotatorProgress(
            p,
            tally.done[p],
            tally.skipped[p],
            statistics.median(tally.lead[p]) if tally.lead[p] else None,
            incomplete=tally.incomplete[p],
            unreadable=tally.unreadable[p],
            held_out=tally.held[p],
        )
        for p in people
    ]
    _flag(progress, tally.scores, offset_margin=offset_margin, min_kappa=min_kappa)
    gold = gold_of(campaign)
    for p in progress:
        p.gold = gold_accuracy(tally.scores[p.email], gold)
    keys = sorted(key for _, key in tasks.values())
    short = {
        key: len(tally.raters.get(key, set()))
        for key in keys
        if len(tally.raters.get(key, set())) < campaign.annotators
    }
    return CampaignStatus(
        campaign,
        len(tasks),
        progress,
        short,
        sorted(set(found.rated_twice)),
        dict(tally.skipped_items),
        dict(tally.incomplete_items),
        len(gold),
        {"offset_margin": offset_margin, "min_kappa": min_kappa},
    )


@dataclass
class _Tally:
    """What status counts per annotator and item while reading the counted annotations."""

    raters: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    done: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)
    skipped_items: Counter[str] = field(default_factory=Counter)
    incomplete: Counter[str] = field(default_factory=Counter)
    unreadable: Counter[str] = field(default_factory=Counter)
    held: Counter[str] = field(default_factory=Counter)
    lead: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    scores: Scores = field(default_factory=lambda: defaultdict(dict))
    incomplete_items: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))

    def add(self, campaign: Campaign, counted: Counted) -> None:
        who, key, ann = counted.rater, counted.item_key, counted.annotation
        if ann.get("lead_time") is not None:
            self.lead[who].append(float(ann["lead_time"]))
        if campaign.kind == "rating":
            try:
                values, missing = read_scores(campaign, counted)
            except CampaignError:
                self.unreadable[who] += 1
                return
            for rubric, value in values.items():
                self.scores[who][(key, rubric)] = float(value.score)
            if missing:  # the scores it has still count above; the task is not done
                self.incomplete[who] += 1
                self.incomplete_items[key].append(f"{who}: {', '.join(missing)} unscored")
                return
        self.raters[key].add(who)
        self.done[who] += 1


def _held_scores(
    session: Session,
    campaign: Campaign,
    held: set[tuple[int, str]],
    cross_edited: list[tuple[str, str, str]],
    tally: _Tally,
) -> None:
    """For each held-out annotation, the author's rating the store keeps (the one the pull
    leaves in place): its scores count, as the pull's ratings do."""
    for author, _, _ in cross_edited:
        tally.held[author] += 1
    if not held or campaign.kind != "rating":
        return
    keys = dict(
        session.exec(
            select(Item.id, Item.key).where(col(Item.id).in_(sorted({i for i, _ in held})))
        ).all()
    )
    for row in session.exec(
        select(HumanRating).where(
            HumanRating.campaign_id == campaign.id, col(HumanRating.withdrawn_at).is_(None)
        )
    ):
        if (row.item_id, row.rater) in held:
            tally.scores[row.rater][(keys[row.item_id], row.rubric)] = float(row.score)


CONSTANT_MIN = 5  # ratings before "always the same score" is worth a flag
FAST_FACTOR = 3.0  # median lead time this many times below the others' median
AGREEMENT_GAP = 0.3  # Spearman below the others' own mean pairwise Spearman by this much


def _flag(
    progress: list[AnnotatorProgress],
    scores: dict[str, dict[tuple[str, str], float]],
    *,
    offset_margin: float = OFFSET_MARGIN,
    min_kappa: float = MIN_KAPPA,
) -> None:
    """Mark annotators worth a look: one who gives a single score to everything, one far
    faster than the rest, one who agrees with the others much less than they agree among
    themselves (Spearman on shared ratings), one harsher or more lenient than the others by
    more than ``offset_margin`` levels with 95 % confidence, one whose quadratic-weighted
    kappa with every other annotator is below ``min_kappa`` (annotation.labelstudio.quality). The
    offset and kappa are kept on each annotator, flagged or not, for the status to show."""
    from scipy.stats import spearmanr

    def rho(a: str, b: str) -> float | None:
        shared = sorted(set(scores[a]) & set(scores[b]))
        if len(shared) < CONSTANT_MIN:
            return None
        x = [scores[a][k] for k in shared]
        y = [scores[b][k] for k in shared]
        if len(set(x)) == 1 or len(set(y)) == 1:
            return None  # undefined for a constant rater (flagged on its own)
        value = spearmanr(x, y).statistic
        return None if math.isnan(value) else float(value)

    medians = {p.email: p.median_lead_time_s for p in progress}
    people = [p.email for p in progress]
    for p in progress:
        values = list(scores[p.email].values())
        if len(values) >= CONSTANT_MIN and len(set(values)) == 1:
            p.flags.append(f"gives every item the same score ({values[0]:g})")
        others = [m for e, m in medians.items() if e != p.email and m is not None]
        if p.median_lead_time_s is not None and others:
            typical = statistics.median(others)
            if p.median_lead_time_s * FAST_FACTOR < typical:
                p.flags.append(
                    f"much faster than the others (median {p.median_lead_time_s:.1f} s "
                    f"per task against {typical:.1f} s)"
                )
        mine = [r for q in people if q != p.email and (r := rho(p.email, q)) is not None]
        theirs = [
            r
            for i, a in enumerate(people)
            for b in people[i + 1 :]
            if p.email not in (a, b) and (r := rho(a, b)) is not None
        ]
        if mine and theirs:
            own, rest = statistics.fmean(mine), statistics.fmean(theirs)
            if own < rest - AGREEMENT_GAP:
                p.flags.append(
                    f"agrees with the others less than they agree among themselves "
                    f"(mean Spearman {own:.2f} against {rest:.2f})"
                )
        p.offset = offset(scores, p.email)
        side = p.offset.side(offset_margin) if p.offset is not None else 0
        if p.offset is not None and side:
            near = p.offset.closest
            p.flags.append(
                f"{'harsher' if side < 0 else 'more lenient'} than each of the "
                f"{len(p.offset.pairs)} other annotator(s) by more than {offset_margin:g} "
                f"levels (closest, {near.other}: {near.mean:+.2f}, 95 % CI "
                f"{near.ci_low:+.2f} to {near.ci_high:+.2f}, {near.n_items} shared items)"
            )
        p.agreement = agreement(scores, p.email)
        if p.agreement is not None and p.agreement.kappa < min_kappa:
            p.flags.append(
                f"low agreement with each of the {p.agreement.n_annotators} other "
                f"annotator(s) (best quadratic-weighted kappa {p.agreement.kappa:.2f} < "
                f"{min_kappa:g}, with {p.agreement.other} on {p.agreement.n_ratings} ratings)"
            )
