"""`fairjudge campaign create --strategy stratified` with fewer items than strata, as a user
runs it against the session's real Label Studio: the strata that get their one item are drawn
at random with the seed, and the shortfall and the empty strata are printed and stored."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from sqlmodel import Session, select

from annotation.labelstudio.service import LabelStudioService
from judge.store.engine import make_engine
from judge.store.tables import Campaign, CampaignTask, Item, Judgment
from server.cli import cli
from tests.annotation.labelstudio.conftest import shared_labelstudio
from tests.support import stores
from tests.support.factories import write_config

TOKEN_ENV = "FJ_TEST_STRATA_TOKEN"


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
) -> Iterator[tuple[Path, str, int]]:
    """A config whose store holds the 18 S1 sample items judged with ICS through the stub (a
    copy of the session's template, tests/support/stores.py), and whose Label Studio is the
    session's server reached by URL and token variable."""
    jud = judged_s1_template
    db_url = stores.copy_store(jud.path, tmp_path / "fairjudge.db")
    path = write_config(tmp_path / "fairjudge.toml", jud.base_url, db_url)
    path.write_text(
        path.read_text() + f'[labelstudio]\nurl = "{labelstudio.url}"\ntoken_env = "{TOKEN_ENV}"\n'
    )
    monkeypatch.setenv(TOKEN_ENV, labelstudio.connection().token)
    yield path, db_url, jud.judge_run_id


def run(config: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--config", str(config), *args])


def strata_by_hand(db_url: str, judge_run: int) -> dict[str, list[int]]:
    """Stratum name -> item ids, worked out from the stored judgments without the sampler:
    each rubric's mean of scored samples, averaged over rubrics, put on the nearest level
    with halves up (docs/annotation.md)."""
    engine = make_engine(db_url)
    scores: dict[int, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    with Session(engine) as s:
        for j in s.exec(select(Judgment).where(Judgment.judge_run_id == judge_run)):
            if j.score is not None:
                scores[j.item_id][j.rubric].append(j.score)
        items = {i.id: i for i in s.exec(select(Item))}
    engine.dispose()
    strata: dict[str, list[int]] = defaultdict(list)
    for item_id, by_rubric in scores.items():
        means = [Fraction(sum(v), len(v)) for v in by_rubric.values()]
        level = math.floor(sum(means) / len(means) + Fraction(1, 2))
        item = items[item_id]
        strata[f"score {level} / {item.stage} / {item.factor}"].append(item_id)
    return dict(strata)


def test_a_sample_smaller_than_the_strata_prints_and_stores_its_shortfall(
    config: tuple[Path, str, int],
) -> None:
    path, db_url, judge_run = config
    strata = strata_by_hand(db_url, judge_run)
    h = len(strata)
    assert h > 2, strata  # the stub's scores and the 18 items' factors give several strata
    created = run(
        path, "campaign", "create", "--judge-run", str(judge_run), "--strategy", "stratified",
        "--size", "2", "--seed", "4", "--annotators", "1", "--name", "strata-short",
    )  # fmt: skip
    assert created.exit_code == 0, created.output
    # 2 items for h strata: each stratum is one of the 2 chosen with chance 2/h, so each
    # item's inclusion probability is (2/h) / its stratum's size; h - 2 strata got nothing.
    assert f"note: 2 items cannot give 1 to each of the {h} strata: {h - 2} got fewer" in (
        created.output
    )
    held = sum(len(v) for v in strata.values())
    assert held == 18  # every item of the run was scored, so none is at level "unscored"
    assert f"note: {h - 2} of {h} strata got no item in this sample: " in created.output

    engine = make_engine(db_url)
    with Session(engine) as s:
        campaign = s.exec(select(Campaign).where(Campaign.name == "strata-short")).one()
        tasks = s.exec(select(CampaignTask).where(CampaignTask.campaign_id == campaign.id)).all()
    engine.dispose()
    design = campaign.design
    assert {k: v[0] for k, v in design["strata"].items()} == {k: len(v) for k, v in strata.items()}
    assert design["expected"] == pytest.approx({k: 2 / h for k in strata})
    empty = [k for k, (_, d) in design["strata"].items() if d == 0]
    assert design["shortfall"] == {k: [1, 0] for k in empty} and len(empty) == h - 2
    assert len(tasks) == 2 and {t.stratum for t in tasks}.isdisjoint(empty)
    for t in tasks:
        assert t.item_id in strata[t.stratum]
        assert t.inclusion_probability == pytest.approx(2 / h / len(strata[t.stratum]))
    # The empty strata's share of the run, as printed: their items over all 18.
    share = sum(len(strata[k]) for k in empty)
    assert f"they hold {share} of {held} items ({100 * share / held:.0f} %) of the run" in (
        created.output
    )

    as_json = run(path, "campaign", "create", "--judge-run", str(judge_run), "--strategy",
                  "stratified", "--size", "2", "--seed", "4", "--annotators", "1", "--name",
                  "strata-short", "--json")  # fmt: skip
    assert as_json.exit_code == 0, as_json.output
    assert json.loads(as_json.stdout)["shortfall"] == {k: [1, 0] for k in empty}
