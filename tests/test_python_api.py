"""FairJudge's Python face (docs/python.md): the page's table and ``server.usecases.__all__``
name the same things, each public name says what it does, and the page's worked example runs
as written against the stub endpoint (tests/support/stub_openai.py) and makes no call when
run again."""

from __future__ import annotations

import contextlib
import io
import json
import re
import tomllib
import typing
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import Session, col, create_engine, func, select

import server.usecases as face
from judge.store.tables import Judgment
from tests.support.factories import write_config
from tests.support.stub_openai import StubServer

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "python.md"


def _page_names() -> set[str]:
    """The names in the first column of the page's table (each between backticks)."""
    names: set[str] = set()
    for line in PAGE.read_text().splitlines():
        if line.startswith("| `"):
            first = line.split("|")[1]
            names.update(re.findall(r"`([A-Za-z_]+)`", first))
    return names


def _example() -> str:
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(), flags=re.S)
    assert len(blocks) == 1, "docs/python.md has one worked example"
    return blocks[0]


def test_the_page_and_the_face_name_the_same_things() -> None:
    page, face_names = _page_names(), set(face.__all__)
    assert page - face_names == set(), "named on docs/python.md but not in server.usecases"
    assert face_names - page == set(), "in server.usecases.__all__ but not on docs/python.md"
    # A face of a few dozen names, not every helper the package holds.
    assert 20 <= len(face_names) <= 60


def test_every_public_name_says_what_it_does() -> None:
    for name in face.__all__:
        value = getattr(face, name)
        if isinstance(value, str):  # a constant: GENERATED_DATASET
            continue
        if typing.get_origin(value) is not None:  # a type alias: Progress, said on the page
            assert f"`{name}` |" in PAGE.read_text() and "(done, total)" in PAGE.read_text()
            continue
        assert (value.__doc__ or "").strip(), f"{name} has no docstring"


def _expected_judgments(limit: int) -> int:
    """Judgments for the first ``limit`` sample items, counted from the files themselves:
    each item's stage (datasets/fairmonitor_sample.jsonl), the rubrics that judge that stage
    (``applies_to`` in prompts/rubrics.toml), and one answer per prompt: S2 and S3 items have
    two prompts (their two parts), S1 and S4 one."""
    rubrics = tomllib.loads((ROOT / "prompts" / "rubrics.toml").read_text())
    per_stage: dict[str, int] = {}
    for table in rubrics.values():
        if isinstance(table, dict) and "applies_to" in table:
            for stage in table["applies_to"]:
                per_stage[stage] = per_stage.get(stage, 0) + 1
    lines = (ROOT / "datasets" / "fairmonitor_sample.jsonl").read_text().splitlines()
    items = [json.loads(line) for line in lines if line.strip()][:limit]
    assert {i["stage"] for i in items} == {"S1"}, "the sample's first 18 items are its S1 ones"
    return sum(per_stage[i["stage"]] for i in items)


def test_the_worked_example_runs_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "fairjudge.db"
    with StubServer() as stub:
        write_config(tmp_path / "fairjudge.toml", stub.base_url, f"sqlite:///{db}")
        (tmp_path / "datasets").symlink_to(ROOT / "datasets")
        monkeypatch.chdir(tmp_path)
        code = compile(_example(), str(PAGE), "exec")
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(code, {"__name__": "docs_python_example"})
        calls = stub.state.requests
        expected = _expected_judgments(18)
        assert expected == 18  # S1 is judged on ICS alone: 18 items x 1 rubric
        assert printed.getvalue().startswith(f"{expected} judgments; report at ")
        assert (tmp_path / "reports" / "python" / "report.html").is_file()
        engine = create_engine(f"sqlite:///{db}")
        with Session(engine) as s:
            stored = s.exec(select(func.count(col(Judgment.id)))).one()
        assert stored == expected
        # 18 answers and 18 judgments: 36 calls the first time, none the second.
        assert calls == 2 * expected
        with contextlib.redirect_stdout(io.StringIO()):
            exec(code, {"__name__": "docs_python_example"})
        assert stub.state.requests == calls
        engine.dispose()


@pytest.mark.parametrize(
    ("call", "given", "words"),
    [
        (
            face.judge,
            3,
            "expected a JudgeRequest (for instance JudgeRequest(generation_run_id=3)), got int 3",
        ),
        (face.judge_dry_run, 3, "expected a JudgeRequest"),
        (
            face.generate,
            "sample",
            'expected a GenerateRequest (for instance GenerateRequest(dataset="sample")), '
            "got str 'sample'",
        ),
    ],
)
def test_the_use_cases_take_their_typed_request_only(call: Any, given: object, words: str) -> None:
    # Before issue 43 these took a bare run id or dataset name too (with the request's fields
    # as keywords); now the request is the one way in, and the old call says what to write.
    # The check comes before anything is opened, so no engine or settings are needed.
    with pytest.raises(TypeError) as caught:
        call(None, None, given)
    assert words in str(caught.value)
