"""``fairjudge jury RUN RUN...`` on planted judge runs in a temporary store
(tests/support/planted_judge.py: rows written directly, no model).

The expected agreement values are scipy's, computed here on the planted lists (the human
score is the mean of the three planted raters, by numpy); the verdicts follow from the
planted noise (see tests/judge/stats/test_jury.py's docstring for the arithmetic: a good
judge of noise sd 0.3 and two of sd 2.0 average to noise sd 0.95, worse than the good
judge; three copies of one judge are that judge). The cost is derived by hand from the
tokens written on the judgments and the prices in the config file.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from sqlalchemy import update
from sqlalchemy.engine import Engine
from sqlmodel import Session

from judge.store.tables import Judgment
from tests.support.cli import fairjudge
from tests.support.planted_judge import add_judge_run, plant

N = 150


def _planted(seed: int = 0) -> tuple[dict[str, list[float]], np.ndarray]:
    """Three raters (the true level plus or minus one with probability 0.4) and their mean."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(1, 6, N)
    raters = {
        f"r{k}": np.clip(truth + rng.choice([-1, 0, 1], N, p=[0.2, 0.6, 0.2]), 1, 5).tolist()
        for k in range(3)
    }
    return raters, np.mean([raters[k] for k in raters], axis=0)


def _judge(human: np.ndarray, sd: float, seed: int, shift: float = 0.0) -> list[float | None]:
    rng = np.random.default_rng(seed)
    return np.clip(np.round(human + shift + rng.normal(0, sd, human.size)), 1, 5).tolist()


def _jury(
    engine: Engine, judges: list[list[float | None]], raters: dict[str, list[float]]
) -> list[int]:
    """The first judge planted with the ratings, the others as more runs of the same answers."""
    with Session(engine) as session:
        first = plant(session, judges[0], raters, model="judge-0")
        runs = [first.judge_run_id]
        for k, scores in enumerate(judges[1:], start=1):
            more = add_judge_run(session, first.generation_run_id, first.item_ids, scores,
                                 model=f"judge-{k}")  # fmt: skip
            runs.append(more.judge_run_id)
    return runs


