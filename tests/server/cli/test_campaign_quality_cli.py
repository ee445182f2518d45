"""Annotator quality through the CLI, as a user runs it against the session's real Label
Studio: `campaign create --gold`, `campaign gold`, `campaign pull`'s "left X unscored"
warnings and `campaign status --offset-margin --min-kappa` (text and --json).

Three annotators rate through Label Studio's API with their own tokens: two fair, one harsh
by one or two levels, and one fair one leaves a rubric of one task unscored. Gold scores and
the annotators' answers on gold items are fixed by hand, so each one's accuracy is known
before the test runs; offsets and kappas are recomputed here from the submitted scores with
scipy and scikit-learn. (The domain functions behind them are tested in
tests/annotation/labelstudio/test_campaign_quality.py and
tests/annotation/test_annotator_quality.py.)"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import xml.etree.ElementTree as ET
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner, Result
from scipy import stats
from sklearn.metrics import cohen_kappa_score
from sqlmodel import Session, col, select

from annotation.labelstudio import interface
from annotation.labelstudio.client import LabelStudioClient
from annotation.labelstudio.service import LabelStudioService
from judge.store.engine import make_engine
from judge.store.tables import Campaign, CampaignTask, Item
from server.cli import cli
from tests.annotation.labelstudio.conftest import shared_labelstudio
from tests.support import stores
from tests.support.factories import FAIRJUDGE, write_config

TOKEN_ENV = "FJ_TEST_QUALITY_CLI_TOKEN"
FAIR1, FAIR2, HARSH = "qcli.fair1@example.org", "qcli.fair2@example.org", "qcli.harsh@example.org"
NAME = "qcli-quality"
GOLD_SCORE = 4  # the known ICS score of every gold item
# Each annotator's ICS scores on the five gold items, in gold order, chosen by hand:
# FAIR1 always right; FAIR2 right on 3, one level off on 2; HARSH 1, 1, 2, 1, 2 below.
ON_GOLD = {FAIR1: [4, 4, 4, 4, 4], FAIR2: [4, 4, 4, 5, 3], HARSH: [3, 3, 2, 3, 2]}
# Their accuracy, by hand from ON_GOLD: share equal to 4, and mean |score - 4|.
GOLD_EXPECTED = {
    FAIR1: (5 / 5, 0 / 5),  # 100 %, MAE 0.00
    FAIR2: (3 / 5, 2 / 5),  # 60 %, MAE 0.40
    HARSH: (0 / 5, 7 / 5),  # 0 %, MAE (1 + 1 + 2 + 1 + 2) / 5 = 1.40
}
GOLD_TEXT = {
    FAIR1: "100% exact, MAE 0.00, n=5",
    FAIR2: "60% exact, MAE 0.40, n=5",
    HARSH: "0% exact, MAE 1.40, n=5",
}


@pytest.fixture(scope="session")
def labelstudio(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabelStudioService]:
    """The same server as tests/annotation/labelstudio's fixture (started once a session)."""
    yield from shared_labelstudio(tmp_path_factory)


@pytest.fixture(scope="module")
def setup(
    tmp_path_factory: pytest.TempPathFactory,
    labelstudio: LabelStudioService,
    judged_sample_template: stores.Judged,
) -> Iterator[tuple[Path, str, int, dict[str, str]]]:
    """A config whose store holds the 72 sample items judged with every rubric through the
    stub (a copy of the session's template, tests/support/stores.py), whose Label Studio is
    the session's server reached by URL and a token variable; with the store's URL, the
    judge run and the environment the CLI needs."""
    folder = tmp_path_factory.mktemp("quality-cli")
    jud = judged_sample_template
    db_url = stores.copy_store(jud.path, folder / "fairjudge.db")
    path = write_config(folder / "fairjudge.toml", jud.base_url, db_url)
    path.write_text(
        path.read_text() + f'[labelstudio]\nurl = "{labelstudio.url}"\ntoken_env = "{TOKEN_ENV}"\n'
    )
    env = {TOKEN_ENV: labelstudio.connection().token}
    yield path, db_url, jud.judge_run_id, env


