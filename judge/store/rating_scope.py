"""Which stored human ratings count, when several campaigns or import batches rated the same
answers.

Every rating belongs to one scope: ``campaign:<id>`` (pulled from that campaign) or
``import:<batch>`` (imported from a CSV file). Scopes never overwrite each other, so one
person can hold several ratings of the same item and rubric, one per scope. Agreement and
reports need one per person, item and rubric; the rule is:

- with scopes named (``--campaign``, repeatable; a campaign's name or an import batch as
  ``import:<batch>``), only their ratings count;
- among the scopes that count, the **newest scope wins** for a person's rating of an item
  and rubric: scopes are ordered by when they began (a campaign's creation; an import
  batch's first import), ties by name. That order is fixed once the scopes exist, so the
  numbers are the same whichever campaign was pulled first or last.

Every output names the scopes it used and how many ratings a newer scope superseded.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlmodel import Session, col, func, select

from judge.errors import InvalidInputError
from judge.store.tables import Campaign, HumanRating

CAMPAIGN = "campaign:"
IMPORT = "import:"


def campaign_scope(campaign_id: int) -> str:
    """The scope of ratings pulled from campaign ``campaign_id``."""
    return f"{CAMPAIGN}{campaign_id}"


def import_scope(batch: str) -> str:
    """The scope of ratings imported as ``batch`` (e.g. the file's name)."""
    return f"{IMPORT}{batch}"


@dataclass(frozen=True)
class Scope:
    """One campaign or import batch holding ratings of a generation run."""

    scope: str
    name: str  # the campaign's name, or import:<batch>
    began: datetime
    campaign_id: int | None
    ratings: int  # live (not withdrawn) ratings it holds for the run


@dataclass(frozen=True)
class RatingSelection:
    """The ratings that count (one per item, rubric and rater) and where they came from."""

    ratings: list[HumanRating]
    used: list[Scope]  # scopes with at least one rating that counts, oldest first
    superseded: int  # ratings left out because a newer scope rated the same
    named: bool  # the caller named the scopes (else every scope of the run counts)

    @property
    def campaign_ids(self) -> list[int]:
        return [s.campaign_id for s in self.used if s.campaign_id is not None]

    def to_dict(self) -> dict[str, object]:
        return {
            "scopes": [s.name for s in self.used],
            "named": self.named,
            "superseded": self.superseded,
            "rule": RULE,
        }

    def describe(self) -> str:
        """One line: which campaigns/batches the numbers use."""
        names = ", ".join(s.name for s in self.used) or "none"
        how = "as asked" if self.named else "all of the run's"
        extra = (
            f"; {self.superseded} rating(s) superseded by a newer campaign's rating of the "
            "same item, rubric and rater"
            if self.superseded
            else ""
        )
        return f"ratings from {names} ({how}){extra}"


RULE = "newest campaign or import batch wins per rater, item and rubric"


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def run_scopes(session: Session, generation_run_id: int) -> list[Scope]:
    """The scopes holding live ratings of the run, oldest first (ties by name)."""
    counts = session.exec(
        select(HumanRating.scope, func.count(), func.min(HumanRating.created_at))
        .where(
            HumanRating.generation_run_id == generation_run_id,
            col(HumanRating.withdrawn_at).is_(None),
        )
        .group_by(col(HumanRating.scope))
    ).all()
    ids = [
        int(s[len(CAMPAIGN) :])
        for s, _, _ in counts
        if s.startswith(CAMPAIGN) and s[len(CAMPAIGN) :].isdigit()
    ]
    campaigns = {
        c.id: c for c in session.exec(select(Campaign).where(col(Campaign.id).in_(ids or [-1])))
    }
    out = []
    for scope, n, first in counts:
        cid = int(scope[len(CAMPAIGN) :]) if scope[len(CAMPAIGN) :].isdigit() else None
        campaign = campaigns.get(cid) if scope.startswith(CAMPAIGN) else None
        if campaign is not None:
            out.append(Scope(scope, campaign.name, _aware(campaign.created_at), cid, int(n)))
        else:
            out.append(Scope(scope, scope, _aware(first), None, int(n)))
    return sorted(out, key=lambda s: (s.began, s.name))


def _chosen(scopes: list[Scope], names: Sequence[str], generation_run_id: int) -> list[Scope]:
    by_name = {s.name: s for s in scopes} | {s.scope: s for s in scopes}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        known = ", ".join(s.name for s in scopes) or "none"
        raise InvalidInputError(
            f"no ratings of generation run {generation_run_id} from {', '.join(unknown)}; "
            f"--campaign takes a campaign name or import:BATCH (this run has: {known})"
        )
    wanted = {by_name[n].scope for n in names}
    return [s for s in scopes if s.scope in wanted]


def select_ratings(
    session: Session,
    generation_run_id: int,
    campaigns: Sequence[str] = (),
    *,
    skip: Callable[[HumanRating], bool] | None = None,
) -> RatingSelection:
    """The live ratings of the run that count under the rule in the module docstring;
    ``campaigns`` names the scopes to use (all of the run's when empty). Ratings ``skip``
    says yes to (e.g. of gold items) neither count nor supersede others."""
    scopes = run_scopes(session, generation_run_id)
    chosen = _chosen(scopes, campaigns, generation_run_id) if campaigns else scopes
    rank = {s.scope: i for i, s in enumerate(chosen)}
    rows = session.exec(
        select(HumanRating).where(
            HumanRating.generation_run_id == generation_run_id,
            col(HumanRating.withdrawn_at).is_(None),
        )
    ).all()
    best: dict[tuple[int, str, str], HumanRating] = {}
    counted = 0
    for row in rows:
        if row.scope not in rank or (skip is not None and skip(row)):
            continue
        counted += 1
        key = (row.item_id, row.rubric, row.rater)
        held = best.get(key)
        if held is None or rank[row.scope] > rank[held.scope]:
            best[key] = row
    kept = sorted(best.values(), key=lambda r: (r.item_id, r.rubric, r.rater))
    used = {r.scope for r in kept}
    return RatingSelection(
        ratings=kept,
        used=[s for s in chosen if s.scope in used],
        superseded=counted - len(kept),
        named=bool(campaigns),
    )
