"""Label Studio interfaces built from the rubrics, and annotations read back.

Expected values come from prompts/rubrics.toml read with tomllib (not through the rubric
registry), from docs/datasets.md's field table, or are written out by hand; the XML is read
back with xml.etree.
"""

from __future__ import annotations

import re
import tomllib
import xml.etree.ElementTree as ET
from typing import Any

import pytest

from annotation.errors import CampaignError
from annotation.labelstudio.interface import (
    RatingValue,
    ReviewValue,
    assert_blind,
    control_name,
    label_config,
    parse_control_name,
    parse_rating,
    parse_review,
    review_config,
    review_fields,
    review_task_data,
    task_data,
)
from judge import paths
from judge.grading.rubrics import Rubric, load_rubrics


@pytest.fixture(scope="module")
def rubrics() -> list[Rubric]:
    return list(load_rubrics(paths.prompts_dir()))


@pytest.fixture(scope="module")
def toml() -> dict[str, Any]:
    raw = tomllib.loads((paths.prompts_dir() / "rubrics.toml").read_text(encoding="utf-8"))
    return {name: spec for name, spec in raw.items() if isinstance(spec, dict)}


S1_FIELDS = {"question": "Who makes a good engineer?", "expected_answer": "Anyone trained."}
S1_ANSWERS = {"answer": "Skill matters, not gender."}
S2_FIELDS = {
    "story_a": "Tom joins the class.",
    "story_b": "Mia joins the class.",
    "changed_factor": "gender",
}
S2_ANSWERS = {"A": "He makes friends.", "B": "She makes friends."}
S3_FIELDS = {"question_a": "Plan a trip.", "question_b": "Plan a trip for the girls."}
S3_ANSWERS = {"A": "Visit a museum.", "B": "Visit a museum too."}

# Every {field}/{answer} reference resolves for these items, one per stage.
ITEMS = {
    "S1": (S1_FIELDS, S1_ANSWERS),
    "S2": (S2_FIELDS, S2_ANSWERS),
    "S3": (S3_FIELDS, S3_ANSWERS),
    "S4": (S1_FIELDS, S1_ANSWERS),
}


def tasks(rubrics: list[Rubric]) -> dict[str, dict[str, Any]]:
    return {
        stage: task_data(f"item-{stage}", stage, rubrics, fields, answers, "camp-1")
        for stage, (fields, answers) in ITEMS.items()
    }


def data_refs(xml: str) -> set[str]:
    """Every "$key" an attribute of the config reads from task data."""
    return {
        value[1:]
        for element in ET.fromstring(xml).iter()
        for value in element.attrib.values()
        if value.startswith("$")
    }


# -- the rating config --------------------------------------------------------------------------


def test_config_shares_text_slots_between_rubrics(rubrics: list[Rubric], toml: dict) -> None:
    root = ET.fromstring(label_config(rubrics))
    texts = [e for e in root.iter("Text")]
    # Distinct labels in rubrics.toml, by hand: ICS 3 (QUESTION, EXPECTED UNBIASED ANSWER,
    # ANSWER), TCS/PCS/ETCS the same 3 (CHANGED FACTOR, STORY A, STORY B), SBAS 4.
    labels = {label for spec in toml.values() for label, _ in spec["texts"]}
    assert len(labels) == 10
    assert len(texts) == 10
    names = [e.get("name") for e in root.iter() if e.get("name")]
    assert len(names) == len(set(names))
    s2_only = [r for r in rubrics if r.name in ("TCS", "PCS", "ETCS")]
    assert len(list(ET.fromstring(label_config(s2_only)).iter("Text"))) == 3


def test_config_has_one_score_and_rationale_per_rubric(rubrics: list[Rubric], toml: dict) -> None:
    root = ET.fromstring(label_config(rubrics))
    objects = {e.get("name") for e in root.iter("Text")}
    choices = {e.get("name"): e for e in root.iter("Choices")}
    assert set(choices) == {f"score_{name}" for name in toml}
    for name in toml:
        score = choices[f"score_{name}"]
        assert score.get("choice") == "single-radio"
        assert score.get("value") == f"$fj_levels_{name}"
        assert score.get("toName") in objects
        gates = [
            v
            for v in root.iter("View")
            if v.get("visibleWhen") == "choice-selected" and v.get("whenTagName") == f"score_{name}"
        ]
        assert [t.get("name") for g in gates for t in g.iter("TextArea")] == [f"rationale_{name}"]


def test_every_config_reference_is_in_every_task(rubrics: list[Rubric]) -> None:
    # Label Studio checks on import that a task holds the keys its config reads.
    refs = data_refs(label_config(rubrics))
    for data in tasks(rubrics).values():
        assert refs <= set(data)
    # Static attribute texts with "$word" inside would be replaced with task data.
    for element in ET.fromstring(label_config(rubrics)).iter():
        for value in element.attrib.values():
            assert value.startswith("$") or "$" not in value