def run(setup: tuple[Path, str, int, dict[str, str]], *args: str) -> Result:
    path, _, _, env = setup
    return CliRunner().invoke(cli, ["--config", str(path), *args], env=env)


def shell(
    setup: tuple[Path, str, int, dict[str, str]], *args: str
) -> subprocess.CompletedProcess[str]:
    """The whole command in a process of its own, as a user runs it (error lines, exit codes)."""
    path, _, _, env = setup
    return subprocess.run(
        [*FAIRJUDGE, "--config", str(path), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **env},
    )


def _hash(*parts: str) -> int:
    return hashlib.sha256("|".join(parts).encode()).digest()[0]


def base(item: str, rubric: str) -> int:
    """The fair score of a drawn item x rubric: 2-5, fixed by a hash."""
    return 2 + _hash(item, rubric) % 4


def planted(email: str, item: str, rubric: str) -> int:
    """FAIR1 gives the fair score, FAIR2 one more on about a fifth of ratings (below 5), HARSH
    one less, or two less on about a third of them (where that stays on the scale)."""
    b, h = base(item, rubric), _hash(email, item, rubric)
    if email == FAIR2:
        return b + (1 if h % 5 == 0 and b < 5 else 0)
    if email == HARSH:
        return b - (2 if h % 3 == 0 and b >= 3 else 1)
    return b


def _one_line(said: subprocess.CompletedProcess[str]) -> str:
    """The single line a failed command printed (the test fails if it printed more)."""
    lines = said.stderr.strip().splitlines()
    assert said.returncode == 1 and len(lines) == 1, (said.returncode, said.stderr)
    return lines[0]


def _campaigns(db_url: str) -> dict[str, tuple[int, dict[str, Any]]]:
    """Campaign name -> (its tasks, its gold scores), read from the store."""
    engine = make_engine(db_url)
    with Session(engine) as s:
        found = {
            c.name: (
                len(s.exec(select(CampaignTask).where(CampaignTask.campaign_id == c.id)).all()),
                dict(c.design.get("gold", {})),
            )
            for c in s.exec(select(Campaign))
        }
    engine.dispose()
    return found


def _s1_keys(db_url: str) -> list[str]:
    engine = make_engine(db_url)
    with Session(engine) as s:
        keys = list(s.exec(select(Item.key).where(Item.stage == "S1").order_by(col(Item.id))))
    engine.dispose()
    return keys


def _projects(admin: LabelStudioClient, title: str) -> int:
    """Projects with this title, page by page. The SDK's pager asks for one page past the
    last when the projects fill their pages exactly, and Label Studio answers that with a 404
    ("Invalid page"): that is the end, not an error."""
    from label_studio_sdk.core.api_error import ApiError

    found = 0
    page = admin._sdk.projects.list(page_size=100)
    while page is not None:
        found += sum(p.title == title for p in page.items or [])
        if not page.has_next or page.get_next is None:
            break
        try:
            page = page.get_next()
        except ApiError as e:
            if e.status_code != 404:
                raise
            break
    return found


def test_a_bad_gold_file_is_one_line_and_stores_nothing(
    setup: tuple[Path, str, int, dict[str, str]], labelstudio: LabelStudioService, tmp_path: Path
) -> None:
    _, db_url, judge_run, _ = setup
    admin = LabelStudioClient(labelstudio.url, labelstudio.connection().token)
    s1 = _s1_keys(db_url)
    create = ("campaign", "create", "--judge-run", str(judge_run), "--size", "5",
              "--name", "qcli-bad")  # fmt: skip

    # A score that is not a whole number, on the file's third line (the header is line 1).
    half = tmp_path / "half.csv"
    half.write_text(f"item_id,rubric,score\n{s1[0]},ICS,4\n{s1[1]},ICS,3.5\n")
    line = _one_line(shell(setup, *create, "--gold", str(half)))
    assert line == f"error: gold file {half} line 3: score '3.5' is not a whole number"

    # An item the dataset lacks, found only after the run's population is read: still
    # nothing stored, no project in Label Studio.
    unknown = tmp_path / "unknown.csv"
    unknown.write_text(f"item_id,rubric,score\n{s1[0]},ICS,4\nno-such-item,ICS,3\n")
    line = _one_line(shell(setup, *create, "--gold", str(unknown)))
    assert line == f"error: gold file {unknown} line 3: the dataset has no item 'no-such-item'"

    # A missing column.
    columns = tmp_path / "columns.csv"
    columns.write_text(f"item_id,score\n{s1[0]},4\n")
    line = _one_line(shell(setup, *create, "--gold", str(columns)))
    assert line == (
        f"error: gold file {columns}: needs the columns item_id, rubric, score; missing rubric"
    )

    assert "qcli-bad" not in _campaigns(db_url)
    assert _projects(admin, "FairJudge qcli-bad") == 0