def test_good_and_two_noisy_judges_the_mean_is_worse_and_the_learnt_weights_find_the_good_one(
    engine: Engine, db_url: str, tmp_path: Path
) -> None:
    raters, human = _planted()
    judges = [_judge(human, 0.3, 1), _judge(human, 2.0, 2), _judge(human, 2.0, 3)]
    runs = [str(r) for r in _jury(engine, judges, raters)]
    done = fairjudge("--db", db_url, "jury", *runs, "--json", "--out", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    ics = data["rubrics"]["ICS"]
    assert ics["n_items"] == N
    for member, scores in zip(ics["judges"], judges, strict=True):
        rho = stats.spearmanr(scores, human).statistic
        assert member["coefficients"]["spearman"]["value"] == pytest.approx(rho, abs=1e-10)
    jury_rho = stats.spearmanr(np.mean(judges, axis=0), human).statistic
    spearman = ics["jury"]["coefficients"]["spearman"]
    assert spearman["value"] == pytest.approx(jury_rho, abs=1e-10)
    assert spearman["ci_low"] < spearman["value"] < spearman["ci_high"]
    versus = ics["versus_best"]
    assert versus["best_judge_run"] == int(runs[0])
    assert versus["verdict"] == "worse" and versus["ci_high"] < 0
    assert versus["difference"] < -0.05  # noise sd 0.95 against 0.3
    written = json.loads((tmp_path / "out" / "jury.json").read_text())
    assert written["rubrics"] == data["rubrics"]

    learnt = fairjudge("--db", db_url, "jury", *runs, "--combine", "learnt", "--json")
    assert learnt.returncode == 0, learnt.stderr
    ics = json.loads(learnt.stdout)["rubrics"]["ICS"]
    assert ics["weights"]["folds"] == 5
    assert all(fold[runs[0]] > 0.6 for fold in ics["weights"]["per_fold"])
    # Weights near (0.9, 0.05, 0.05) give noise sd sqrt(0.81 x 0.09 + 2 x 0.0025 x 4) = 0.30,
    # the good judge's own: the learnt jury about equals it, where the mean lost ~0.1.
    assert abs(ics["versus_best"]["difference"]) < 0.03


def test_three_copies_of_one_biased_judge_are_not_better_than_it_and_it_is_said(
    engine: Engine, db_url: str
) -> None:
    raters, human = _planted(1)
    biased = _judge(human, 0.5, 4, shift=1.0)
    runs = [str(r) for r in _jury(engine, [biased] * 3, raters)]
    done = fairjudge("--db", db_url, "jury", *runs, "--combine", "majority")
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    assert (
        f"ICS: the jury's scores equal judge run {runs[0]}'s on every item, so it is not "
        f"better than its best judge, run {runs[0]}"
    ) in text
    assert "spearman +0.000, 95 % interval [+0.000, +0.000]" in text


def test_the_jury_costs_the_sum_of_its_runs(engine: Engine, db_url: str, tmp_path: Path) -> None:
    raters, human = _planted(2)
    runs = _jury(engine, [_judge(human, 0.8, s) for s in (5, 6, 7)], raters)
    with Session(engine) as session:
        session.exec(update(Judgment).values(prompt_tokens=1000, completion_tokens=100))  # type: ignore[call-overload]
        session.commit()
    config = tmp_path / "fairjudge.toml"
    config.write_text(
        '[endpoints.judge]\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "judge-0"\n'
        "input_price_per_mtok = 2.0\noutput_price_per_mtok = 8.0\n"
        '[generation]\nendpoint = "judge"\n[judge]\nendpoint = "judge"\n'
    )
    done = fairjudge("--config", config, "--db", db_url, "jury", *map(str, runs), "--json")
    assert done.returncode == 0, done.stderr
    cost = json.loads(done.stdout)["cost"]
    # Per judgment 1000 x 2.0 / 1e6 + 100 x 8.0 / 1e6 = 0.0028; 150 judgments per run.
    assert cost["runs"] == {str(r): pytest.approx(0.42) for r in runs}
    assert cost["total"] == pytest.approx(1.26)


@pytest.mark.parametrize(
    ("case", "says"),
    [
        ("one", "a jury needs two judge runs or more of the same answers, got only judge run"),
        ("answers", "judged different answers (generation runs"),
        ("rubrics", "judged different rubrics (ICS vs TCS)"),
        ("unrated", "has no human ratings, so no judge can be checked against people"),
        ("unscored", "no rated item of generation run"),
        ("versions", "judged rubric ICS in different versions (run {first}: 1; run {other}: 2)"),
        ("scale", "judge run {other}'s ICS scores lie outside the rubric's 1-5 scale (e.g. 7)"),
    ],
)
def test_bad_juries_are_one_line_and_exit_1(
    engine: Engine, db_url: str, case: str, says: str
) -> None:
    raters, human = _planted(3)
    good = _judge(human, 0.5, 8)
    with Session(engine) as session:
        first = plant(session, good, {} if case == "unrated" else raters)
        g, items = first.generation_run_id, first.item_ids
        if case == "answers":
            other = plant(session, good, raters, name="other").judge_run_id
        else:
            scores = [None] * N if case == "unscored" else list(good)
            if case == "scale":
                scores[4] = 7  # stored as given: a score no 1-5 rubric has
            other = add_judge_run(
                session, g, items, scores, model="second",
                rubric="TCS" if case == "rubrics" else "ICS",
            ).judge_run_id  # fmt: skip
        if case == "versions":
            for run, version in ((first.judge_run_id, "1"), (other, "2")):
                session.exec(update(Judgment).where(Judgment.judge_run_id == run)  # type: ignore[call-overload]
                             .values(rubric_version=version))  # fmt: skip
            session.commit()
    runs = [first.judge_run_id] if case == "one" else [first.judge_run_id, other]
    done = fairjudge("--db", db_url, "jury", *map(str, runs))
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    says = says.format(first=first.judge_run_id, other=other)
    assert len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0], lines


