"""People classify an award audit's follow-up explanations in the real Label Studio: the run
is made by ``run_audit`` against the scripted stub endpoint (8 follow-ups), the project is
created, two annotators (and the admin, with two unusable annotations) submit classes through
Label Studio's API with their own tokens, and the classes are pulled, pulled again, changed
and compared with scikit-learn's Cohen's kappa.

Where expected values come from: the three classes are read from the judge's prompt
(prompts/audit_followup_user.j2) with a regular expression; the name groups from
datasets/award_names.toml with tomllib; the follow-up answers from the store with a plain
query; the annotators' classes are written out by hand below; kappa is
``sklearn.metrics.cohen_kappa_score`` on those hand-written classes.
"""

from __future__ import annotations

import json
import re
import tomllib
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from sklearn.metrics import cohen_kappa_score
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from annotation.errors import CampaignError
from annotation.labelstudio.annotators import add_annotator
from annotation.labelstudio.audit_campaign import (
    CLASS_CONTROL,
    choice_text,
    create_followup_campaign,
    followup_config,
    pull_followup_labels,
    read_class,
)
from annotation.labelstudio.client import LabelStudioClient
from annotation.labelstudio.service import LabelStudioService
from judge import paths
from judge.audits.followup import label_agreement, labels_by_source
from judge.audits.runner import run_audit
from judge.audits.suites import AwardSuite
from judge.models.client import ModelClient
from judge.stats.coefficient import BootstrapOptions
from judge.store.engine import make_engine, session_scope
from judge.store.tables import AuditAnswer, AuditLabel
from server.cli import cli
from tests.support.factories import make_settings, write_config
from tests.support.stub_openai import StubServer

QUESTION = re.compile(r"Which student should get the award, (\w+) or (\w+)\?")
PEOPLE = ("followup.one@example.org", "followup.two@example.org")
TOKEN_ENV = "FJ_TEST_FOLLOWUP_TOKEN"


def classes_from_prompt() -> list[str]:
    """The classes as the judge's prompt lists them ("- name: ..." lines), in its order."""
    text = (paths.prompts_dir() / "audit_followup_user.j2").read_text(encoding="utf-8")
    return re.findall(r"^- (\w+):", text, flags=re.MULTILINE)


CLASSES = classes_from_prompt()
IND, JUS, IRR = CLASSES


def group_labels() -> list[str]:
    """The two groups' labels as the names file gives them (read with tomllib)."""
    raw = tomllib.loads((paths.datasets_dir() / "award_names.toml").read_text(encoding="utf-8"))
    return [str(group["label"]) for group in raw["groups"]]


def group_a_first(messages: list[dict[str, str]]) -> str:
    """Picks the first-mentioned name (so the chosen group varies with the variant) and, asked
    why, gives a reason naming both students (so every explanation differs)."""
    found = QUESTION.search(messages[0]["content"])
    assert found, "not an award prompt"
    first, second = found.group(1), found.group(2)
    if len(messages) > 1:
        return f"{first} got the harder questions right, which {second} did not."
    return f"{first}."


def award_run(db_url: str) -> tuple[Engine, int]:
    """An award run with the follow-up turn: level 5, 2 pairs x 4 variants = 8 prompts, each
    answered with a name, so 8 follow-ups (as in tests/judge/audits/test_runner.py)."""
    engine = make_engine(db_url)
    with StubServer(responder=group_a_first) as stub:
        settings = make_settings(stub.base_url, db_url, max_retries=1, concurrency=4)
        client = ModelClient("test", settings.endpoint("test"))
        suite = AwardSuite(pairs_per_level=2, levels=(5,), followup=True)
        summary = run_audit(engine, client, suite, temperature=1.0, max_tokens=80)
    assert summary.followup is not None and summary.followup.flags == {"answered": 8}
    return engine, summary.run_id


def followup_ids(engine: Engine, run_id: int) -> list[int]:
    with Session(engine) as s:
        return [
            a.id or 0
            for a in s.exec(
                select(AuditAnswer)
                .where(AuditAnswer.run_id == run_id, AuditAnswer.turn == "followup")
                .order_by(col(AuditAnswer.id))
            )
        ]


def choose(label: str) -> list[dict[str, Any]]:
    """The result Label Studio's editor stores for one choice (the choice's alias)."""
    return [
        {
            "from_name": CLASS_CONTROL,
            "to_name": "explanation",
            "type": "choices",
            "value": {"choices": [label]},
        }
    ]


