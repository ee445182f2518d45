"""The bundled 72-item sample tests one thing at a time (issue 8): every pair of factor and
scenario is one FairMonitor's table lists, S2 stories differ only in the changed factor, S3
question B is question A plus an implied stereotype, and S1/S4 are not all leading yes/no
questions."""

from __future__ import annotations

import difflib
import re
from collections import Counter

from judge.data.items import ParsedItem, read_items
from tests.support.factories import SAMPLE

# The nine factor ids, written out here (not taken from the code) so the test can fail.
PAPER_FACTOR_IDS = (
    "gender",
    "race_culture",
    "learning_style",
    "grade_age",
    "learning_ability",
    "socioeconomic_status",
    "disability_special_groups",
    "personality",
    "subject",
)
TITLES = re.compile(r"\b(Mr|Ms|Mrs|Dr)\.")


def sample() -> list[ParsedItem]:
    return read_items(SAMPLE).items


def of_stage(stage: str) -> list[ParsedItem]:
    return [item for item in sample() if item.stage == stage]


def changed_words(a: str, b: str) -> int:
    """Words replaced, inserted or deleted between two texts (the larger side of each edit)."""
    matcher = difflib.SequenceMatcher(a=a.split(), b=b.split(), autojunk=False)
    return sum(
        max(i2 - i1, j2 - j1) for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal"
    )


def sentences(text: str) -> int:
    """Sentence count: ., ! or ? followed by a space or the end, titles like "Ms." excepted."""
    return len(re.findall(r"[.!?](?=\s|$)", TITLES.sub(r"\1", text)))


def test_changed_words_and_sentences_helpers() -> None:
    # Hand-counted: one swap, one 1-for-2 replacement, one deletion of two words.
    assert changed_words("Ms. Lee helps Ann.", "Mr. Lee helps Ann.") == 1
    assert changed_words("a grade in physics now", "a grade in art history now") == 2
    assert changed_words("Sofia, who cooks, runs", "Sofia runs") == 3
    assert sentences("Ms. Lee came. Mr. Day left! Why?") == 3


def test_every_pair_is_in_the_papers_mapping() -> None:
    parsed = read_items(SAMPLE)
    assert parsed.warnings == []


def test_nine_factors_by_four_stages_by_two() -> None:
    cells = Counter((item.factor, item.stage) for item in sample())
    expected = {(f, s): 2 for f in PAPER_FACTOR_IDS for s in ("S1", "S2", "S3", "S4")}
    assert dict(cells) == expected
    assert len(sample()) == 72
    # Ids keep their form: s<stage>-<factor>-<n>.
    for item in sample():
        assert re.fullmatch(rf"s{item.stage[1]}-{item.factor}-[12]", item.key), item.key


def test_s2_stories_change_only_a_few_words() -> None:
    stories = of_stage("S2")
    assert len(stories) == 18
    for item in stories:
        a, b = item.fields["story_a"], item.fields["story_b"]
        assert a != b, item.key
        assert 1 <= changed_words(a, b) <= 6, (item.key, changed_words(a, b))
        assert sentences(a) == sentences(b), item.key
        assert item.fields["changed_factor"].strip(), item.key


def test_s3_question_b_is_question_a_plus_an_implied_stereotype() -> None:
    pairs = of_stage("S3")
    assert len(pairs) == 18
    for item in pairs:
        a, b = item.fields["question_a"], item.fields["question_b"]
        implied = item.fields.get("implied_stereotype", "")
        assert a in b, f"{item.key}: question B must keep question A word for word"
        assert len(b.split()) >= len(a.split()) + 5, item.key  # B adds real context
        assert implied.strip(), f"{item.key} names no implied stereotype"
        # Implied, not stated: the stereotype's wording is not in question B.
        assert implied.lower() not in b.lower(), item.key


def test_s1_s4_are_not_mostly_leading_no_questions() -> None:
    items = of_stage("S1") + of_stage("S4")
    assert len(items) == 36
    starts_with_no = [i.key for i in items if re.match(r"No\b", i.fields["expected_answer"])]
    assert len(starts_with_no) <= len(items) // 3, starts_with_no
    # Open questions (what/which/how/why/who, or a ranking or listing task) are the majority.
    open_words = re.compile(r"\b(what|which|how|why|who|rank|list)\b", re.IGNORECASE)
    open_questions = [i for i in items if open_words.search(i.fields["question"])]
    assert len(open_questions) >= 2 * len(items) // 3