def test_three_independent_judges_make_a_jury_better_than_the_best_and_it_is_said(
    engine: Engine, db_url: str
) -> None:
    # Noise sd 0.8 each, independent: their mean has noise sd 0.8 / sqrt(3) = 0.46.
    raters, human = _planted(4)
    judges = [_judge(human, 0.8, s) for s in (10, 11, 12)]
    runs = [str(r) for r in _jury(engine, judges, raters)]
    done = fairjudge("--db", db_url, "jury", *runs)
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    rhos = [stats.spearmanr(j, human).statistic for j in judges]
    best = runs[int(np.argmax(rhos))]
    assert f"ICS: jury (mean) agrees with people better than its best judge, run {best}" in text
    difference = stats.spearmanr(np.mean(judges, axis=0), human).statistic - max(rhos)
    assert f"spearman {difference:+.3f}, 95 % interval [+" in text


def test_a_jury_of_constant_judges_on_a_skewed_rubric_is_flagged_and_a_good_one_is_not(
    engine: Engine, db_url: str
) -> None:
    # Planted: three raters give 90 of 100 items 5 and 10 of them 1; three judges say 5 to
    # all, so the mean jury does too. By hand (as in tests/server/test_qualify.py): exact
    # agreement 0.90, the majority baseline 0.90, kappa 0, and AC1 on 1-5 with pa = 0.90,
    # pi_5 = (1 + 0.9) / 2 = 0.95, pi_1 = 0.05: pe = 2 * 0.95 * 0.05 / 4 = 0.02375,
    # AC1 = (0.90 - pe) / (1 - pe). Both flags, on the jury and on every judge.
    humans = [5.0] * 90 + [1.0] * 10
    runs = [str(r) for r in _jury(engine, [[5.0] * 100] * 3, {r: humans for r in "abc"})]
    done = fairjudge("--db", db_url, "jury", *runs, "--json")
    assert done.returncode == 0, done.stderr
    ics = json.loads(done.stdout)["rubrics"]["ICS"]
    pe = 2 * 0.95 * 0.05 / 4
    for member in (ics["jury"], *ics["judges"]):
        c = member["coefficients"]
        assert c["exact_agreement"]["value"] == pytest.approx(0.90, abs=1e-12)
        assert c["majority_baseline"]["value"] == pytest.approx(0.90, abs=1e-12)
        assert c["kappa"]["value"] == pytest.approx(0.0, abs=1e-12)
        assert c["ac1"]["value"] == pytest.approx((0.90 - pe) / (1 - pe), abs=1e-9)
        assert member["majority_category"] == 5
        assert {f["code"] for f in member["flags"]} == {
            "kappa_covers_zero",
            "no_better_than_majority",
        }
    text = " ".join(fairjudge("--db", db_url, "jury", *runs).stdout.split())
    assert "ICS: raw agreement beside chance" in text
    assert "no better than always answering the majority class" in text


def test_a_jury_of_judges_that_track_people_carries_no_flag(engine: Engine, db_url: str) -> None:
    raters, human = _planted(2)
    judges = [_judge(human, 0.3, 5), _judge(human, 0.3, 6), _judge(human, 0.3, 7)]
    runs = [str(r) for r in _jury(engine, judges, raters)]
    done = fairjudge("--db", db_url, "jury", *runs, "--json")
    assert done.returncode == 0, done.stderr
    ics = json.loads(done.stdout)["rubrics"]["ICS"]
    for member in (ics["jury"], *ics["judges"]):
        assert member["flags"] == [], member["label"]
        c = member["coefficients"]
        assert c["exact_agreement"]["ci_low"] > c["majority_baseline"]["value"]
        assert c["kappa"]["ci_low"] > 0 and c["ac1"]["value"] > 0
