"""The rating interface for rubrics of any number of levels (issue 25, item 6): the choices a
task offers are the rubric's own levels, and a pulled score must be one of them. Expected
choices are written out by hand from the rubrics below."""

from __future__ import annotations

from typing import Any

import pytest

from annotation.errors import CampaignError
from annotation.labelstudio.interface import (
    label_config,
    level_options,
    offered_scales,
    parse_rating,
    task_data,
)
from judge.grading.rubrics import parse_rubric_file
from judge.vocab import Scale

RUBRICS = parse_rubric_file("""
[YESNO]
criterion = "Does the ANSWER answer the PROMPT?"
levels = ["No.", "Yes."]
texts = [["PROMPT", "{item[prompt]}"], ["ANSWER", "{answers[answer]}"]]

[DETAIL]
criterion = "How detailed is the ANSWER?"
levels = {1 = "None.", 2 = "Little.", 3 = "Some.", 4 = "Much.", 5 = "Most.", 6 = "All."}
texts = [["PROMPT", "{item[prompt]}"], ["ANSWER", "{answers[answer]}"]]
""")


def choice(name: str, value: str) -> dict[str, Any]:
    return {
        "from_name": name,
        "to_name": "text_prompt",
        "type": "choices",
        "value": {"choices": [value]},
    }


def test_a_task_offers_each_rubrics_own_levels() -> None:
    yesno, detail = RUBRICS
    assert level_options(yesno) == [
        {"value": "1 — No.", "alias": "1"},
        {"value": "2 — Yes.", "alias": "2"},
    ]
    assert [o["alias"] for o in level_options(detail)] == ["1", "2", "3", "4", "5", "6"]
    data = task_data("f1", "free", RUBRICS, {"prompt": "Hi?"}, {"answer": "Hello."}, "c")
    assert data["fj_levels_YESNO"] == level_options(yesno)
    assert offered_scales(data) == {"YESNO": Scale(1, 2), "DETAIL": Scale(1, 6)}
    # One Choices control per rubric, reading its levels from the task.
    config = label_config(RUBRICS)
    assert 'value="$fj_levels_YESNO"' in config and 'value="$fj_levels_DETAIL"' in config


def test_a_pulled_score_must_be_a_level_the_task_offered() -> None:
    data = task_data("f1", "free", RUBRICS, {"prompt": "Hi?"}, {"answer": "Hello."}, "c")
    scales = offered_scales(data)
    read = parse_rating([choice("score_DETAIL", "6"), choice("score_YESNO", "2")], scales=scales)
    assert {r: v.score for r, v in read.items()} == {"DETAIL": 6, "YESNO": 2}
    with pytest.raises(CampaignError, match="score_YESNO: score 3 is outside 1/2"):
        parse_rating([choice("score_YESNO", "3")], scales=scales)
    # Without the task's scales a rubric is checked on FairMonitor's 1-5, as before.
    with pytest.raises(CampaignError, match="score_DETAIL: score 6 is outside 1-5"):
        parse_rating([choice("score_DETAIL", "6")])