# --- the interface and reading a result (no server) -----------------------------------------


def test_config_offers_exactly_the_three_classes_with_a_hint_each() -> None:
    root = ET.fromstring(followup_config())
    controls = [e for e in root.iter() if e.get("toName")]
    assert [(c.tag, c.get("name")) for c in controls] == [("Choices", CLASS_CONTROL)]
    (choices,) = controls
    assert choices.get("choice") == "single-radio" and choices.get("required") == "true"
    options = list(choices)
    assert [o.get("alias") for o in options] == CLASSES
    for option in options:
        hint = option.get("hint") or ""
        assert hint and "\n" not in hint
        assert option.get("value") == f"{option.get('alias')} — {hint}"  # shown with its hint
    # Every task-data reference in the XML: the situation and the explanation, nothing else.
    refs = set(re.findall(r"\$(\w+)", followup_config()))
    assert refs == {"situation", "explanation"}


@pytest.mark.parametrize(
    ("result", "problem"),
    [
        ([], "no class chosen"),
        (choose("undecided"), "is not one of"),
        ([{**choose(IND)[0], "value": {"choices": [IND, JUS]}}], "2 classes chosen"),
        ([{**choose(IND)[0], "from_name": "other"}], "unknown control"),
        ([{**choose(IND)[0], "type": "textarea"}], "not a choices result"),
    ],
)
def test_read_class_reports_what_it_cannot_use(result: list[dict], problem: str) -> None:
    with pytest.raises(CampaignError, match=problem):
        read_class(result)


def test_read_class_accepts_the_alias_and_the_visible_text() -> None:
    for name in CLASSES:
        assert read_class(choose(name)) == name
        assert read_class(choose(choice_text(name))) == name


# --- against the real Label Studio ------------------------------------------------------------


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Engine, int]]:
    engine, run_id = award_run(f"sqlite:///{tmp_path_factory.mktemp('followups') / 'fj.db'}")
    yield engine, run_id
    engine.dispose()


@pytest.fixture(scope="module")
def admin(labelstudio: LabelStudioService) -> LabelStudioClient:
    found = labelstudio.connection()
    return LabelStudioClient(found.url, found.token)


@pytest.fixture(scope="module")
def people(
    labelstudio: LabelStudioService, admin: LabelStudioClient, store: tuple[Engine, int]
) -> dict[str, LabelStudioClient]:
    """Two annotators created as `annotators add` creates them, each with their own token."""
    out = {}
    for email in PEOPLE:
        with session_scope(store[0]) as session:
            person = add_annotator(session, admin, email, "Follow Up", service=labelstudio)
        assert person.password is not None
        out[email] = LabelStudioClient(admin.url, labelstudio.login_token(email, person.password))
    return out


# Hand-written classes per follow-up (in answer-id order): they agree on 5 of 8.
FIRST = [IND, JUS, IRR, JUS, IND, JUS, IRR, JUS]
SECOND = [IND, JUS, JUS, JUS, IRR, JUS, IRR, IND]


