"""A campaign for a rubric users registered, on the real Label Studio (issue 25, item 6): the
CLI creates it (a 3-level rubric, once refused as "5 levels only"), the project's interface
offers the rubric's own three levels, annotators rate through Label Studio's API with their
own tokens, the pull stores the scores on the rubric's 1-3 scale (an off-scale 4 is reported
with its task and not stored), and agreement runs on 1-3.

Expected values: the interface's levels are written out by hand from the rubric below; the
agreement is computed here with scipy and krippendorff from the scores the test submitted.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import krippendorff
import numpy as np
import pytest
from click.testing import CliRunner, Result
from scipy import stats
from sqlmodel import Session, select

from annotation.labelstudio.client import LabelStudioClient
from annotation.labelstudio.service import LabelStudioService
from judge.data.datasets import import_items
from judge.data.responses import import_responses
from judge.grading.registry import register_rubrics
from judge.store.engine import make_engine, session_scope
from judge.store.tables import HumanRating, Item
from server import usecases
from server.cli import cli
from tests.annotation.labelstudio.conftest import shared_labelstudio
from tests.support import stores
from tests.support.factories import make_settings, write_config
from tests.support.stub_openai import StubServer

TOKEN_ENV = "FJ_TEST_RUBRIC_CAMPAIGN_TOKEN"
CLARITY = """[CLARITY]
title = "Clarity"
criterion = "How clearly is the ANSWER written?"
levels = ["Unclear.", "Mostly clear.", "Clear."]
texts = [["PROMPT", "{item[prompt]}"], ["ANSWER", "{answers[answer]}"]]
"""
# The six free-form items, the judge's planted score of each (1-3) and the two people's.
JUDGE = {"f1": 1, "f2": 2, "f3": 3, "f4": 1, "f5": 2, "f6": 3}
ADMIN = {"f1": 1, "f2": 2, "f3": 3, "f4": 2, "f5": 2, "f6": 3}
RATER = {"f1": 1, "f2": 1, "f3": 3, "f4": 1, "f5": 3, "f6": 2}
RATER_EMAIL = "clarity.rater@example.org"
ADMIN_EMAIL = "admin@fairjudge.local"


@pytest.fixture(scope="session")
def labelstudio(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabelStudioService]:
    """The same server as tests/annotation/labelstudio's fixture (started once a session)."""
    yield from shared_labelstudio(tmp_path_factory)


def planted_judge(messages: list[dict[str, str]]) -> str | None:
    """The judge's score for the item whose prompt the request shows (JUDGE)."""
    if not any(m["role"] == "system" for m in messages):
        return None
    text = messages[-1]["content"]
    (key,) = [k for k in JUDGE if f"question {k}?" in text]
    return json.dumps({"explanation": "planted", "score": JUDGE[key]})


@pytest.fixture
def config(
    tmp_path: Path,
    labelstudio: LabelStudioService,
    monkeypatch: pytest.MonkeyPatch,
    empty_template: Path,
) -> Iterator[tuple[Path, int, int]]:
    """A store (a copy of the session's empty one) with six free-form items answered
    elsewhere and judged with CLARITY (3 levels) through the stub; a config reaching the
    session's Label Studio by URL and token."""
    db_url = stores.copy_store(empty_template, tmp_path / "fairjudge.db")
    engine = make_engine(db_url)
    items = tmp_path / "items.jsonl"
    items.write_text(
        "".join(
            json.dumps({"id": k, "stage": "free", "prompt": f"question {k}?"}) + "\n" for k in JUDGE
        )
    )
    with StubServer(responder=planted_judge) as stub:
        settings = make_settings(stub.base_url, db_url)
        with session_scope(engine) as session:
            import_items(session, items, "free")
        answers = [{"item_id": k, "part": "answer", "text": f"answer {k}"} for k in JUDGE]
        gen = import_responses(engine, "free", answers).generation_run_id
        register_rubrics(engine, CLARITY)
        jud = usecases.judge(
            engine, settings, usecases.JudgeRequest(generation_run_id=gen, rubric_set="CLARITY")
        )
        path = write_config(tmp_path / "fairjudge.toml", stub.base_url, db_url)
    engine.dispose()
    path.write_text(
        path.read_text() + f'[labelstudio]\nurl = "{labelstudio.url}"\ntoken_env = "{TOKEN_ENV}"\n'
    )
    monkeypatch.setenv(TOKEN_ENV, labelstudio.connection().token)
    yield path, gen, jud.run_id