def test_gold_harsh_annotator_and_unscored_rubric_through_the_cli(
    setup: tuple[Path, str, int, dict[str, str]], labelstudio: LabelStudioService, tmp_path: Path
) -> None:
    _, db_url, judge_run, _ = setup
    s1 = _s1_keys(db_url)
    assert len(s1) == 18  # the sample's S1 items, rated with ICS only

    # Three gold items given at creation: kept out of the draw of 15.
    first_gold = s1[:3]
    gold_file = tmp_path / "gold.csv"
    gold_file.write_text(
        "item_id,rubric,score\n" + "".join(f"{k},ICS,{GOLD_SCORE}\n" for k in first_gold)
    )
    made = run(
        setup, "campaign", "create", "--judge-run", str(judge_run), "--size", "15",
        "--annotators", "3", "--seed", "4", "--name", NAME, "--gold", str(gold_file), "--json",
    )  # fmt: skip
    assert made.exit_code == 0, made.output
    created = json.loads(made.stdout)
    # 72 answered items, the 3 gold ones left out of the population; 15 drawn + 3 gold sent.
    assert (created["population"], created["size"], created["imported"]) == (69, 15, 18)
    assert _campaigns(db_url)[NAME] == (18, {k: {"ICS": GOLD_SCORE} for k in first_gold})

    engine = make_engine(db_url)
    with Session(engine) as s:
        campaign = s.exec(select(Campaign).where(Campaign.name == NAME)).one()
        drawn = {
            key
            for t, key in s.exec(
                select(CampaignTask, Item.key)
                .join(Item, col(Item.id) == CampaignTask.item_id)
                .where(CampaignTask.campaign_id == campaign.id, CampaignTask.stratum != "gold")
            )
        }
    engine.dispose()
    assert len(drawn) == 15 and drawn.isdisjoint(first_gold)

    # `campaign gold`: two more S1 items outside the sample are added once; the same file
    # again adds nothing, in the store or in Label Studio.
    more_gold = [k for k in s1[3:] if k not in drawn][:2]
    more = tmp_path / "more.csv"
    more.write_text(
        "item_id,rubric,score\n" + "".join(f"{k},ICS,{GOLD_SCORE}\n" for k in more_gold)
    )
    added = run(setup, "campaign", "gold", NAME, str(more), "--json")
    assert added.exit_code == 0, added.output
    assert json.loads(added.stdout) == {
        "campaign": NAME, "added": 2, "imported": 2, "gold_items": 5,
    }  # fmt: skip
    again = run(setup, "campaign", "gold", NAME, str(more))
    assert again.exit_code == 0, again.output
    assert f"campaign {NAME}: 0 gold item(s) added (5 in all), 0 task(s) sent" in again.stdout
    gold_keys = [*first_gold, *more_gold]
    assert _campaigns(db_url)[NAME] == (20, {k: {"ICS": GOLD_SCORE} for k in gold_keys})

    # A bad row in `campaign gold` is one line, exit 1, and the good row before it is not
    # stored either; an item of the sample cannot be gold.
    spare = next(k for k in s1 if k not in drawn and k not in gold_keys)
    mixed = tmp_path / "mixed.csv"
    mixed.write_text(f"item_id,rubric,score\n{spare},ICS,4\n{s1[4]},ICS,9\n")
    line = _one_line(shell(setup, "campaign", "gold", NAME, str(mixed)))
    assert line == f"error: gold file {mixed} line 3: score 9 is outside rubric ICS's scale 1-5"
    in_sample = sorted(drawn)[0]
    clash = tmp_path / "clash.csv"
    clash.write_text(
        f"item_id,rubric,score\n{spare},ICS,4\n{in_sample},{_rubric(db_url, in_sample)},3\n"
    )
    line = _one_line(shell(setup, "campaign", "gold", NAME, str(clash)))
    assert line.startswith(f"error: item {in_sample} is in campaign '{NAME}''s sample;"), line
    assert _campaigns(db_url)[NAME] == (20, {k: {"ICS": GOLD_SCORE} for k in gold_keys})

    # The annotators signed up through the server's invite link (the CLI's config reaches it
    # as a server FairJudge does not run, where `annotators add` sets no password), were
    # added through the CLI, and rate every task with their own tokens.
    admin = LabelStudioClient(labelstudio.url, labelstudio.connection().token)
    raters = {}
    for email in (FAIR1, FAIR2, HARSH):
        labelstudio.sign_up(email, "quality-horse-7")
        added = run(setup, "annotators", "add", email)
        assert added.exit_code == 0, added.output
        assert "already has a Label Studio account" in added.output
        raters[email] = LabelStudioClient(
            labelstudio.url, labelstudio.login_token(email, "quality-horse-7")
        )
    project = created["project"]
    to = _targets(admin, project)
    tasks = sorted(admin.export_tasks(project), key=lambda t: t["id"])
    assert {t["data"]["fj_item"] for t in tasks} == drawn | set(gold_keys)
    # FAIR2 leaves the last rubric of one multi-rubric task (an S2 item) unscored.
    partial = next(t for t in tasks if len(t["data"]["fj_rubrics"]) > 1)
    partial_item, left_out = partial["data"]["fj_item"], partial["data"]["fj_rubrics"][-1]
    submitted: dict[str, dict[tuple[str, str], float]] = defaultdict(dict)
    for email, client in raters.items():
        for task in tasks:
            item = task["data"]["fj_item"]
            result = []
            for rubric in task["data"]["fj_rubrics"]:
                if email == FAIR2 and task is partial and rubric == left_out:
                    continue
                if item in gold_keys:
                    score = ON_GOLD[email][gold_keys.index(item)]
                else:
                    score = planted(email, item, rubric)
                submitted[email][(item, rubric)] = float(score)
                name = interface.control_name(interface.SCORE, rubric)
                result.append(
                    {"from_name": name, "to_name": to[name], "type": "choices",
                     "value": {"choices": [str(score)]}}
                )  # fmt: skip
            client.annotate(task["id"], result, lead_time=20.0)

    # The pull stores what the incomplete annotation has and warns about the rest.
    pulled = run(setup, "campaign", "pull", NAME, "--json")
    assert pulled.exit_code == 0, pulled.output
    data = json.loads(pulled.stdout)
    assert data["added"] == sum(len(v) for v in submitted.values())
    reason = (
        f"{FAIR2} left {left_out} unscored on item {partial_item}; the other rubric(s) were stored"
    )
    assert data["incomplete"] == [{"task": partial["id"], "reason": reason}]
    assert data["problems"] == []
    # The warning as printed (rich may wrap a long line; the words are what counts).
    assert f"warning: task {partial['id']}: {reason}" in " ".join(pulled.stderr.split())
    text_pull = run(setup, "campaign", "pull", NAME)
    assert text_pull.exit_code == 0, text_pull.output
    assert f"campaign {NAME}: 0 added, 0 updated" in text_pull.stdout
    assert f"warning: task {partial['id']}: {reason}" in " ".join(text_pull.stderr.split())

    # Status as JSON, default thresholds (0.5 levels, kappa 0.4).
    said = run(setup, "campaign", "status", NAME, "--json")
    assert said.exit_code == 0, said.output
    status = json.loads(said.stdout)
    people = {a["email"]: a for a in status["annotators"]}
    assert set(people) == {FAIR1, FAIR2, HARSH}  # the admin rated nothing
    assert status["thresholds"] == {"offset_margin": 0.5, "min_kappa": 0.4}
    assert (status["tasks"], status["gold_items"]) == (20, 5)
    # 20 tasks each; FAIR2's partial one is incomplete, not done, and its item short.
    assert [(people[e]["done"], people[e]["incomplete"]) for e in (FAIR1, FAIR2, HARSH)] == [
        (20, 0), (19, 1), (20, 0),
    ]  # fmt: skip
    assert status["items_incomplete"] == {partial_item: [f"{FAIR2}: {left_out} unscored"]}
    assert status["items_short"] == {partial_item: 2}

    # Offsets, recomputed here: per item the mean over its shared rubrics of HARSH - other,
    # then scipy's one-sample t interval over the 20 items.
    for other in (FAIR1, FAIR2):
        d, ci = _offset(submitted, HARSH, other)
        assert ci.high < -0.5  # confidently harsher than the margin: must be flagged
        (pair,) = [p for p in people[HARSH]["offset"]["pairs"] if p["other"] == other]
        assert (pair["mean"], pair["ci_low"], pair["ci_high"], pair["n_items"]) == (
            pytest.approx(d.mean()), pytest.approx(ci.low), pytest.approx(ci.high), 20,
        )  # fmt: skip
    harsh_flags = [f for f in people[HARSH]["flags"] if "harsher" in f]
    assert len(harsh_flags) == 1
    assert harsh_flags[0].startswith(
        "harsher than each of the 2 other annotator(s) by more than 0.5"
    )
    assert people[FAIR1]["flags"] == [] and people[FAIR2]["flags"] == []

    # Gold accuracy per annotator, by hand (GOLD_EXPECTED).
    for email, (exact, mae) in GOLD_EXPECTED.items():
        assert people[email]["gold"] == {"n": 5, "exact": pytest.approx(exact),
                                         "mae": pytest.approx(mae)}  # fmt: skip

    # Kappa: each annotator's best quadratic-weighted kappa with another, by scikit-learn.
    for email in (FAIR1, FAIR2, HARSH):
        best, other, n = _best_kappa(submitted, email)
        k = people[email]["agreement"]
        assert (k["kappa"], k["other"], k["n_ratings"]) == (pytest.approx(best), other, n)

    # The same status as text: the flag, and the gold column, on each annotator's row.
    text = run(setup, "campaign", "status", NAME)
    assert text.exit_code == 0, text.output
    rows = _rows(text.stdout)
    assert set(rows) == {FAIR1, FAIR2, HARSH}, text.stdout
    assert (
        "harsher than each of the 2 other annotator(s) by more than 0.5 levels"
        in (rows[HARSH]["worth a look"])
    )
    assert rows[FAIR1]["worth a look"] == "" and rows[FAIR2]["worth a look"] == ""
    for email, shown in GOLD_TEXT.items():
        assert rows[email]["gold"] == shown, rows[email]
    assert (rows[FAIR2]["done"], rows[FAIR2]["incomplete"]) == ("19", "1")
    assert f"incomplete: item {partial_item}: {FAIR2}: {left_out} unscored" in text.stdout
    assert "items short of 3 ratings: 1" in text.stdout
    assert "gold items: 5 " in text.stdout

    # Thresholds from the options. No mean offset can lie beyond 3 levels (each rating is at
    # most 3 below the others'), so none is flagged harsher; kappa is below 1 for everyone
    # (each pair differs somewhere), so everyone is flagged at --min-kappa 1.
    loose = run(setup, "campaign", "status", NAME, "--offset-margin", "3", "--min-kappa", "1",
                "--json")  # fmt: skip
    assert loose.exit_code == 0, loose.output
    moved = json.loads(loose.stdout)
    assert moved["thresholds"] == {"offset_margin": 3.0, "min_kappa": 1.0}
    for a in moved["annotators"]:
        assert not [f for f in a["flags"] if "harsher" in f or "lenient" in f], a["flags"]
        best, other, n = _best_kappa(submitted, a["email"])
        assert best < 1
        low = f"best quadratic-weighted kappa {best:.2f} < 1, with {other} on {n} ratings)"
        assert [f for f in a["flags"] if "low agreement" in f] == [
            f"low agreement with each of the 2 other annotator(s) ({low}"
        ]
    loose_text = run(setup, "campaign", "status", NAME, "--offset-margin", "3", "--min-kappa", "1")
    assert loose_text.exit_code == 0, loose_text.output
    for row in _rows(loose_text.stdout).values():
        assert "harsher" not in row["worth a look"], row
        assert "low agreement with each of the 2 other annotator(s)" in row["worth a look"], row