def test_followup_campaign_round_trip(
    store: tuple[Engine, int],
    admin: LabelStudioClient,
    people: dict[str, LabelStudioClient],
) -> None:
    engine, run_id = store
    answers = followup_ids(engine, run_id)
    assert len(answers) == 8

    made = create_followup_campaign(engine, admin, run_id)
    assert (made.created, made.tasks, made.imported, made.already_there) == (True, 8, 8, 0)
    project = made.project_id
    tasks = admin.export_tasks(project)
    by_answer = {t["data"]["answer_id"]: t for t in tasks}
    assert sorted(by_answer) == answers  # one task per follow-up, carrying its answer id

    # Blind: the task shows the two names and the total, never a group or the design's order.
    with Session(engine) as s:
        meta = {
            a.id: a.meta for a in s.exec(select(AuditAnswer).where(AuditAnswer.run_id == run_id))
        }
    groups = group_labels()
    for answer_id, task in by_answer.items():
        data = task["data"]
        assert not {"chosen", "group_a", "group_b", "name_a", "name_b"} & set(data)
        text = json.dumps(data)
        for label in groups:
            assert not re.search(rf"\b{re.escape(label)}\b", text), (label, data)
        m = meta[answer_id]
        assert (data["winner"], data["other"], data["total"]) == (m["winner"], m["other"], 5)
        assert m["winner"] in data["situation"] and m["other"] in data["situation"]
        assert "5 of 20" in data["situation"]  # the bundled item bank has 20 items

    # Asking again with the project id adds nothing.
    again = create_followup_campaign(engine, admin, run_id, project_id=project)
    assert (again.created, again.imported, again.already_there) == (False, 0, 8)
    assert len(admin.export_tasks(project)) == 8

    # Two annotators classify every explanation; the admin leaves one task without a class
    # and gives another a class that is not one of the three.
    ids: dict[tuple[str, int], int] = {}
    for email, labels in zip(PEOPLE, (FIRST, SECOND), strict=True):
        for answer_id, label in zip(answers, labels, strict=True):
            task_id = by_answer[answer_id]["id"]
            ids[email, answer_id] = people[email].annotate(task_id, choose(label))
    empty_task = by_answer[answers[0]]["id"]
    odd_task = by_answer[answers[1]]["id"]
    admin.annotate(empty_task, [])
    admin.annotate(odd_task, choose("undecided"))

    pulled = pull_followup_labels(engine, admin, run_id, project)
    assert (pulled.added, pulled.changed, pulled.unchanged) == (16, 0, 0)
    assert sorted(t for t, _ in pulled.problems) == sorted([empty_task, odd_task])
    reasons = " | ".join(r for _, r in pulled.problems)
    assert "no class chosen" in reasons and "'undecided' is not one of" in reasons
    expected = {
        f"human:{PEOPLE[0]}": dict(zip(answers, FIRST, strict=True)),
        f"human:{PEOPLE[1]}": dict(zip(answers, SECOND, strict=True)),
    }
    with Session(engine) as s:
        assert labels_by_source(s, run_id) == expected  # the admin's two are not stored

    # Pulling again adds nothing.
    second = pull_followup_labels(engine, admin, run_id, project)
    assert (second.added, second.changed, second.unchanged) == (0, 0, 16)
    with Session(engine) as s:
        rows = s.exec(select(AuditLabel).where(AuditLabel.run_id == run_id)).all()
    assert len(rows) == 16

    # The first annotator changes one class in Label Studio: the stored one is replaced.
    people[PEOPLE[0]].update_annotation(ids[PEOPLE[0], answers[2]], choose(IND))
    expected[f"human:{PEOPLE[0]}"][answers[2]] = IND
    third = pull_followup_labels(engine, admin, run_id, project)
    assert (third.added, third.changed, third.unchanged) == (0, 1, 15)
    with Session(engine) as s:
        assert labels_by_source(s, run_id) == expected
        assert len(s.exec(select(AuditLabel).where(AuditLabel.run_id == run_id)).all()) == 16
        agreement = label_agreement(s, run_id, options=BootstrapOptions(n_bootstrap=0))

    # Cohen's kappa between the two people equals scikit-learn's on the submitted classes.
    first = [expected[f"human:{PEOPLE[0]}"][a] for a in answers]
    second_labels = [expected[f"human:{PEOPLE[1]}"][a] for a in answers]
    want = cohen_kappa_score(first, second_labels)
    (pair,) = agreement.pairwise
    assert set(pair.raters) == set(expected) and pair.n == 8
    assert pair.coefficients["kappa"].value == pytest.approx(want, abs=1e-12)
    assert 0 < want < 1  # neither chance-level nor perfect: the comparison means something


def test_pull_refuses_a_project_of_something_else(
    store: tuple[Engine, int], admin: LabelStudioClient
) -> None:
    engine, run_id = store

    def stored() -> list[tuple[str, int, str | None]]:
        with Session(engine) as s:
            rows = s.exec(select(AuditLabel).where(AuditLabel.run_id == run_id)).all()
            return sorted((r.source, r.answer_id, r.label) for r in rows)

    before = stored()
    other = admin.create_project(
        title="not follow-ups", description="", label_config=followup_config(), overlap=1
    )
    with pytest.raises(CampaignError, match=f"holds no follow-up of audit run {run_id}"):
        pull_followup_labels(engine, admin, run_id, other)
    assert stored() == before


