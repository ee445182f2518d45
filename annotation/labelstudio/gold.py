"""Gold items: items of a rating campaign whose correct scores are known, to measure each
annotator's accuracy.

A gold file is a CSV with the columns ``item_id`` (the dataset's item id), ``rubric`` and
``score``, one row per item and rubric. Gold items must be items of the campaign's judge run
that humans can rate with the campaign's rubrics; they are shown to annotators like every
other task (nothing marks them as gold in Label Studio). They stay outside the campaign's
random sample: ``campaign create --gold`` leaves them out of the population before drawing,
and adding gold to an existing campaign refuses an item already drawn. Their tasks carry the
stratum ``"gold"``; the campaign's design JSON keeps the known scores under ``"gold"``. The
humans' ratings of gold items are left out of agreement with the judge (they were chosen, not
drawn, and were rated as a test), and ``campaign status`` shows each annotator's accuracy on
them (``annotation.labelstudio.quality.gold_accuracy``).
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from sqlmodel import Session, col, select

from annotation.errors import CampaignError
from judge.grading.rubrics import RubricSet
from judge.store.tables import Campaign, CampaignTask, Item

GOLD = "gold"  # the stratum of a gold task, and the design key of the known scores
COLUMNS = ("item_id", "rubric", "score")


@dataclass(frozen=True)
class GoldRow:
    """One known score, with the line of the file it came from (for messages)."""

    line: int
    item_key: str
    rubric: str
    score: int
    source: str = "gold file"  # "gold file PATH", for messages


class GoldRows(list[GoldRow]):
    """The readable rows of a gold file, with the problems of its other rows (``problems``:
    (line, reason)), so that ``resolve_gold`` can list every problem of the file at once."""

    def __init__(self, rows: Sequence[GoldRow], source: str, problems: Sequence[Problem]):
        super().__init__(rows)
        self.source = source
        self.problems = list(problems)


Problem = tuple[int, str]  # (line of the file, what is wrong there)


def _refuse(source: str, problems: Sequence[Problem]) -> None:
    """One CampaignError for every problem of a gold file: one line for a single problem,
    else a count and one line per problem, in line order."""
    if not problems:
        return
    ordered = sorted(problems)
    if len(ordered) == 1:
        line, reason = ordered[0]
        raise CampaignError(f"{source} line {line}: {reason}")
    raise CampaignError(
        f"{source} has {len(ordered)} problems; fix them all and run the command again",
        list(ordered),
    )


def read_gold(path: str | Path, *, strict: bool = True) -> GoldRows:
    """The rows of a gold CSV file. Every row is checked (an empty cell, a score that is not
    a whole number, an item and rubric given twice) and every problem is named with its line:
    ``strict`` raises one CampaignError listing them all; ``strict=False`` returns the good
    rows with the others' problems in ``problems`` (``resolve_gold`` adds its own and lists
    them together). A missing column, an unreadable file and a file without rows are refused
    at once, either way."""
    path = Path(path)
    source = f"gold file {path}"
    rows: list[GoldRow] = []
    problems: list[Problem] = []
    try:
        with path.open(encoding="utf-8-sig", newline="") as handle:
            reader = csv.DictReader(handle)
            header = [h.strip().lower() for h in reader.fieldnames or []]
            missing = [c for c in COLUMNS if c not in header]
            if missing:
                raise CampaignError(
                    f"{source}: needs the columns {', '.join(COLUMNS)}; "
                    f"missing {', '.join(missing)}"
                )
            reader.fieldnames = header
            for n, record in enumerate(reader, start=2):
                row = _row(source, n, record)
                if isinstance(row, GoldRow):
                    rows.append(row)
                else:
                    problems.extend((n, reason) for reason in row)
    except OSError as exc:
        raise CampaignError(f"cannot read gold file {path}: {exc.strerror}") from None
    except (UnicodeDecodeError, csv.Error) as exc:
        raise CampaignError(f"gold file {path} is not a readable CSV file: {exc}") from None
    if not rows and not problems:
        raise CampaignError(f"gold file {path} has no rows")
    seen: dict[tuple[str, str], int] = {}
    kept: list[GoldRow] = []
    for row in rows:
        first = seen.setdefault((row.item_key, row.rubric), row.line)
        if first != row.line:
            problems.append(
                (
                    row.line,
                    f"item {row.item_key} rubric {row.rubric} is already given on line {first}",
                )
            )
        else:
            kept.append(row)
    if strict or not kept:  # with no good row left there is nothing more to check
        _refuse(source, problems)
    return GoldRows(kept, source, problems)


def _row(
    source: str, line: int, record: dict[str | None, str | list[str] | None]
) -> GoldRow | list[str]:
    """A row of the file, or what is wrong with it (every problem of the row)."""
    wrong: list[str] = []

    def cell(name: str) -> str:
        value = record.get(name)
        text = value.strip() if isinstance(value, str) else ""
        if not text:
            wrong.append(f"{name} is empty")
        return text

    item, rubric, score = cell("item_id"), cell("rubric").upper(), cell("score")
    try:
        number = float(score) if score else 0.0
    except ValueError:
        number = float("nan")
    if score and not number.is_integer():
        wrong.append(f"score {score!r} is not a whole number")
    if wrong:
        return wrong
    return GoldRow(line, item, rubric, int(number), source)


def resolve_gold(
    session: Session,
    rubric_set: RubricSet,
    rubrics_by_item: dict[int, tuple[str, ...]],
    dataset_id: int,
    rows: Sequence[GoldRow],
) -> dict[int, dict[str, int]]:
    """Item id -> rubric -> known score, checked against the items humans can rate
    (``rubrics_by_item``: item id -> the campaign rubrics its answers can be rated with) and
    each rubric's levels; one CampaignError listing every bad row (with the problems
    ``read_gold(strict=False)`` found in the file's other rows)."""
    ids = dict(session.exec(select(Item.key, Item.id).where(Item.dataset_id == dataset_id)).all())
    out: dict[int, dict[str, int]] = {}
    problems: list[Problem] = list(getattr(rows, "problems", []))
    for row in rows:
        reason = _unusable(rubric_set, rubrics_by_item, ids, row)
        if reason:
            problems.append((row.line, reason))
            continue
        item_id = ids[row.item_key]
        assert item_id is not None  # _unusable refused an unknown item
        out.setdefault(item_id, {})[row.rubric] = row.score
    source = getattr(rows, "source", None) or (rows[0].source if rows else "gold file")
    _refuse(source, problems)
    return out


