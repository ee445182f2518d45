"""A bad gold file lists every problem at once (issue 41): six planted errors are six lines
of one error, by line, whether the file's format or the campaign refuses them; a clean file
passes whole. The expected lines are written here by hand from the files planted below."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from annotation.errors import CampaignError
from annotation.labelstudio.gold import read_gold, resolve_gold
from judge import paths
from judge.grading.rubrics import load_rubrics
from judge.store.tables import Item

SIX_FORMAT_ERRORS = (
    "item_id,rubric,score\n"
    "s1-a,ICS,4\n"  # line 2: good
    "s1-b,,3\n"  # line 3: rubric empty
    "s1-c,ICS,four\n"  # line 4: not a number
    ",ICS,2\n"  # line 5: item_id empty
    "s1-d,ICS,3.5\n"  # line 6: not a whole number
    "s1-a,ics,5\n"  # line 7: s1-a ICS again (first on line 2)
    "s1-e,ICS,\n"  # line 8: score empty
)


def test_six_planted_format_errors_are_listed_at_once(tmp_path: Path) -> None:
    path = tmp_path / "gold.csv"
    path.write_text(SIX_FORMAT_ERRORS)
    with pytest.raises(CampaignError) as caught:
        read_gold(path)
    # By hand, one line per planted error, in line order.
    assert caught.value.problems == [
        (3, "rubric is empty"),
        (4, "score 'four' is not a whole number"),
        (5, "item_id is empty"),
        (6, "score '3.5' is not a whole number"),
        (7, "item s1-a rubric ICS is already given on line 2"),
        (8, "score is empty"),
    ]
    said = str(caught.value)
    assert said.startswith(f"gold file {path} has 6 problems; fix them all")
    assert said.count("\n  line ") == 6


def test_a_clean_file_passes_and_lenient_reading_keeps_the_good_rows(tmp_path: Path) -> None:
    clean = tmp_path / "clean.csv"
    clean.write_text("item_id,rubric,score\ns1-a,ICS,4\ns1-b,ics,2\n")
    rows = read_gold(clean)
    assert [(r.line, r.item_key, r.rubric, r.score) for r in rows] == [
        (2, "s1-a", "ICS", 4),
        (3, "s1-b", "ICS", 2),
    ]
    assert rows.problems == []
    bad = tmp_path / "bad.csv"
    bad.write_text(SIX_FORMAT_ERRORS)
    lenient = read_gold(bad, strict=False)
    assert [r.line for r in lenient] == [2]  # the one good row of the planted file
    assert len(lenient.problems) == 6


def _keys(engine: Engine) -> dict[str, int]:
    with Session(engine) as s:
        return {i.key: i.id for i in s.exec(select(Item)) if i.id is not None}


def test_format_and_campaign_problems_come_back_together(
    engine: Engine, judged: tuple[int, int], tmp_path: Path
) -> None:
    keys = _keys(engine)
    rateable = sorted(k for k in keys if k.startswith("s1"))[:3]
    first, second, third = rateable
    with Session(engine) as s:
        dataset_id = s.exec(select(Item.dataset_id)).first()
    assert dataset_id is not None
    rubric_set = load_rubrics(paths.prompts_dir())
    # The campaign rates ICS on the first two items only (the third has no rateable answer).
    by_item = {keys[first]: ("ICS",), keys[second]: ("ICS",)}
    path = tmp_path / "gold.csv"
    path.write_text(
        "item_id,rubric,score\n"
        f"{first},ICS,4\n"  # line 2: good
        f"{first},ICS,x\n"  # line 3: not a number (format)
        "no-such-item,ICS,3\n"  # line 4: unknown item (campaign)
        f"{second},TCS,3\n"  # line 5: rubric not rated on the item (campaign)
        f"{second},ICS,7\n"  # line 6: outside ICS's 1-5 (campaign)
        f"{third},ICS,2\n"  # line 7: no rateable answer (campaign)
        f"{second},,2\n"  # line 8: rubric empty (format)
    )
    rows = read_gold(path, strict=False)
    with Session(engine) as s, pytest.raises(CampaignError) as caught:
        resolve_gold(s, rubric_set, by_item, dataset_id, rows)
    assert [line for line, _ in caught.value.problems] == [3, 4, 5, 6, 7, 8]
    reasons = dict(caught.value.problems)
    assert reasons[4] == "the dataset has no item 'no-such-item'"
    assert reasons[5].startswith(f"rubric TCS is not rated on item {second}")
    assert reasons[6] == "score 7 is outside rubric ICS's scale 1-5"
    assert reasons[7] == f"item {third} has no answer humans can rate in this campaign"
    # The same file with only its good line resolves to that one known score.
    good = tmp_path / "good.csv"
    good.write_text(f"item_id,rubric,score\n{first},ICS,4\n{second},ICS,1\n")
    with Session(engine) as s:
        found = resolve_gold(s, rubric_set, by_item, dataset_id, read_gold(good, strict=False))
    assert found == {keys[first]: {"ICS": 4}, keys[second]: {"ICS": 1}}