def run(config: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--config", str(config), *args])


def choice(target: str, score: int) -> list[dict[str, object]]:
    """What Label Studio's editor submits for CLARITY's score (the chosen level's alias)."""
    return [
        {
            "from_name": "score_CLARITY",
            "to_name": target,
            "type": "choices",
            "value": {"choices": [str(score)]},
        }
    ]


def test_a_registered_rubric_campaign_on_label_studio(
    config: tuple[Path, int, int], labelstudio: LabelStudioService
) -> None:
    path, gen, judge_run = config
    # A rubric the judge run did not apply cannot be rated: one line says which it applied.
    other = run(path, "campaign", "create", "--judge-run", str(judge_run), "--rubric", "ICS")
    assert other.exit_code != 0
    assert "unknown rubric(s) ICS for this judge run, which applied CLARITY" in str(other.exception)
    created = run(
        path, "campaign", "create", "--judge-run", str(judge_run), "--size", "6",
        "--annotators", "2", "--seed", "1", "--name", "clarity", "--json",
    )  # fmt: skip
    assert created.exit_code == 0, created.output
    made = json.loads(created.stdout)
    assert (made["size"], made["imported"]) == (6, 6)

    # The interface: CLARITY's score offers the task's levels, which are the rubric's three.
    admin = LabelStudioClient(labelstudio.url, labelstudio.connection().token)
    xml = admin._sdk.projects.get(made["project"]).label_config or ""
    (score,) = [e for e in ET.fromstring(xml).iter("Choices") if e.get("name") == "score_CLARITY"]
    assert score.get("value") == "$fj_levels_CLARITY"
    tasks = admin.export_tasks(made["project"])
    assert len(tasks) == 6
    for task in tasks:
        assert task["data"]["fj_levels_CLARITY"] == [
            {"value": "1 — Unclear.", "alias": "1"},
            {"value": "2 — Mostly clear.", "alias": "2"},
            {"value": "3 — Clear.", "alias": "3"},
        ]

    # An annotator added the CLI's way rates through Label Studio's API with their own token;
    # the admin rates too; the rater's last task is first submitted as 4, off CLARITY's 1-3.
    labelstudio.sign_up(RATER_EMAIL, "rubric-horse-7")  # through the invite link
    assert run(path, "annotators", "add", RATER_EMAIL).exit_code == 0
    rater = LabelStudioClient(
        labelstudio.url, labelstudio.login_token(RATER_EMAIL, "rubric-horse-7")
    )
    target = score.get("toName") or ""
    ordered = sorted(tasks, key=lambda t: t["data"]["fj_item"])
    off_scale = 0
    for task in ordered:
        key = task["data"]["fj_item"]
        admin.annotate(task["id"], choice(target, ADMIN[key]))
        done = rater.annotate(task["id"], choice(target, 4 if key == "f6" else RATER[key]))
        off_scale = done if key == "f6" else off_scale
    pulled = run(path, "campaign", "pull", "clarity", "--json")
    # The pull stores what it can and fails naming the task it could not store.
    assert pulled.exit_code != 0 and "task " in str(pulled.exception), pulled.output
    report = json.loads(pulled.stdout)
    assert report["added"] == 6 + 5  # the admin's six, the rater's five on the scale
    (problem,) = report["problems"]
    f6 = next(t for t in ordered if t["data"]["fj_item"] == "f6")
    assert problem["task"] == f6["id"]
    assert "score_CLARITY: score 4 is outside 1-3" in problem["reason"]

    # The rater corrects f6 to a level of the scale; the next pull stores it.
    rater.update_annotation(off_scale, choice(target, RATER["f6"]))
    again = json.loads(run(path, "campaign", "pull", "clarity", "--json").stdout)
    assert (again["added"], again["problems"]) == (1, [])

    engine = make_engine(f"sqlite:///{path.parent / 'fairjudge.db'}")
    with Session(engine) as s:
        stored = {
            (key, r.rater): r.score for r, key in s.exec(select(HumanRating, Item.key).join(Item))
        }
    engine.dispose()
    assert stored == {
        **{(k, ADMIN_EMAIL): float(v) for k, v in ADMIN.items()},
        **{(k, RATER_EMAIL): float(v) for k, v in RATER.items()},
    }

    # Agreement on CLARITY's own 1-3 scale, against scipy and krippendorff on the same scores.
    shown = run(path, "agreement", "--run", str(gen), "--bootstrap", "0", "--json")
    assert shown.exit_code == 0, shown.output
    entry = json.loads(shown.stdout)["rubrics"]["CLARITY"]
    assert (entry["scale"], entry["n_rated_items"], entry["n_raters"]) == ("1-3", 6, 2)
    # The run was judged on CLARITY alone: the top level says its 1-3 (it said 1-5, issue 41).
    assert json.loads(shown.stdout)["scale"] == "1-3"
    keys = sorted(JUDGE)
    matrix = np.array([[ADMIN[k] for k in keys], [RATER[k] for k in keys]], dtype=float)
    alpha = krippendorff.alpha(
        reliability_data=matrix, level_of_measurement="ordinal", value_domain=[1, 2, 3]
    )
    assert entry["human_vs_human"]["alpha_ordinal"]["value"] == pytest.approx(alpha)
    (judge,) = entry["judges"]
    human = matrix.mean(axis=0)
    spearman = stats.spearmanr([JUDGE[k] for k in keys], human).statistic
    assert judge["coefficients"]["spearman"]["value"] == pytest.approx(spearman)
    # The confusion matrix runs over the rubric's three levels, not FairMonitor's five.
    assert judge["confusion_matrix"]["labels"] == [1, 2, 3]