def _unusable(
    rubric_set: RubricSet,
    rubrics_by_item: dict[int, tuple[str, ...]],
    ids: dict[str, int | None],
    row: GoldRow,
) -> str:
    """Why ``row`` cannot be a gold score of this campaign ("" when it can)."""
    item_id = ids.get(row.item_key)
    if item_id is None:
        return f"the dataset has no item {row.item_key!r}"
    allowed = rubrics_by_item.get(item_id)
    if not allowed:
        return f"item {row.item_key} has no answer humans can rate in this campaign"
    if row.rubric not in allowed:
        return (
            f"rubric {row.rubric} is not rated on item {row.item_key} "
            f"(its campaign rubrics: {', '.join(allowed)})"
        )
    top = len(rubric_set[row.rubric].levels)
    if not 1 <= row.score <= top:
        return f"score {row.score} is outside rubric {row.rubric}'s scale 1-{top}"
    return ""


def gold_of(campaign: Campaign) -> dict[str, dict[str, int]]:
    """Item key -> rubric -> known score of a campaign (empty without gold)."""
    held = campaign.design.get(GOLD)
    return {str(k): dict(v) for k, v in held.items()} if isinstance(held, dict) else {}


def store_gold(session: Session, campaign: Campaign, gold: dict[int, dict[str, int]]) -> int:
    """Add gold items to a campaign (tasks of stratum "gold" and their known scores in the
    design); the same known scores again change nothing. Refuses an item the campaign drew
    into its sample and a known score that differs from the one stored. Returns the number
    of gold tasks added (not yet sent to Label Studio)."""
    assert campaign.id is not None
    keys = dict(session.exec(select(Item.id, Item.key).where(col(Item.id).in_(list(gold)))).all())
    tasks = {
        t.item_id: t
        for t in session.exec(select(CampaignTask).where(CampaignTask.campaign_id == campaign.id))
    }
    held = gold_of(campaign)
    for item_id, scores in gold.items():
        key = keys[item_id]
        task = tasks.get(item_id)
        if task is not None and task.stratum != GOLD:
            raise CampaignError(
                f"item {key} is in campaign {campaign.name!r}'s sample; gold items must lie "
                "outside it (give them with `campaign create --gold` to keep them out of the "
                "draw)"
            )
        for rubric, score in scores.items():
            known = held.get(key, {}).get(rubric)
            if known is not None and known != score:
                raise CampaignError(
                    f"campaign {campaign.name!r} already has gold score {known} for item {key} "
                    f"rubric {rubric}, not {score}"
                )
    added = 0
    for item_id, scores in gold.items():
        key = keys[item_id]
        held[key] = {**held.get(key, {}), **scores}
        if item_id not in tasks:
            session.add(
                CampaignTask(
                    campaign_id=campaign.id,
                    item_id=item_id,
                    task_key=f"{campaign.name}:{key}",
                    stratum=GOLD,
                )
            )
            added += 1
    campaign.design = {**campaign.design, GOLD: held}  # a new dict: the JSON column sees it
    session.add(campaign)
    session.commit()
    return added


def gold_pairs(session: Session, generation_run_id: int) -> set[tuple[int, int]]:
    """(campaign id, item id) of every gold task of the run's campaigns: ratings made there
    are tests of the annotators, kept out of agreement with the judge."""
    return {
        (campaign_id, item_id)
        for campaign_id, item_id in session.exec(
            select(CampaignTask.campaign_id, CampaignTask.item_id)
            .join(Campaign, col(Campaign.id) == CampaignTask.campaign_id)
            .where(Campaign.generation_run_id == generation_run_id, CampaignTask.stratum == GOLD)
        )
    }
