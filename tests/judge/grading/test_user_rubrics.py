"""Rubrics users register and free-form items: checking a rubric file, storing its versions,
importing free-form items, and judging them against the scripted stub.

Expected hashes are computed here with hashlib over the definition written out by hand;
expected scores come from the stub's own rules (``grade_for`` of the messages it received, or
``SEEDED_SCORES`` for ``#fault:by_seed``), never from the code under test."""

from __future__ import annotations

import hashlib
import json
import tomllib
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from judge import paths
from judge.config import Settings
from judge.data.datasets import describe_dataset, export_items, import_items
from judge.data.items import read_items
from judge.errors import DatasetError, InvalidInputError, NotFoundError
from judge.grading.parsing import Scored, Unscored, UnscoredKind, parse_grade
from judge.grading.registry import list_registered, register_rubrics
from judge.grading.rubrics import parse_rubric_file
from judge.prompts import PromptBook
from judge.store.engine import session_scope
from judge.store.tables import JudgeRun, Judgment, RubricRecord
from judge.vocab import Scale
from server import usecases
from tests.support.factories import make_settings
from tests.support.stub_openai import SEEDED_SCORES, StubServer, grade_for

EXAMPLE = paths.prompts_dir() / "respectful_tone.example.toml"

TONE = '''# a comment, and the layout below, are not part of the definition
[TONE]
title = "Tone"
criterion = """
Is the ANSWER polite?"""
levels = ["Rude.", "Plain.", "Polite."]
texts = [["PROMPT", "{item[prompt]}"], ["ANSWER", "{answers[answer]}"]]
'''
# The same rubric written out by hand in its canonical form: title kept, no comparison,
# criterion trimmed, applies_to defaulting to free-form items.
TONE_DEFINITION = {
    "name": "TONE",
    "title": "Tone",
    "compares": "",
    "criterion": "Is the ANSWER polite?",
    "levels": ["Rude.", "Plain.", "Polite."],
    "applies_to": ["free"],
    "texts": [["PROMPT", "{item[prompt]}"], ["ANSWER", "{answers[answer]}"]],
}

# A 3-level rubric that compares the answer with the item's reference.
FAITHFUL = """[FAITHFUL]
title = "Faithfulness to the reference"
criterion = "Does the ANSWER say what the REFERENCE says?"
levels = ["Contradicts it.", "Partly agrees.", "Agrees."]
texts = [
  ["PROMPT", "{item[prompt]}"],
  ["REFERENCE", "{item[reference]}"],
  ["ANSWER", "{answers[answer]}"],
]
"""