# -- task data ----------------------------------------------------------------------------------


def test_task_shows_the_stage_texts_as_the_judge_prompt_labels_them(rubrics: list[Rubric]) -> None:
    data = tasks(rubrics)["S2"]
    assert data["fj_task"] == "camp-1:item-S2"
    assert (data["fj_item"], data["fj_stage"]) == ("item-S2", "S2")
    assert data["fj_rubrics"] == ["TCS", "PCS", "ETCS"]
    # rubrics.toml: STORY A = "{item[story_a]}\n{answers[A]}".
    assert data["fj_label_story_a"] == "STORY A"
    assert data["fj_text_story_a"] == "Tom joins the class.\nHe makes friends."
    assert data["fj_text_changed_factor"] == "gender"
    assert data["fj_label_question"] == data["fj_text_question"] == ""
    assert data["fj_levels_ICS"] == data["fj_levels_SBAS"] == []
    assert data["fj_title_ICS"] == ""
    s3 = tasks(rubrics)["S3"]
    assert (s3["fj_label_answer_b"], s3["fj_text_answer_b"]) == ("ANSWER B", "Visit a museum too.")


def test_every_level_definition_is_offered_with_its_number(
    rubrics: list[Rubric], toml: dict
) -> None:
    by_stage = tasks(rubrics)
    for name, spec in toml.items():
        data = by_stage[spec["applies_to"][0]]
        expected = [
            {"value": f"{n} — {level}", "alias": str(n)}
            for n, level in enumerate(spec["levels"], start=1)
        ]
        assert data[f"fj_levels_{name}"] == expected
        assert data[f"fj_title_{name}"] == f"{name}: {spec['title']}"
        assert data[f"fj_criterion_{name}"] == spec["criterion"].strip()


def test_task_needs_the_fields_its_rubrics_read(rubrics: list[Rubric]) -> None:
    with pytest.raises(CampaignError, match="story_b"):
        task_data("x", "S2", rubrics, {"story_a": "a", "changed_factor": "g"}, S2_ANSWERS, "c")
    s2_only = [r for r in rubrics if "S2" in r.applies_to]
    with pytest.raises(CampaignError, match="no rubric"):
        task_data("x", "S1", s2_only, S1_FIELDS, S1_ANSWERS, "c")


def test_blind_check_finds_a_planted_judge_explanation(rubrics: list[Rubric]) -> None:
    explanation = "The answer matches the expected ideas closely."
    clean = task_data("i", "S1", rubrics, S1_FIELDS, S1_ANSWERS, "c")
    assert_blind(clean, [explanation, ""])
    planted = task_data("i", "S1", rubrics, S1_FIELDS, {"answer": f"ok. {explanation}"}, "c")
    with pytest.raises(CampaignError, match="fj_text_answer"):
        assert_blind(planted, [explanation])
    with pytest.raises(CampaignError, match="blind"):
        assert_blind({"fj_levels_X": [{"value": explanation}]}, [explanation])


# -- names and parsing --------------------------------------------------------------------------


def test_control_names_round_trip(toml: dict) -> None:
    for name in toml:
        for kind in ("score", "rationale"):
            assert parse_control_name(control_name(kind, name)) == (kind, name)
    assert control_name("score", "TCS") == "score_TCS"
    for bad in ("mood", "grade_TCS", "score_", "score"):
        with pytest.raises(CampaignError, match="unknown control"):
            parse_control_name(bad)


def choice(name: str, *values: Any) -> dict[str, Any]:
    return {
        "from_name": name,
        "to_name": "text_story_a",
        "type": "choices",
        "value": {"choices": list(values)},
    }


def text(name: str, *values: str) -> dict[str, Any]:
    return {
        "from_name": name,
        "to_name": "text_story_a",
        "type": "textarea",
        "value": {"text": list(values)},
    }


def test_parse_rating_reads_scores_and_rationales() -> None:
    result = [
        choice("score_TCS", "3"),
        text("rationale_TCS", "Same theme.\r\n"),
        choice("score_PCS", "5"),
        choice("score_ETCS", "1"),
    ]
    assert parse_rating(result, expected=["TCS", "PCS", "ETCS"]) == {
        "TCS": RatingValue(3, "Same theme."),
        "PCS": RatingValue(5, None),
        "ETCS": RatingValue(1, None),
    }


@pytest.mark.parametrize(
    ("result", "problem"),
    [
        ([choice("score_TCS", "6")], "outside 1-5"),
        ([choice("score_TCS", "0")], "outside 1-5"),
        ([choice("score_TCS", "3 — Partial")], "not a whole-number"),
        ([choice("score_TCS", "2", "3")], "exactly one choice"),
        ([choice("score_TCS")], "exactly one choice"),
        ([choice("mood", "3")], "unknown control 'mood'"),
        ([text("score_TCS", "3")], "expected a choices result"),
        ([choice("score_TCS", "3"), choice("score_TCS", "4")], "twice"),
        ([text("rationale_PCS", "why")], "without a score for PCS"),
        ([{"from_name": "score_TCS", "type": "choices", "value": {}}], "no list"),
    ],
)
def test_parse_rating_rejects_bad_results(result: list[dict], problem: str) -> None:
    with pytest.raises(CampaignError, match=re.escape(problem)):
        parse_rating(result)


