"""Ratings for users' own rubrics through the real CLI (issue 25, item 6): a registered rubric's
ratings are imported on the rubric's own scale, bad rows are refused one clear line each with
nothing stored, and the SummEval round trip (register a coherence rubric, import summaries as
free-form items, judge them through the stub, import the experts' ratings, read agreement)
gives the values scipy, scikit-learn and krippendorff compute from the data files.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from sqlalchemy.engine import Engine
from sqlmodel import Session, func, select

from annotation.errors import RatingsError
from judge.store.tables import HumanRating
from server.cli import cli
from tests.support import summeval_coherence as se
from tests.support.factories import write_config
from tests.support.stub_openai import StubServer

Invoke = Callable[..., Result]

# A 3-level rubric for free-form items (levels 1, 2, 3).
CLARITY = """[CLARITY]
criterion = "How clearly is the ANSWER written?"
levels = ["Unclear.", "Mostly clear.", "Clear."]
texts = [["PROMPT", "{item[prompt]}"], ["ANSWER", "{answers[answer]}"]]
"""
FREE = [
    {"id": "f1", "stage": "free", "prompt": "How do I boil an egg?"},
    {"id": "f2", "stage": "free", "prompt": "Why is the sea salty?"},
]


def invoker(tmp_path: Path, db_url: str, stub: StubServer) -> Invoke:
    config = write_config(tmp_path / "c.toml", stub.base_url, db_url, concurrency=4)
    runner = CliRunner()

    def run(*args: str, ok: bool = True) -> Result:
        result = runner.invoke(cli, ["--config", str(config), *args])
        if ok:
            assert result.exit_code == 0, (result.output, result.exception)
        return result

    return run


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def write_ratings(path: Path, rows: list[dict[str, Any]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=["item_id", "rubric", "rater", "score"])
        writer.writeheader()
        writer.writerows(rows)
    return path


def stored(engine: Engine) -> int:
    with Session(engine) as s:
        return int(s.exec(select(func.count()).select_from(HumanRating)).one())


def free_run(tmp_path: Path, run: Invoke) -> int:
    """The two free-form items, answered elsewhere, in a generation run; CLARITY registered."""
    run("rubrics", "add", str(tmp_path.joinpath("clarity.toml")))
    run("dataset", "import", str(write_jsonl(tmp_path / "items.jsonl", FREE)), "--name", "free")
    answers = [{"item_id": i["id"], "part": "answer", "text": f"answer {i['id']}"} for i in FREE]
    done = run(
        "responses",
        "import",
        str(write_jsonl(tmp_path / "answers.jsonl", answers)),
        "--dataset",
        "free",
        "--json",
    )
    return int(json.loads(done.stdout)["generation_run_id"])


def test_a_registered_rubric_is_rated_on_its_own_scale(
    tmp_path: Path, db_url: str, engine: Engine, stub: StubServer
) -> None:
    run = invoker(tmp_path, db_url, stub)
    (tmp_path / "clarity.toml").write_text(CLARITY, encoding="utf-8")
    gen = free_run(tmp_path, run)
    base = ("ratings", "import", "--run", str(gen))

    # Before the fix, a free item's rubric was looked up among the built-ins only: "rubric
    # 'CLARITY' does not apply to free item 'f1' (use )". Now 3 is CLARITY's top level.
    good = write_ratings(
        tmp_path / "good.csv",
        [
            {"item_id": "f1", "rubric": "clarity", "rater": "ann", "score": 3},
            {"item_id": "f2", "rubric": "CLARITY", "rater": "ann", "score": 1},
        ],
    )
    done = json.loads(run(*base, str(good), "--json").stdout)
    assert (done["added"], done["items"], done["scale"]) == (2, 2, "each rubric's own")
    again = json.loads(run(*base, str(good), "--json").stdout)
    assert (again["added"], again["unchanged"]) == (0, 2)  # idempotent

    # Every bad row named by its line (header = line 1), nothing stored.
    bad = write_ratings(
        tmp_path / "bad.csv",
        [
            {"item_id": "f1", "rubric": "CLARITY", "rater": "b", "score": 2},  # 2: fine
            {"item_id": "f2", "rubric": "CLARITY", "rater": "b", "score": 4},  # 3: off 1-3
            {"item_id": "f1", "rubric": "NOPE", "rater": "b", "score": 2},  # 4: unknown rubric
            {"item_id": "f1", "rubric": "ICS", "rater": "b", "score": 2},  # 5: S1/S4 rubric
            {"item_id": "zz", "rubric": "CLARITY", "rater": "b", "score": 2},  # 6: no such item
            {"item_id": "f1", "rubric": "CLARITY", "rater": "b", "score": 1},  # 7: repeats 2
        ],
    )
    refused = run(*base, str(bad), ok=False)
    assert isinstance(refused.exception, RatingsError)
    use = "rubrics for free items: CLARITY"
    assert refused.exception.problems == [
        (3, "rubric CLARITY: score '4' is outside the 1-3 scale"),
        (4, f"unknown rubric 'NOPE' ({use})"),
        (5, f"rubric 'ICS' does not apply to free item 'f1' ({use})"),
        (6, "unknown item_id 'zz' (not in the run's dataset)"),
        (7, "rater 'b' already rated 'f1' / CLARITY on line 2"),
    ]
    # One line per problem in the message, each naming its line.
    assert "\n  line 3: rubric CLARITY: score '4' is outside the 1-3 scale\n" in str(
        refused.exception
    )
    assert stored(engine) == 2

    # A declared scale of another size contradicts the rubric: one line, nothing stored.
    five = run(*base, str(bad), "--scale", "1-5", ok=False)
    assert isinstance(five.exception, RatingsError)
    assert five.exception.problems[0] == (
        2,
        "rubric CLARITY is rated 1-3 (3 levels), not on the given scale 1-5; leave the scale "
        "out or give one of 3 levels",
    )
    # Named levels of the same size are read as 1, 2, 3.
    named = write_ratings(
        tmp_path / "named.csv",
        [{"item_id": "f1", "rubric": "CLARITY", "rater": "c", "score": "mostly clear"}],
    )
    run(*base, str(named), "--scale", "unclear,mostly clear,clear")
    with Session(engine) as s:
        scores = {(r.rater, r.score) for r in s.exec(select(HumanRating))}
    assert scores == {("ann", 3.0), ("ann", 1.0), ("c", 2.0)}
    # Another batch keeps its own copy of the same ratings; again, it adds nothing.
    other = json.loads(run(*base, str(good), "--batch", "pilot", "--json").stdout)
    assert (other["added"], other["unchanged"]) == (2, 0)
    other = json.loads(run(*base, str(good), "--batch", "pilot", "--json").stdout)
    assert (other["added"], other["unchanged"]) == (0, 2)
    assert stored(engine) == 5


def test_without_registered_rubrics_free_items_say_how_to_get_one(
    tmp_path: Path, db_url: str, engine: Engine, stub: StubServer
) -> None:
    run = invoker(tmp_path, db_url, stub)
    run("dataset", "import", str(write_jsonl(tmp_path / "items.jsonl", FREE)), "--name", "free")
    answers = [{"item_id": "f1", "part": "answer", "text": "hello"}]
    done = run(
        "responses",
        "import",
        str(write_jsonl(tmp_path / "a.jsonl", answers)),
        "--dataset",
        "free",
        "--json",
    )
    gen = json.loads(done.stdout)["generation_run_id"]
    path = write_ratings(
        tmp_path / "r.csv", [{"item_id": "f1", "rubric": "CLARITY", "rater": "a", "score": 1}]
    )
    refused = run("ratings", "import", str(path), "--run", str(gen), ok=False)
    assert isinstance(refused.exception, RatingsError)
    assert refused.exception.problems == [
        (
            2,
            "unknown rubric 'CLARITY' (no rubric rates free items yet: register one with "
            "`fairjudge rubrics add`)",
        )
    ]
    assert stored(engine) == 0


def test_summeval_round_trip_through_the_cli(tmp_path: Path, db_url: str) -> None:
    summaries = se.load_summaries()
    want = se.expected(summaries)
    with StubServer(responder=se.judge_responder(summaries)) as stub:
        run = invoker(tmp_path, db_url, stub)
        (tmp_path / "coherence.toml").write_text(se.RUBRIC_TOML, encoding="utf-8")
        run("rubrics", "add", str(tmp_path / "coherence.toml"))
        items = write_jsonl(tmp_path / "summeval.jsonl", se.items(summaries))
        run("dataset", "import", str(items), "--name", "summeval")
        answers = write_jsonl(tmp_path / "summaries.jsonl", se.answers(summaries))
        made = run("responses", "import", str(answers), "--dataset", "summeval", "--json")
        gen = int(json.loads(made.stdout)["generation_run_id"])
        run("judge", str(gen), "--rubrics", se.RUBRIC)
    ratings = write_ratings(tmp_path / "experts.csv", se.rating_rows(summaries))
    imported = json.loads(
        run("ratings", "import", str(ratings), "--run", str(gen), "--json").stdout
    )
    assert (imported["added"], imported["raters"], imported["items"]) == (300, 3, 100)

    shown = run("agreement", "--run", str(gen), "--bootstrap", "0", "--json")
    result = json.loads(shown.stdout)
    entry = result["rubrics"][se.RUBRIC]
    assert (entry["n_rated_items"], entry["n_raters"], entry["scale"]) == (100, 3, "1-5")
    (judge,) = entry["judges"]
    coefficients = judge["coefficients"]
    assert judge["n"] == want.n
    assert coefficients["pearson"]["value"] == pytest.approx(want.pearson)
    assert coefficients["spearman"]["value"] == pytest.approx(want.spearman)
    assert coefficients["kappa_quadratic"]["value"] == pytest.approx(want.kappa_quadratic)
    humans = entry["human_vs_human"]
    assert humans["alpha_interval"]["value"] == pytest.approx(want.alpha_interval)
    assert humans["alpha_ordinal"]["value"] == pytest.approx(want.alpha_ordinal)
