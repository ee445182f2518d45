"""``fairjudge campaign`` and ``fairjudge annotators`` as users run them, against the session's
real Label Studio used as a server the user runs (``[labelstudio] url`` and a token held in an
environment variable), with a store judged through the stub endpoint."""

from __future__ import annotations

import json
import math
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from scipy.stats import norm
from sqlmodel import col, select

from annotation.labelstudio import interface
from annotation.labelstudio.client import LabelStudioClient
from annotation.labelstudio.service import LabelStudioService
from judge.store.engine import make_engine, session_scope
from judge.store.tables import Item
from server.cli import cli
from tests.annotation.labelstudio.conftest import shared_labelstudio
from tests.support import stores
from tests.support.factories import FAIRJUDGE, write_config

TOKEN_ENV = "FJ_TEST_CAMPAIGN_TOKEN"
DRAFTS = ("s2-gender-1", "s4-subject-2")


@pytest.fixture(scope="session")
def labelstudio(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabelStudioService]:
    """The same server as tests/annotation/labelstudio's fixture (started once a session)."""
    yield from shared_labelstudio(tmp_path_factory)


@pytest.fixture
def config(
    tmp_path: Path,
    labelstudio: LabelStudioService,
    monkeypatch: pytest.MonkeyPatch,
    judged_s1_template: stores.Judged,
) -> Iterator[tuple[Path, int, int]]:
    """A config whose store holds the 18 S1 sample items judged with ICS (a copy of the
    session's template, made through a stub since stopped), and whose Label Studio is the
    session's server reached by URL and token variable."""
    jud = judged_s1_template
    db_url = stores.copy_store(jud.path, tmp_path / "fairjudge.db")
    path = write_config(tmp_path / "fairjudge.toml", jud.base_url, db_url)
    path.write_text(
        path.read_text() + f'[labelstudio]\nurl = "{labelstudio.url}"\ntoken_env = "{TOKEN_ENV}"\n'
    )
    monkeypatch.setenv(TOKEN_ENV, labelstudio.connection().token)
    yield path, jud.generation_run_id, jud.judge_run_id


