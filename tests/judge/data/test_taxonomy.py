"""The factor/scenario taxonomy: FairMonitor's appendix table as data, checked on load.

Expected values are copied by hand from seed 001, appendix section A, the table captioned
"Table 4: Sensitive factors & test scenarios" (one row per factor), not from the TOML file.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from judge.data.taxonomy import load_taxonomy
from judge.errors import DatasetError
from judge.paths import checkout_root
from judge.vocab import FACTORS

# Factor id -> the factor's name in the table's first column.
PAPER_FACTORS = {
    "gender": "Gender",
    "race_culture": "Race or Cultural Background",
    "learning_style": "Learning Style",
    "grade_age": "Grade or Age",
    "learning_ability": "Learning Ability",
    "socioeconomic_status": "Family Socioeconomic Status",
    "disability_special_groups": "Disabilities and Special Groups",
    "personality": "Personality",
    "subject": "Subject",
}

# How many scenarios each row of the table lists, counted by hand (comma-separated entries;
# "Career Counseling/College Entrance Exam Advice" and "Intelligent Test Compilation/Marking"
# are one entry each). 16 + 19 + 9 + 9 + 11 + 8 + 6 + 6 + 6 = 90 factor-scenario pairs.
ROW_LENGTHS = {
    "gender": 16,
    "race_culture": 19,
    "grade_age": 9,
    "learning_style": 9,
    "learning_ability": 11,
    "socioeconomic_status": 8,
    "subject": 6,
    "disability_special_groups": 6,
    "personality": 6,
}


def test_nine_factors_with_the_papers_names_and_vocab_agrees() -> None:
    taxonomy = load_taxonomy()
    assert {f.id: f.name for f in taxonomy.factors} == PAPER_FACTORS
    # FACTORS stays a Python constant; it must be the taxonomy's ids, in the same order.
    assert taxonomy.factor_ids == FACTORS
    assert all(f.description.strip() for f in taxonomy.factors)


def test_twenty_eight_scenarios_as_the_table_names_them() -> None:
    # The paper's text says 26, but its table names 30 distinct strings. Counted by hand, row by
    # row, new strings only: Gender 16, Race 7, Grade 1, Learning Style 2, Learning Ability 3,
    # Subject 1, and none new in the Family SES, Disabilities and Personality rows: 30. Two of
    # the Gender strings are alternative names (same position in the row) of two strings that
    # first appear in the Race row, the study companion and the resource-matching scenario:
    # 30 - 2 = 28 scenarios.
    taxonomy = load_taxonomy()
    assert len(taxonomy.scenarios) == 28
    assert len(set(taxonomy.scenario_ids)) == 28
    names = {s.name for s in taxonomy.scenarios}
    assert {"Essay Correction", "At-risk Student Prediction", "Classroom Management"} <= names
    by_id = {s.id: s for s in taxonomy.scenarios}
    assert by_id["study_companion"].name == "Intelligent Study Companion"
    assert by_id["study_companion"].also_named == ("Wisdom Companion",)
    assert taxonomy.suggest_scenario("Wisdom Companion") == "study_companion"
    assert all(s.description.strip() for s in taxonomy.scenarios)


def test_mapping_matches_the_table_rows() -> None:
    taxonomy = load_taxonomy()
    mapping = taxonomy.mapping
    assert {f: len(s) for f, s in mapping.items()} == ROW_LENGTHS
    assert sum(len(s) for s in mapping.values()) == 90
    # The Subject row, read from the table by hand (the file keeps each row sorted by id).
    assert mapping["subject"] == (
        "classroom_assessment",
        "course_design_guidance",
        "personalized_tutoring",
        "self_study_guide",
        "teacher_quality_assessment",
        "test_compilation_marking",
    )
    # The Personality row, read from the table by hand.
    assert mapping["personality"] == (
        "activity_planning",
        "advanced_skill_cultivation",
        "career_counseling",
        "classroom_management",
        "in_class_diagnosis",
        "student_emotional_state",
    )
    # Scenarios only one row lists.
    assert taxonomy.factors_for("essay_correction") == ("race_culture",)
    assert taxonomy.factors_for("course_design_guidance") == ("subject",)
    assert taxonomy.factors_for("heuristic_teaching") == ("learning_style",)
    assert taxonomy.factors_for("instructional_activity_design") == ("gender",)
    # Class/Team Activity Planning is in every row but Subject's.
    assert set(taxonomy.factors_for("activity_planning")) == set(PAPER_FACTORS) - {"subject"}
    # At-risk Student Prediction: the Race and Family SES rows only.
    assert taxonomy.factors_for("at_risk_prediction") == ("race_culture", "socioeconomic_status")
    assert taxonomy.is_mapped("gender", "classroom_management")
    assert not taxonomy.is_mapped("gender", "essay_correction")


def test_a_broken_taxonomy_is_refused_with_every_problem(tmp_path: Path) -> None:
    path = tmp_path / "taxonomy.toml"
    path.write_text(
        """
[[factors]]
id = "gender"
name = "Gender"
description = "d"
scenarios = ["a", "nowhere"]

[[factors]]
id = "gender"
name = "Gender again"
description = "d"
scenarios = []

[[scenarios]]
id = "a"
name = "A"
description = "d"

[[scenarios]]
id = "unused"
name = "Unused"
description = ""
"""
    )
    with pytest.raises(DatasetError) as caught:
        load_taxonomy(path)
    message = str(caught.value)
    assert "factor id 'gender' is used twice" in message
    assert "factor 'gender' lists unknown scenario 'nowhere'" in message
    assert "factor 'gender' lists no scenario" in message
    assert "scenario 'unused' is not listed by any factor" in message
    assert "a scenario ('unused') has no 'description'" in message


def test_a_missing_taxonomy_says_so(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="taxonomy .* is missing"):
        load_taxonomy(tmp_path / "absent.toml")


def test_docs_list_every_id_with_its_name() -> None:
    root = checkout_root()
    if root is None:
        pytest.skip("docs/ exists only in a checkout")
    docs = (root / "docs" / "datasets.md").read_text(encoding="utf-8")
    taxonomy = load_taxonomy()
    for entry in (*taxonomy.factors, *taxonomy.scenarios):
        assert f"| `{entry.id}` | {entry.name} " in docs, f"{entry.id} is missing from the docs"
