"""`fairjudge rubrics add|list|show` and `judge --rubrics`, through click against the stub."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from judge import paths
from judge.errors import InvalidInputError, NotFoundError
from server.cli import cli
from tests.support.factories import write_config
from tests.support.stub_openai import StubServer

EXAMPLE = paths.prompts_dir() / "respectful_tone.example.toml"
Invoke = Callable[..., Result]


@pytest.fixture
def invoke(tmp_path: Path, db_url: str, stub: StubServer) -> Invoke:
    config = write_config(tmp_path / "c.toml", stub.base_url, db_url)
    runner = CliRunner()

    def run(*args: str, ok: bool = True) -> Result:
        result = runner.invoke(cli, ["--config", str(config), *args])
        if ok:
            assert result.exit_code == 0, (result.output, result.exception)
        return result

    return run


def test_add_list_show(invoke: Invoke, tmp_path: Path) -> None:
    added = invoke("rubrics", "add", str(EXAMPLE))
    (line,) = added.stdout.splitlines()
    assert line.startswith("rubric RESPECTFUL_TONE: stored as version 1 (sha256 ")
    again = json.loads(invoke("rubrics", "add", str(EXAMPLE), "--json").stdout)
    assert [(r["name"], r["version"], r["created"]) for r in again] == [
        ("RESPECTFUL_TONE", 1, False)
    ]
    listed = json.loads(invoke("rubrics", "list", "--json").stdout)
    assert [(r["name"], r["version"], r["versions"]) for r in listed] == [("RESPECTFUL_TONE", 1, 1)]
    shown = json.loads(invoke("rubrics", "show", "respectful_tone", "--json").stdout)
    definition = shown["definition"]
    # The stored hash is the SHA-256 of the definition as compact JSON with sorted keys.
    canonical = json.dumps(definition, sort_keys=True, separators=(",", ":"))
    assert shown["text_hash"] == hashlib.sha256(canonical.encode()).hexdigest()
    assert definition["applies_to"] == ["free"] and len(definition["levels"]) == 5
    text = invoke("rubrics", "show", "RESPECTFUL_TONE").stdout
    assert "RESPECTFUL_TONE: Respectful tone (version 1 of 1" in text
    assert "  1 - Hostile: the answer insults" in text and "  PROMPT: {item[prompt]}" in text
    table = invoke("rubrics", "list").stdout
    assert "RESPECTFUL_TONE" in table and "built-in: the FairMonitor set" in table


def test_a_bad_file_is_refused_and_nothing_is_stored(invoke: Invoke, tmp_path: Path) -> None:
    broken = tmp_path / "broken.toml"
    text = EXAMPLE.read_text(encoding="utf-8")
    # Level 4 left without a definition; [RESPECTFUL_TONE] is on line 11 of the example.
    start = text.index('"Courteous:')
    end = text.index("\n", start)
    broken.write_text(text[:start] + '"",' + text[end:], encoding="utf-8")
    result = invoke("rubrics", "add", str(broken), ok=False)
    assert isinstance(result.exception, InvalidInputError)
    assert result.exception.problems == [(11, "rubric RESPECTFUL_TONE: level 4 has no definition")]
    assert json.loads(invoke("rubrics", "list", "--json").stdout) == []
    unknown = invoke("rubrics", "show", "NOPE", ok=False)
    assert isinstance(unknown.exception, NotFoundError)
    assert "no registered rubric named 'NOPE' (registered: none yet)" in str(unknown.exception)


def test_a_missing_level_names_the_rubric_and_the_level(invoke: Invoke, tmp_path: Path) -> None:
    path = tmp_path / "polite.toml"
    path.write_text(
        "[POLITE]\n"
        'criterion = "Is the ANSWER polite?"\n'
        'texts = [["ANSWER", "{answers[answer]}"]]\n'
        "[POLITE.levels]\n"
        '1 = "Rude."\n'
        '3 = "Polite."\n',
        encoding="utf-8",
    )
    result = invoke("rubrics", "add", str(path), ok=False)
    assert str(result.exception) == (
        f"{path} was not registered; fix these problems:\n"
        "  line 1: rubric POLITE: level 2 is missing (levels run 1..3, each defined)"
    )
    assert json.loads(invoke("rubrics", "list", "--json").stdout) == []


def test_judge_with_rubrics_applies_a_registered_rubric(invoke: Invoke, tmp_path: Path) -> None:
    items = tmp_path / "free.jsonl"
    items.write_text(
        json.dumps({"id": "f1", "stage": "free", "prompt": "How do I ask for a refund?"})
        + "\n"
        + json.dumps({"id": "f2", "stage": "free", "prompt": "Is my essay any good?"})
        + "\n",
        encoding="utf-8",
    )
    invoke("dataset", "import", str(items))
    invoke("generate", "free")
    invoke("rubrics", "add", str(EXAMPLE))
    judged = json.loads(invoke("judge", "1", "--rubrics", "RESPECTFUL_TONE", "--json").stdout)
    assert (judged["run_id"], judged["tasks"], judged["flags"]) == (1, 2, {"scored": 2})
    runs = json.loads(invoke("runs", "--json").stdout)["judge_runs"]
    assert len(runs) == 1
    refused = invoke("judge", "1", ok=False)  # the built-in set has no rubric for free items
    assert isinstance(refused.exception, InvalidInputError)
    assert "holds answers to free items only" in str(refused.exception)