def test_parse_rating_checks_the_task_rubrics() -> None:
    with pytest.raises(CampaignError, match="PCS unscored"):
        parse_rating([choice("score_TCS", "3")], expected=["TCS", "PCS"])
    with pytest.raises(CampaignError, match="ICS, which the task lacks"):
        parse_rating([choice("score_TCS", "3"), choice("score_ICS", "2")], expected=["TCS"])


# -- review -------------------------------------------------------------------------------------


def test_review_fields_follow_the_dataset_docs() -> None:
    # docs/datasets.md: required fields per stage, then the optional ones.
    assert review_fields(["S2"]) == (
        "story_a",
        "story_b",
        "changed_factor",
        "expected_answer",
        "implied_stereotype",
        "notes",
    )
    assert set(review_fields()) == {
        "question",
        "expected_answer",
        "story_a",
        "story_b",
        "changed_factor",
        "question_a",
        "question_b",
        "implied_stereotype",
        "notes",
    }
    with pytest.raises(CampaignError):
        review_fields(["S9"])


def test_review_config_prefills_an_edit_box_per_field() -> None:
    xml = review_config(["S1", "S3"])
    root = ET.fromstring(xml)
    decision = next(e for e in root.iter("Choices") if e.get("name") == "decision")
    assert [c.get("value") for c in decision.iter("Choice")] == ["accept", "edit", "reject"]
    assert decision.get("required") == "true"
    areas = {e.get("name"): e.get("value") for e in root.iter("TextArea")}
    fields = [
        "question",
        "expected_answer",
        "question_a",
        "question_b",
        "implied_stereotype",
        "notes",
    ]
    assert areas == {"reason": None} | {f"edit_{f}": f"$fj_field_{f}" for f in fields}
    data = review_task_data("s3-1", "S3", S3_FIELDS, "rev-1", stages=["S1", "S3"])
    assert data_refs(xml) <= set(data)
    assert data["fj_task"] == "rev-1:s3-1"
    assert (data["fj_label_question_b"], data["fj_field_question_b"]) == (
        "question_b",
        "Plan a trip for the girls.",
    )
    assert data["fj_label_question"] == data["fj_field_question"] == ""


def test_review_task_refuses_fields_it_cannot_show() -> None:
    with pytest.raises(CampaignError, match="stage S2 is not among S1"):
        review_task_data("x", "S2", S2_FIELDS, "c", stages=["S1"])
    with pytest.raises(CampaignError, match="story_a cannot be reviewed"):
        review_task_data("x", "S1", S1_FIELDS | {"story_a": "a"}, "c", stages=["S1"])


ORIGINAL = {"question_a": "Plan a trip.", "question_b": "Plan a trip for the girls."}


def test_parse_review_keeps_only_changed_fields() -> None:
    result = [
        choice("decision", "edit"),
        text("edit_question_a", "Plan a trip.\r\n"),  # pre-filled, untouched
        text("edit_question_b", "Plan a trip for the pupils."),
    ]
    assert parse_review(result, ORIGINAL) == ReviewValue(
        "edit", None, {"question_b": "Plan a trip for the pupils."}
    )
    accepted = [choice("decision", "accept"), text("edit_question_a", "Plan a trip.")]
    assert parse_review(accepted, ORIGINAL) == ReviewValue("accept", None, {})
    rejected = [choice("decision", "reject"), text("reason", "Not a stereotype.")]
    assert parse_review(rejected, ORIGINAL) == ReviewValue("reject", "Not a stereotype.", {})


@pytest.mark.parametrize(
    ("result", "problem"),
    [
        ([choice("decision", "reject")], "reject needs a reason"),
        ([choice("decision", "reject"), text("reason", "  ")], "reject needs a reason"),
        ([choice("decision", "edit"), text("edit_question_a", "Plan a trip.")], "no field differs"),
        ([choice("decision", "accept"), text("edit_question_a", "New.")], "question_a changed"),
        ([text("reason", "why")], "expected one of accept, edit, reject"),
        ([choice("decision", "maybe")], "expected one of"),
        ([choice("decision", "accept"), choice("mood", "x")], "unknown control 'mood'"),
        ([choice("decision", "edit"), text("edit_question_a", "a", "b")], "2 texts"),
    ],
)
def test_parse_review_rejects_incomplete_reviews(result: list[dict], problem: str) -> None:
    with pytest.raises(CampaignError, match=re.escape(problem)):
        parse_review(result, ORIGINAL)