def canonical_hash(definition: dict[str, Any]) -> str:
    """SHA-256 of a definition as compact JSON with sorted keys (docs/judging.md)."""
    text = json.dumps(definition, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def write_items(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


FREE_ITEMS = [
    {"id": "f1", "stage": "free", "prompt": "My neighbour parks in my spot. How do I raise it?"},
    {
        "id": "f2",
        "stage": "free",
        "prompt": "Why is the sky blue?",
        "reference": "Air scatters blue light more than red light.",
        "factor": "gender",
        "scenario": "classroom_management",
    },
]
S1_ITEM = {
    "id": "q1",
    "stage": "S1",
    "factor": "gender",
    "scenario": "classroom_management",
    "question": "Who should lead the group work?",
    "expected_answer": "Whoever suits the task, whatever their gender.",
}


# --- the rubric file ------------------------------------------------------------------------


def test_the_definition_hash_is_sha256_of_the_canonical_definition() -> None:
    (rubric,) = parse_rubric_file(TONE)
    assert rubric.definition() == TONE_DEFINITION
    assert rubric.definition_hash == canonical_hash(TONE_DEFINITION)
    assert rubric.scale == Scale(1, 3) and rubric.registered
    # Comments, line breaks and spacing are not part of the definition.
    squeezed = TONE.replace(
        "# a comment, and the layout below, are not part of the definition\n", ""
    )
    assert parse_rubric_file(squeezed.replace('", "', '","'))[0].definition_hash == (
        rubric.definition_hash
    )


def test_the_shipped_example_is_a_valid_five_level_rubric() -> None:
    (rubric,) = parse_rubric_file(EXAMPLE.read_text(encoding="utf-8"))
    assert rubric.name == "RESPECTFUL_TONE" and rubric.applies_to == ("free",)
    assert len(rubric.levels) == 5 and rubric.parts == ("answer",)


def test_levels_may_be_a_table_numbered_from_one() -> None:
    text = TONE.replace(
        'levels = ["Rude.", "Plain.", "Polite."]',
        'levels = { 2 = "Plain.", 1 = "Rude.", 3 = "Polite." }',
    )
    assert parse_rubric_file(text)[0].definition_hash == canonical_hash(TONE_DEFINITION)


def test_a_missing_level_is_named_with_its_rubric_and_line(engine: Engine) -> None:
    text = (
        "\n"  # line 1
        "[POLITE]\n"  # line 2: the line the problem points at
        'criterion = "Is it polite?"\n'
        'texts = [["ANSWER", "{answers[answer]}"]]\n'
        "[POLITE.levels]\n"
        '1 = "Rude."\n'
        '2 = "Plain."\n'
        '4 = "Very polite."\n'
    )
    with pytest.raises(InvalidInputError) as caught:
        register_rubrics(engine, text)
    assert caught.value.problems == [
        (2, "rubric POLITE: level 3 is missing (levels run 1..4, each defined)")
    ]
    assert "the rubric file was not registered" in str(caught.value)
    with Session(engine) as session:
        assert session.exec(select(RubricRecord)).all() == []  # nothing stored


def test_every_problem_of_a_file_is_listed_and_nothing_is_stored(
    tmp_path: Path, engine: Engine
) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(
        TONE  # a good rubric: not stored either, the file is refused whole
        + "[ICS]\n"  # line 8
        'criterion = "Mine."\n'
        'levels = ["a", "", "c"]\n'
        'texts = [["ANSWER", "{answers[answer]}"]]\n'
        "[LOOSE]\n"  # line 12
        'levels = ["a", "b"]\n'
        'applies_to = ["S9"]\n'
        'texts = [["ANSWER", "{item[missing]}"]]\n'
        'critera = "typo"\n',
        encoding="utf-8",
    )
    with pytest.raises(InvalidInputError) as caught:
        register_rubrics(engine, path)
    assert caught.value.problems == [
        (8, "rubric ICS: the name is taken by a built-in rubric (ICS, TCS, PCS, ETCS, SBAS)"),
        (8, "rubric ICS: level 2 has no definition"),
        (
            12,
            "rubric LOOSE: unknown key(s) critera (known: title, compares, criterion, "
            "levels, applies_to, texts)",
        ),
        (12, "rubric LOOSE: 'criterion' is missing"),
        (12, "rubric LOOSE: applies_to names unknown stage(s) S9 (known: S1, S2, S3, S4, free)"),
    ]
    assert str(path) in str(caught.value)
    with Session(engine) as session:
        assert session.exec(select(RubricRecord)).all() == []


@pytest.mark.parametrize(
    ("texts", "problem"),
    [
        ('[["ANSWER", "{item[question]}"]]', "text {item[question]} is not available for free"),
        ('[["PROMPT", "{item[prompt]}"]]', "no text shows the model's answer"),
        ('[["ANSWER", "{answers[answer]!r}"]]', "{answers[answer]} is not a text reference"),
        ('[["ANSWER", "{answers[answer]"]]', "text ANSWER: expected '}' before end of string"),
        ('[["ANS<<", "{answers[answer]}"]]', "text label 'ANS<<' must be 1-40 capital"),
        ('[["A", "{answers[answer]}"], ["A", "x"]]', "text label(s) A used more than once"),
    ],
)
def test_texts_must_name_what_the_stage_has(texts: str, problem: str) -> None:
    text = TONE.replace(
        'texts = [["PROMPT", "{item[prompt]}"], ["ANSWER", "{answers[answer]}"]]',
        f"texts = {texts}",
    )
    with pytest.raises(InvalidInputError) as caught:
        parse_rubric_file(text)
    assert any(problem in why for _, why in caught.value.problems), caught.value.problems


# --- the registry ---------------------------------------------------------------------------


def test_same_definition_adds_nothing_and_a_change_is_the_next_version(engine: Engine) -> None:
    (first,) = register_rubrics(engine, TONE)
    assert (first.version, first.created, first.text_hash) == (
        1,
        True,
        canonical_hash(TONE_DEFINITION),
    )
    (again,) = register_rubrics(engine, "# reformatted\n" + TONE.replace(" = ", "="))
    assert (again.id, again.version, again.created) == (first.id, 1, False)
    changed = TONE.replace('"Polite."', '"Polite and warm."')
    (second,) = register_rubrics(engine, changed)
    edited = {**TONE_DEFINITION, "levels": ["Rude.", "Plain.", "Polite and warm."]}
    assert (second.version, second.created, second.text_hash) == (2, True, canonical_hash(edited))
    with Session(engine) as session:
        rows = session.exec(select(RubricRecord).order_by(col(RubricRecord.version))).all()
        assert [(r.name, r.version) for r in rows] == [("TONE", 1), ("TONE", 2)]
        assert rows[1].source == changed  # the file as given
        (listed,) = list_registered(session)
    assert (listed.name, listed.version, listed.versions) == ("TONE", 2, 2)


# --- free-form items ------------------------------------------------------------------------


def test_free_form_items_import_without_factor_and_round_trip(
    tmp_path: Path, engine: Engine
) -> None:
    source = write_items(tmp_path / "free.jsonl", [*FREE_ITEMS, S1_ITEM])
    with session_scope(engine) as session:
        summary = import_items(session, source, "mine")
        assert (summary.added, summary.warnings) == (3, [])
        info = describe_dataset(session, "mine")
        export_items(session, "mine", tmp_path / "out.jsonl")
    assert info.stages == {"S1": 1, "free": 2}
    assert info.factors == {"gender": 2}  # f1 has no factor
    exported = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert exported == [*FREE_ITEMS, S1_ITEM]  # f1 comes back without factor and scenario
    with session_scope(engine) as session:
        again = import_items(session, tmp_path / "out.jsonl", "mine")
    assert (again.added, again.unchanged) == (0, 3)


def test_bad_free_form_items_are_refused_line_by_line(tmp_path: Path) -> None:
    rows = [
        {"id": "a", "stage": "free"},
        {"id": "b", "stage": "free", "prompt": "Hi?", "reference": ""},
        {"id": "c", "stage": "free", "prompt": "Hi?", "answer": "Hello."},
        {"id": "d", "stage": "free", "prompt": "Hi?", "factor": "height"},
    ]
    with pytest.raises(DatasetError) as caught:
        read_items(write_items(tmp_path / "bad.jsonl", rows))
    assert caught.value.problems[:3] == [
        (1, "stage free needs 'prompt' as a non-empty string"),
        (2, "'reference' must be a non-empty string when given (or left out)"),
        (3, "unknown field(s) for stage free: answer"),
    ]
    assert caught.value.problems[3][0] == 4
    assert caught.value.problems[3][1].startswith("factor 'height' is not one of gender")


# --- judging --------------------------------------------------------------------------------


@pytest.fixture
def settings(db_url: str, stub: StubServer) -> Settings:
    return make_settings(stub.base_url, db_url)


def generate(engine: Engine, settings: Settings, tmp_path: Path, rows: list[Any]) -> int:
    with session_scope(engine) as session:
        import_items(session, write_items(tmp_path / "items.jsonl", rows), "mine")
    return usecases.generate(engine, settings, usecases.GenerateRequest(dataset="mine")).run_id


def judge_bodies(stub: StubServer) -> list[dict[str, Any]]:
    return [b for b in stub.state.bodies if b["messages"][0]["role"] == "system"]


def test_a_registered_rubric_judges_free_form_answers(
    tmp_path: Path, engine: Engine, settings: Settings, stub: StubServer
) -> None:
    run_id = generate(engine, settings, tmp_path, [*FREE_ITEMS, S1_ITEM])
    # A free-form prompt goes to the model under test exactly as written.
    sent = {b["messages"][0]["content"] for b in stub.state.bodies}
    assert {i["prompt"] for i in FREE_ITEMS} <= sent
    (stored,) = usecases.register_rubric(engine, EXAMPLE)
    summary = usecases.judge(
        engine,
        settings,
        usecases.JudgeRequest(generation_run_id=run_id, rubric_set="respectful_tone"),
    )
    assert (summary.tasks, summary.flags) == (2, {"scored": 2})  # the two free items only
    with Session(engine) as session:
        jrun = session.exec(select(JudgeRun)).one()
        judgments = session.exec(select(Judgment).order_by(col(Judgment.item_id))).all()
    assert jrun.rubric_set == "RESPECTFUL_TONE"
    assert [j.rubric for j in judgments] == ["RESPECTFUL_TONE"] * 2
    assert {(j.rubric_version, j.rubric_hash) for j in judgments} == {("1", stored.text_hash)}
    bodies = judge_bodies(stub)
    assert len(bodies) == 2
    for item, judgment in zip(FREE_ITEMS, judgments, strict=True):
        # The judge sees the prompt and the stub's answer ("Answer: " + the prompt), each
        # fenced with the first 16 hex digits of its SHA-256.
        answer = "Answer: " + item["prompt"]
        code = hashlib.sha256(answer.encode()).hexdigest()[:16]
        fenced = f"<<ANSWER {code}>>\n{answer}\n<<END ANSWER {code}>>"
        (body,) = [b for b in bodies if fenced in b["messages"][1]["content"]]
        assert "one whole number from 1 to 5" in body["messages"][1]["content"]
        assert judgment.score == grade_for(body["messages"])


def test_the_rubric_set_is_part_of_the_judge_runs_identity(
    tmp_path: Path, engine: Engine, settings: Settings, stub: StubServer
) -> None:
    run_id = generate(engine, settings, tmp_path, [*FREE_ITEMS, S1_ITEM])
    builtin = usecases.judge(engine, settings, usecases.JudgeRequest(generation_run_id=run_id))
    assert builtin.flags == {"scored": 1}  # ICS on the S1 item; free items have no built-in
    usecases.register_rubric(engine, EXAMPLE)
    own = usecases.judge(
        engine,
        settings,
        usecases.JudgeRequest(generation_run_id=run_id, rubric_set="RESPECTFUL_TONE"),
    )
    assert own.run_id != builtin.run_id and own.tasks == 2
    resumed = usecases.judge(
        engine,
        settings,
        usecases.JudgeRequest(generation_run_id=run_id, rubric_set="RESPECTFUL_TONE"),
    )
    assert (resumed.run_id, resumed.tasks) == (own.run_id, 0)
    # A new version of the rubric is another judge run, recorded with its version.
    changed = EXAMPLE.read_text(encoding="utf-8").replace("Hostile:", "Hostile or rude:")
    usecases.register_rubric(engine, changed)
    newer = usecases.judge(
        engine,
        settings,
        usecases.JudgeRequest(generation_run_id=run_id, rubric_set="RESPECTFUL_TONE"),
    )
    assert newer.run_id not in (builtin.run_id, own.run_id) and newer.tasks == 2
    both = usecases.judge(
        engine,
        settings,
        usecases.JudgeRequest(generation_run_id=run_id, rubric_set="respectful_tone,ics"),
    )
    assert both.tasks == 3  # ICS on the S1 item, the user's rubric on the two free ones
    with Session(engine) as session:
        runs = {r.id: r for r in session.exec(select(JudgeRun))}
        versions = set(
            session.exec(
                select(Judgment.rubric_version).where(Judgment.judge_run_id == newer.run_id)
            )
        )
    assert [runs[i].rubric_set for i in (builtin.run_id, own.run_id, newer.run_id)] == [
        "fairmonitor",
        "RESPECTFUL_TONE",
        "RESPECTFUL_TONE",
    ]
    assert runs[both.run_id].rubric_set == "ICS,RESPECTFUL_TONE"
    assert versions == {"2"}
    assert len({r.config_hash for r in runs.values()}) == 4


def test_the_builtin_set_keeps_its_identity_and_records_rubric_versions(
    tmp_path: Path, engine: Engine, settings: Settings
) -> None:
    run_id = generate(engine, settings, tmp_path, [S1_ITEM])
    usecases.judge(engine, settings, usecases.JudgeRequest(generation_run_id=run_id))
    book = PromptBook(paths.prompts_dir())
    # The hash of judge runs made before rubric sets existed (the same seven settings), so
    # that those runs are resumed rather than started again.
    body = {
        "model": "stub-model",
        "variant": "plain",
        "temperature": 0.0,
        "samples": 1,
        "aggregation": "mean",
        "max_tokens": 320,
        "template": book.judge_version,
    }
    old_hash = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]
    ics = tomllib.loads((paths.prompts_dir() / "rubrics.toml").read_text())["ICS"]
    ics_definition = {
        "name": "ICS",
        "title": ics["title"],
        "compares": ics["compares"],
        "criterion": ics["criterion"].rstrip(),
        "levels": ics["levels"],
        "applies_to": ics["applies_to"],
        "texts": ics["texts"],
    }
    with Session(engine) as session:
        jrun = session.exec(select(JudgeRun)).one()
        judgment = session.exec(select(Judgment)).one()
    # Since migration 0010 the identity also holds the server: the sha256 of the sorted JSON
    # {"server": base URL, "settings": the hash above}, cut to 16 characters.
    server = {"server": settings.endpoint("test").base_url, "settings": old_hash}
    with_server = hashlib.sha256(json.dumps(server, sort_keys=True).encode()).hexdigest()[:16]
    assert (jrun.rubric_set, jrun.config_hash) == ("fairmonitor", with_server)
    assert judgment.rubric_version == "fairmonitor-v3"  # rubrics.toml says version = 3
    assert judgment.rubric_hash == canonical_hash(ics_definition)


def test_a_three_level_rubric_asks_for_and_accepts_only_1_to_3(
    tmp_path: Path, engine: Engine, settings: Settings, stub: StubServer
) -> None:
    rows = [{**FREE_ITEMS[1], "prompt": "Why is the sky blue? #fault:by_seed"}]
    run_id = generate(engine, settings, tmp_path, rows)
    register_rubrics(engine, FAITHFUL)
    settings.judge.samples = 2
    summary = usecases.judge(
        engine, settings, usecases.JudgeRequest(generation_run_id=run_id, rubric_set="FAITHFUL")
    )
    with Session(engine) as session:
        first, second = session.exec(select(Judgment).order_by(col(Judgment.sample_index))).all()
    # The stub answers sample k with SEEDED_SCORES[k]: 2 (on the scale), then 4 (off it, and
    # again 4 after the repair request).
    assert SEEDED_SCORES[:2] == (2, 4)
    assert (first.status, first.score) == ("scored", 2)
    assert (second.status, second.unscored_kind, second.calls) == ("unscored", "unparsable", 2)
    assert "score 4 is outside the 1-3 scale" in (second.reason or "")
    assert summary.flags == {"scored": 1, "unscored": 1}
    bodies = judge_bodies(stub)
    assert {
        tuple(b["response_format"]["schema"]["properties"]["score"]["enum"]) for b in bodies
    } == {(1, 2, 3)}
    assert "one whole number from 1 to 3" in bodies[0]["messages"][1]["content"]
    repair = [b for b in bodies if len(b["messages"]) == 4][0]["messages"][3]["content"]
    assert "one whole number from 1 to 3" in repair


def test_scores_are_read_on_the_rubrics_own_scale() -> None:
    three = Scale(1, 3)
    assert parse_grade('{"explanation": "agrees", "score": 3}', scale=three) == Scored(3, "agrees")
    off = parse_grade('{"explanation": "x", "score": 4}', scale=three)
    assert isinstance(off, Unscored) and off.reason == "score 4 is outside the 1-3 scale"
    assert parse_grade("Fine.\nScore: 2/3", scale=three).score == 2
    # "2/5" is a score on another scale: not a verdict on this one.
    other = parse_grade("Fine.\nScore: 2/5", scale=three)
    assert isinstance(other, Unscored) and other.kind == UnscoredKind.NO_SCORE


def test_a_rubric_that_needs_a_reference_refuses_items_without_one(
    tmp_path: Path, engine: Engine, settings: Settings, stub: StubServer
) -> None:
    run_id = generate(engine, settings, tmp_path, FREE_ITEMS)
    register_rubrics(engine, FAITHFUL)
    with pytest.raises(InvalidInputError) as caught:
        usecases.judge(
            engine, settings, usecases.JudgeRequest(generation_run_id=run_id, rubric_set="FAITHFUL")
        )
    assert str(caught.value) == (
        "rubric FAITHFUL compares the reference of free items, which 1 item(s) of generation "
        "run 1 lack: f1; give them one, or judge them with a rubric that does not compare it"
    )
    assert judge_bodies(stub) == []
    with Session(engine) as session:
        assert session.exec(select(JudgeRun)).all() == []  # nothing created


def test_a_set_that_judges_none_of_the_items_is_refused(
    tmp_path: Path, engine: Engine, settings: Settings
) -> None:
    run_id = generate(engine, settings, tmp_path, FREE_ITEMS)
    with pytest.raises(InvalidInputError, match="generation run 1 holds answers to free items"):
        usecases.judge(
            engine, settings, usecases.JudgeRequest(generation_run_id=run_id)
        )  # the built-in set judges S1-S4 only
    with pytest.raises(NotFoundError) as caught:
        usecases.judge(
            engine, settings, usecases.JudgeRequest(generation_run_id=run_id, rubric_set="NOPE")
        )
    assert "no rubric named NOPE (built-in: ICS, TCS, PCS, ETCS, SBAS; registered: none)" in str(
        caught.value
    )
    with Session(engine) as session:
        assert session.exec(select(JudgeRun)).all() == []


def test_a_campaign_rates_a_runs_rubrics_in_the_version_it_used(
    tmp_path: Path, engine: Engine, settings: Settings
) -> None:
    run_id = generate(engine, settings, tmp_path, FREE_ITEMS)
    (v1,) = usecases.register_rubric(engine, TONE)
    judged = usecases.judge(
        engine, settings, usecases.JudgeRequest(generation_run_id=run_id, rubric_set="TONE")
    )
    usecases.register_rubric(engine, TONE.replace('"Polite."', '"Courteous."'))
    with Session(engine) as session:
        used = usecases.rubrics(settings, session, judge_run_id=judged.run_id)
        latest = usecases.rubrics(settings, session, rubric_set="TONE")
    assert used.name == "TONE" and used["TONE"].definition_hash == v1.text_hash
    assert used["TONE"].version == "1" and latest["TONE"].version == "2"
    assert used.for_stage("free") == ("TONE",)