def _offset(
    submitted: dict[str, dict[tuple[str, str], float]], who: str, other: str
) -> tuple[np.ndarray[Any, Any], Any]:
    per_item: dict[str, list[float]] = defaultdict(list)
    for key, value in submitted[who].items():
        if key in submitted[other]:
            per_item[key[0]].append(value - submitted[other][key])
    d = np.array([np.mean(v) for v in per_item.values()])
    return d, stats.ttest_1samp(d, 0).confidence_interval(0.95)


def _best_kappa(
    submitted: dict[str, dict[tuple[str, str], float]], who: str
) -> tuple[float, str, int]:
    """The highest quadratic-weighted kappa of ``who`` with another annotator over their
    shared ratings, by scikit-learn over the levels 1-5 (independent of the product)."""
    found = []
    for other in sorted(submitted):
        if other == who:
            continue
        shared = sorted(set(submitted[who]) & set(submitted[other]))
        x = [int(submitted[who][k]) for k in shared]
        y = [int(submitted[other][k]) for k in shared]
        kappa = cohen_kappa_score(x, y, labels=[1, 2, 3, 4, 5], weights="quadratic")
        found.append((float(kappa), other, len(shared)))
    return max(found, key=lambda f: f[0])


def _rows(stdout: str) -> dict[str, dict[str, str]]:
    """The status table's rows by annotator (of FAIR1, FAIR2, HARSH), each cell's lines
    joined with spaces: rich wraps long cells over several lines, and cuts a long email
    with "…" (then the row is the one annotator whose email starts with what is shown)."""
    lines = stdout.splitlines()
    heads = [
        [c.strip() for c in line.strip().strip("┃").split("┃")] for line in lines if "┃" in line
    ]
    columns = [" ".join(filter(None, parts)) for parts in zip(*heads, strict=True)]
    rows: list[list[list[str]]] = []
    for line in lines:
        if line.count("│") < 2:
            continue
        cells = [c.strip() for c in line.strip().strip("│").split("│")]
        if cells[1].isdigit():  # the "done" column: set on a row's first line only
            rows.append([[c] if c else [] for c in cells])
        else:
            for parts, c in zip(rows[-1], cells, strict=True):
                if c:
                    parts.append(c)
    found = {}
    for r in rows:
        shown = "".join(r[0]).rstrip("…")
        (email,) = [e for e in (FAIR1, FAIR2, HARSH) if e.startswith(shown)]
        found[email] = {name: " ".join(parts) for name, parts in zip(columns, r, strict=True)}
    return found


def _targets(admin: LabelStudioClient, project: int) -> dict[str, str]:
    """Control name -> the object tag it labels, read from the project's XML."""
    root = ET.fromstring(admin._sdk.projects.get(project).label_config or "")
    return {e.get("name", ""): e.get("toName", "") for e in root.iter() if e.get("toName")}


def _rubric(db_url: str, key: str) -> str:
    """The first rubric an item's stage is rated with (S1 and S4: ICS, S2: TCS, S3: SBAS)."""
    engine = make_engine(db_url)
    with Session(engine) as s:
        stage = s.exec(select(Item.stage).where(Item.key == key)).one()
    engine.dispose()
    return {"S1": "ICS", "S2": "TCS", "S3": "SBAS", "S4": "ICS"}[stage]