def run(config: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--config", str(config), *args])


def test_create_rate_pull_status_export_through_the_cli(
    config: tuple[Path, int, int], labelstudio: LabelStudioService, tmp_path: Path
) -> None:
    path, gen_run, judge_run = config
    created = run(
        path, "campaign", "create", "--judge-run", str(judge_run), "--size", "4",
        "--annotators", "2", "--seed", "3", "--name", "cli-campaign", "--json",
    )  # fmt: skip
    assert created.exit_code == 0, created.output
    made = json.loads(created.stdout)
    assert (made["size"], made["population"], made["imported"]) == (4, 18, 4)

    # An annotator added on a server FairJudge does not run gets no password from us.
    added = run(path, "annotators", "add", "cli.rater@example.org")
    assert added.exit_code == 0, added.output
    assert "without a password" in added.output

    # The one who rates signed up through the server's invite link and is added the same way.
    labelstudio.sign_up("cli.signed@example.org", "cli-horse-7")
    added = run(path, "annotators", "add", "cli.signed@example.org")
    assert "already has a Label Studio account" in added.output, added.output
    admin = LabelStudioClient(labelstudio.url, labelstudio.connection().token)
    rater = LabelStudioClient(
        labelstudio.url, labelstudio.login_token("cli.signed@example.org", "cli-horse-7")
    )
    tasks = admin.export_tasks(made["project"])
    # Scores by hand: the admin gives 2 to every item, the rater 4 (choices hold the number).
    for client, score in ((admin, 2), (rater, 4)):
        for task in tasks:
            result = [
                {
                    "from_name": "score_ICS",
                    "to_name": _target(admin, made["project"]),
                    "type": "choices",
                    "value": {"choices": [str(score)]},
                }
            ]
            client.annotate(task["id"], result)

    pulled = run(path, "campaign", "pull", "cli-campaign", "--json")
    assert pulled.exit_code == 0, pulled.output
    assert json.loads(pulled.stdout)["added"] == 4 * 2  # 4 items x 2 annotators x ICS
    again = json.loads(run(path, "campaign", "pull", "cli-campaign", "--json").stdout)
    assert (again["added"], again["unchanged"]) == (0, 8)

    status = json.loads(run(path, "campaign", "status", "cli-campaign", "--json").stdout)
    assert {a["email"]: a["done"] for a in status["annotators"]} == {
        "admin@fairjudge.local": 4,
        "cli.signed@example.org": 4,
    }
    assert status["items_short"] == {}

    listed = json.loads(run(path, "campaign", "list", "--json").stdout)
    assert [(c["name"], c["ratings"]) for c in listed] == [("cli-campaign", 8)]

    # The export is what `ratings import` reads. Imported, the rows form an import batch of
    # their own (ratings belong to their campaign or batch): 8 added beside the campaign's,
    # and importing again adds nothing.
    out = tmp_path / "ratings.csv"
    assert run(path, "campaign", "export", "cli-campaign", "--out", str(out)).exit_code == 0
    lines = out.read_text().splitlines()
    assert lines[0] == "item_id,rubric,rater,score,rationale" and len(lines) == 9
    back = run(path, "ratings", "import", str(out), "--run", str(gen_run), "--json")
    assert back.exit_code == 0, back.output
    assert (json.loads(back.stdout)["added"], json.loads(back.stdout)["unchanged"]) == (8, 0)
    back = run(path, "ratings", "import", str(out), "--run", str(gen_run), "--json")
    assert (json.loads(back.stdout)["added"], json.loads(back.stdout)["unchanged"]) == (0, 8)


def shell(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The whole command in a process of its own, as a user runs it (errors, exit codes)."""
    return subprocess.run(
        [*FAIRJUDGE, "--config", str(config), *args], capture_output=True, text=True, timeout=120
    )


def _target(admin: LabelStudioClient, project: int) -> str:
    import xml.etree.ElementTree as ET

    config = admin._sdk.projects.get(project).label_config or ""
    name = interface.control_name(interface.SCORE, "ICS")
    return next(e.get("toName", "") for e in ET.fromstring(config).iter() if e.get("name") == name)


def test_target_half_width_chooses_the_size_and_a_size_above_the_run_is_refused(
    config: tuple[Path, int, int],
) -> None:
    path, _, judge_run = config
    said = shell(
        path, "campaign", "create", "--judge-run", str(judge_run), "--target-half-width", "0.3",
    )  # fmt: skip
    # The smallest n whose interval tanh(atanh(0.5) -+ z se) reaches at most 0.3 from 0.5 on
    # each side, where se = sqrt((1 + 0.5^2 / 2) / (n - 3)) (Bonett and Wright, 2000), worked
    # out here. For rho > 0 the lower side is the longer one: 0.5 - tanh(atanh(0.5) - z se).
    z = norm.ppf(0.975)

    def reach(n: int) -> float:
        se = math.sqrt((1 + 0.25 / 2) / (n - 3))
        return max(
            math.tanh(math.atanh(0.5) + z * se) - 0.5, 0.5 - math.tanh(math.atanh(0.5) - z * se)
        )

    n = next(n for n in range(4, 10_000) if reach(n) <= 0.3)
    assert n == 39  # closed form: 3 + 1.125 z^2 / (atanh 0.5 - atanh 0.2)^2 = 38.98 -> 39
    assert said.returncode == 1, said.stderr
    assert f"size {n} is larger than the judge run, which has 18 items" in said.stderr
    assert said.stderr.startswith(f"{n} rated items")  # the plan's reason comes first

    unknown = shell(path, "campaign", "status", "nope")
    assert unknown.returncode == 1 and "no campaign named 'nope'" in unknown.stderr


def test_review_of_drafts_through_the_cli(config: tuple[Path, int, int], tmp_path: Path) -> None:
    """`campaign review --drafts` sends only the items waiting for review, and refuses a
    dataset that has none."""
    path = config[0]
    none = shell(path, "campaign", "review", "--dataset", "sample", "--drafts")
    assert none.returncode == 1, none.stderr
    assert "dataset 'sample' has no draft items to review" in none.stderr

    # Two of the sample's items marked as drafts, as the item generator stores them.
    engine = make_engine(f"sqlite:///{tmp_path / 'fairjudge.db'}")
    with session_scope(engine) as session:
        for item in session.exec(select(Item).where(col(Item.key).in_(DRAFTS))):
            item.review_status = "draft"
            session.add(item)
    engine.dispose()
    made = run(path, "campaign", "review", "--dataset", "sample", "--drafts", "--json")
    assert made.exit_code == 0, made.output
    d = json.loads(made.stdout)
    assert (d["campaign"], d["size"], d["imported"], d["created"]) == (
        "review-sample-draft",
        2,
        2,
        True,
    )