def test_campaign_and_pull_through_the_cli(
    tmp_path: Path, labelstudio: LabelStudioService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`fairjudge audit award campaign RUN` then `pull RUN --project ID`, with Label Studio
    reached by URL and a token variable as a user's own server would be."""
    db_url = f"sqlite:///{tmp_path / 'fj.db'}"
    engine, run_id = award_run(db_url)
    answers = followup_ids(engine, run_id)
    config = write_config(tmp_path / "fairjudge.toml", "http://127.0.0.1:9", db_url)
    config.write_text(
        config.read_text()
        + f'[labelstudio]\nurl = "{labelstudio.url}"\ntoken_env = "{TOKEN_ENV}"\n'
    )
    token = labelstudio.connection().token
    monkeypatch.setenv(TOKEN_ENV, token)

    def run(*args: str) -> Any:
        result = CliRunner().invoke(cli, ["--config", str(config), *args, "--json"])
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)

    made = run("audit", "award", "campaign", str(run_id), "--annotators", "1")
    assert (made["created"], made["tasks"], made["imported"]) == (True, 8, 8)
    admin = LabelStudioClient(labelstudio.url, token)
    tasks = admin.export_tasks(made["project"])
    # The admin classifies every explanation "justified".
    for task in tasks:
        admin.annotate(task["id"], choose(JUS))
    pulled = run("audit", "award", "pull", str(run_id), "--project", str(made["project"]))
    assert (pulled["added"], pulled["problems"]) == (8, [])
    again = run("audit", "award", "pull", str(run_id), "--project", str(made["project"]))
    assert (again["added"], again["unchanged"]) == (0, 8)
    email = admin.whoami()["email"]
    with Session(engine) as s:
        assert labels_by_source(s, run_id) == {f"human:{email}": dict.fromkeys(answers, JUS)}
    engine.dispose()

    # An annotation the pull cannot use makes the command fail, naming the task.
    admin.annotate(tasks[0]["id"], choose("undecided"))
    bad = CliRunner().invoke(
        cli, ["--config", str(config), "audit", "award", "pull", str(run_id), "--project",
              str(made["project"])],
    )  # fmt: skip
    # (`fairjudge` prints the error; CliRunner hands the exception back instead.)
    assert isinstance(bad.exception, CampaignError)
    assert f"task {tasks[0]['id']}: " in str(bad.exception)  # Label Studio's task id
    assert "'undecided' is not one of" in str(bad.exception)


def test_campaign_and_pull_over_http(
    tmp_path: Path, labelstudio: LabelStudioService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`POST /api/v1/audit-runs/RUN/campaign` then `.../campaign/pull`: the same round trip
    as the CLI's, over the JSON API (Flask's test client), Label Studio reached by URL."""
    from server import create_app
    from server.auth import create_key

    db_url = f"sqlite:///{tmp_path / 'fj.db'}"
    engine, run_id = award_run(db_url)
    answers = followup_ids(engine, run_id)
    _, key = create_key(engine, "member", "member")
    token = labelstudio.connection().token
    monkeypatch.setenv(TOKEN_ENV, token)
    settings = make_settings("http://127.0.0.1:9", db_url)
    settings = settings.model_copy(
        update={
            "state_dir": str(tmp_path / "state"),
            "labelstudio": settings.labelstudio.model_copy(
                update={"url": labelstudio.url, "token_env": TOKEN_ENV}
            ),
        }
    )
    client = create_app({"SETTINGS": settings, "TESTING": True}).test_client()
    member = {"Authorization": f"Bearer {key}"}
    made = client.post(
        f"/api/v1/audit-runs/{run_id}/campaign", json={"annotators": 1}, headers=member
    )
    assert made.status_code == 201, made.json
    assert (made.json["created"], made.json["tasks"], made.json["imported"]) == (True, 8, 8)
    admin = LabelStudioClient(labelstudio.url, token)
    for task in admin.export_tasks(made.json["project"]):
        admin.annotate(task["id"], choose(IRR))
    pull = {"project": made.json["project"]}
    pulled = client.post(f"/api/v1/audit-runs/{run_id}/campaign/pull", json=pull, headers=member)
    assert pulled.status_code == 200, pulled.json
    assert pulled.json["added"] == 8
    again = client.post(f"/api/v1/audit-runs/{run_id}/campaign/pull", json=pull, headers=member)
    assert (again.json["added"], again.json["unchanged"]) == (0, 8)
    email = admin.whoami()["email"]
    with Session(engine) as s:
        assert labels_by_source(s, run_id) == {f"human:{email}": dict.fromkeys(answers, IRR)}
    client.application.extensions["fairjudge_engine"].dispose()
    engine.dispose()
