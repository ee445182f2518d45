"""Classified answers of the award-choice audit given as a CSV (``audit award analyze
--from-file``): the layout read from the header, group labels and name pairs mapped to the
run's A/B through the names file, every bad row named by its line number."""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from judge.audits.award import FOLLOWUP_CLASSES, ChoiceRow, FollowupRow
from judge.audits.award_data import EQUIVOCAL, NameGroups, load_name_groups
from judge.errors import InvalidInputError


@dataclass(frozen=True)
class AwardCsv:
    """A CSV of classified answers: ``layout`` 'choice' (columns level,choice, optionally
    name_pair) fills ``choices``; 'followup' (level,chosen_group,followup_class) fills
    ``followups``. ``name_pairs`` says whether the choice rows name their pair of names
    (needed for the Kruskal-Wallis test across name pairs)."""

    layout: Literal["choice", "followup"]
    choices: tuple[ChoiceRow, ...] = ()
    followups: tuple[FollowupRow, ...] = ()
    name_pairs: bool = False


CHOICE_COLUMNS = ("level", "choice")
PAIR_COLUMN = "name_pair"
FOLLOWUP_COLUMNS = ("level", "chosen_group", "followup_class")
_HEADERS = "'level,choice', 'level,name_pair,choice' or 'level,chosen_group,followup_class'"


def _layout(header: tuple[str, ...], source: Path) -> Literal["choice", "followup"]:
    """The layout a header announces; columns of the choice layout in any order."""
    if header == FOLLOWUP_COLUMNS:
        return "followup"
    wanted = {*CHOICE_COLUMNS}
    if len(set(header)) == len(header) and set(header) in (wanted, wanted | {PAIR_COLUMN}):
        return "choice"
    hint = ""
    extra = set(header) - wanted - {PAIR_COLUMN}
    if wanted <= set(header) and extra:
        hint = f"; the name-pair column must be called {PAIR_COLUMN!r}, not {sorted(extra)}"
    raise InvalidInputError(
        f"the CSV file {source} must start with the header {_HEADERS}, got "
        f"{','.join(header) or 'nothing'!r}{hint}"
    )


def parse_name_pair(text: str, groups: NameGroups) -> str | None:
    """A name pair written 'NAME/NAME' (one name of each group, either order, any case) as
    the run's label, group A's name first in the names file's spelling ('Latoya/Mary');
    None when it is not one."""
    parts = [part.strip().casefold() for part in text.split("/")]
    if len(parts) != 2:
        return None
    a = {n.casefold(): n for n in groups.names_a}
    b = {n.casefold(): n for n in groups.names_b}
    first, second = parts
    if first in a and second in b:
        return f"{a[first]}/{b[second]}"
    if first in b and second in a:
        return f"{a[second]}/{b[first]}"
    return None


def read_award_csv(path: Path | str, names: NameGroups | None = None) -> AwardCsv:
    """Read classified answers, recognising the layout from the header. Group names (e.g.
    ``Black``, ``White``, any case) are mapped to A/B through ``names`` (the bundled names file
    by default), and so are the two names of a ``name_pair`` cell. Raise InvalidInputError
    naming every bad row by its line number."""
    source = Path(path)
    groups = names if names is not None else load_name_groups()
    try:
        with source.open(encoding="utf-8", newline="") as handle:
            lines = list(csv.reader(handle))
    except FileNotFoundError:
        raise InvalidInputError(f"the CSV file {source} does not exist") from None
    except (UnicodeDecodeError, csv.Error) as exc:
        raise InvalidInputError(f"the CSV file {source} cannot be read: {exc}") from None
    header = tuple(col.strip().lower() for col in lines[0]) if lines else ()
    layout = _layout(header, source)
    column = {name: i for i, name in enumerate(header)}
    labels = f"{groups.group_a!r} or {groups.group_b!r}"
    example = f"{groups.names_a[0]}/{groups.names_b[0]}"
    problems: list[tuple[int, str]] = []
    choices: list[ChoiceRow] = []
    followups: list[FollowupRow] = []
    for number, cells in enumerate(lines[1:], start=2):
        if not any(c.strip() for c in cells):
            continue
        if len(cells) != len(header):
            problems.append((number, f"expected {len(header)} columns, got {len(cells)}"))
            continue
        values = [c.strip() for c in cells]
        raw_level = values[column["level"]]
        level = int(raw_level) if re.fullmatch(r"[0-9]+", raw_level) else None
        if level is None:
            problems.append((number, f"level must be a whole number, got {raw_level!r}"))
        if layout == "choice":
            picked = values[column["choice"]]
            group = groups.group_of_label(picked)
            choice = group or (EQUIVOCAL if picked.casefold() == EQUIVOCAL else None)
            if choice is None:
                problems.append((number, f"choice must be {labels} or 'equivocal'"))
            pair: str | None = None
            if PAIR_COLUMN in column:
                given = values[column[PAIR_COLUMN]]
                pair = parse_name_pair(given, groups)
                if not given:
                    problems.append(
                        (number, f"name_pair is empty: give the prompt's two names, e.g. {example}")
                    )
                elif pair is None:
                    problems.append(
                        (number, f"name_pair must be two first names joined by '/', one of each "
                                 f"group (e.g. {example}), got {given!r}")
                    )  # fmt: skip
            if choice is not None and level is not None:
                choices.append(ChoiceRow(level, pair, choice))
            continue
        group = groups.group_of_label(values[1])
        kind = values[2].casefold()
        if group is None:
            problems.append((number, f"chosen_group must be {labels}, got {values[1]!r}"))
        if kind not in FOLLOWUP_CLASSES:
            problems.append(
                (number, f"followup_class must be one of {', '.join(FOLLOWUP_CLASSES)}")
            )
        elif group is not None and level is not None:
            followups.append(FollowupRow(level, group, kind))
    if problems:
        raise InvalidInputError(f"the CSV file {source} has rows to fix", problems)
    if layout == "choice":
        return AwardCsv("choice", choices=tuple(choices), name_pairs=PAIR_COLUMN in column)
    return AwardCsv("followup", followups=tuple(followups))
