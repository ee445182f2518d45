"""Which of a dataset's items a generation run asks, by their expert review
(``Item.review_status``): by default every item except drafts waiting for review and
rejected ones; ``include_drafts`` adds the drafts, ``accepted_only`` keeps only accepted
items (``judge.answers.collect`` runs the chosen ones). The items left out are counted in
the run's status line.
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy.engine import Engine
from sqlmodel import Session, col, func, select

from judge.data.items import DRAFT, status_name
from judge.errors import InvalidInputError, NotFoundError
from judge.store.engine import session_scope
from judge.store.queries import dataset_items, get_dataset
from judge.store.tables import Item
from judge.vocab import STAGE_PARTS


def asked(status: str | None, *, accepted_only: bool, include_drafts: bool) -> bool:
    """Whether an item with this review status is asked (see the module docstring)."""
    if accepted_only:
        return status == "accepted"
    if status == DRAFT:
        return include_drafts
    return status != "rejected"


def left_out_detail(counts: Mapping[str, int], *, accepted_only: bool) -> str | None:
    """The status line's words for items left out, by review status name.

    >>> left_out_detail({"draft": 2, "rejected": 1}, accepted_only=False).split(":")[0]
    '3 item(s) left out by review status (2 draft, 1 rejected)'
    >>> left_out_detail({"unreviewed": 4}, accepted_only=True)
    '4 item(s) left out by --accepted-only (4 unreviewed)'
    """
    total = sum(counts.values())
    if not total:
        return None
    each = ", ".join(f"{n} {name}" for name, n in sorted(counts.items()))
    if accepted_only:
        return f"{total} item(s) left out by --accepted-only ({each})"
    why = []
    if counts.get(DRAFT):
        why.append("drafts are asked only with --include-drafts")
    if counts.get("rejected"):
        why.append("rejected items never")
    return f"{total} item(s) left out by review status ({each}): {', '.join(why)}"


def check_selection(
    session: Session, dataset_name: str, accepted_only: bool, include_drafts: bool
) -> None:
    """Refuse contradictory options and a selection with no item, before any run exists."""
    if accepted_only and include_drafts:
        raise InvalidInputError(
            "accepted_only and include_drafts contradict each other (--accepted-only asks "
            "only accepted items); give one of them"
        )
    dataset = get_dataset(session, dataset_name)
    counts: dict[str | None, int] = {
        status: n
        for status, n in session.exec(
            select(Item.review_status, func.count())
            .where(Item.dataset_id == dataset.id)
            .group_by(col(Item.review_status))
        )
    }
    rule = {"accepted_only": accepted_only, "include_drafts": include_drafts}
    if any(asked(status, **rule) for status in counts):
        return
    if accepted_only:
        raise NotFoundError(
            f"dataset {dataset_name!r} has no item an expert review accepted; see "
            "`fairjudge campaign review` (or drop --accepted-only)"
        )
    raise NotFoundError(
        f"dataset {dataset_name!r} has no item to ask: "
        + ", ".join(f"{n} {name}" for name, n in sorted(_named(counts).items()))
        + f". Review the drafts (`fairjudge campaign review --dataset {dataset_name} "
        "--drafts`), or give --include-drafts to ask them unreviewed"
    )


def _named(counts: Mapping[str | None, int]) -> dict[str, int]:
    return {status_name(s): n for s, n in counts.items()}


def chosen(
    session: Session,
    dataset_name: str,
    limit: int | None,
    accepted_only: bool,
    include_drafts: bool,
) -> tuple[list[Item], dict[int, str]]:
    """The items a run asks (by review status, then ``limit``), and those left out (item
    id -> its review status's name)."""
    rule = {"accepted_only": accepted_only, "include_drafts": include_drafts}
    items, left_out = [], {}
    for item in dataset_items(session, dataset_name):
        assert item.id is not None
        if asked(item.review_status, **rule):
            items.append(item)
        else:
            left_out[item.id] = status_name(item.review_status)
    if not items:  # reviewed since check_selection looked
        raise NotFoundError(f"dataset {dataset_name!r} has no item these options ask")
    return items[:limit], left_out


def answers_per_item(
    engine: Engine,
    dataset_name: str,
    *,
    limit: int | None = None,
    accepted_only: bool = False,
    include_drafts: bool = False,
) -> dict[int, int]:
    """The answers each asked item holds when the run is done (one per part of its
    stage), chosen as ``generate`` chooses them (a split job's parts know their whole work
    before they start); items left out hold none."""
    with session_scope(engine) as session:
        items, _ = chosen(session, dataset_name, limit, accepted_only, include_drafts)
        return {int(item.id or 0): len(STAGE_PARTS[item.stage]) for item in items}
