"""``fairjudge judge-pairs`` through the real command line against scripted stub judges: an
order-blind judge (it names the answer of higher planted quality, whichever position it is
in) is not flagged, and one that always picks the first-shown answer is flagged. Three
imported generation runs ("good", "mid", "poor"), so every pair of runs is judged and
Bradley-Terry has three models.

The expected figures are counted here from the stub's request bodies: each body's two fenced
answers are read back, the planted rule gives the verdict the stub sent, and both orders of
each (question, pair, seed) are joined into Shi et al.'s table (consistent: AB, BA or tie-tie;
primacy: AA or A with a tie; recency: BB or B with a tie). The rule and the table are written
here; nothing is taken from the code under test.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import quote

from sqlalchemy.engine import Engine
from sqlmodel import select

from judge.data.datasets import import_items
from judge.data.responses import import_responses
from judge.runs import run_lease
from judge.store.engine import session_scope
from judge.store.tables import Item
from tests.server.api.test_api import make_api
from tests.support.cli import Done
from tests.support.cli import fairjudge as run_fairjudge
from tests.support.factories import SAMPLE, write_config
from tests.support.stub_openai import StubServer

# Planted quality of each run's answer to items 0..5; "poor" never answered item 5.
QUALITY = {
    "good": [3, 3, 3, 2, 3, 1],
    "mid": [2, 2, 3, 3, 1, 2],
    "poor": [1, 2, 1, 1, 2, None],
}
ANSWER = re.compile(r"<<ANSWER ([AB]) (\w+)>>\n(.*?)\n<<END ANSWER \1 \2>>", re.S)
SHOWN = re.compile(r"item (\d+) .* quality (\d)")
PROSE = "Both answers have their merits and I would not choose between them."


def fairjudge(config: Path, *args: str) -> Done:
    return run_fairjudge("--config", config, *args)


def shown(messages: list[dict[str, str]]) -> tuple[tuple[int, int], tuple[int, int]]:
    """(item, quality) of ANSWER A and of ANSWER B, read from the judge prompt's fences."""
    found = {label: text for label, _, text in ANSWER.findall(messages[-1]["content"])}
    a, b = (SHOWN.search(found[label]) for label in "AB")
    assert a is not None and b is not None
    return (int(a.group(1)), int(a.group(2))), (int(b.group(1)), int(b.group(2)))


def blind_rule(messages: list[dict[str, str]]) -> str:
    """The order-blind judge: the higher quality wins, equal is a tie; item 0 gets prose."""
    (item, qa), (_, qb) = shown(messages)
    if item == 0:
        return PROSE
    verdict = "A" if qa > qb else "B" if qb > qa else "tie"
    return json.dumps({"explanation": "Compared on the criterion.", "verdict": verdict})


def first_rule(messages: list[dict[str, str]]) -> str:
    """The first-position judge: always the answer shown first."""
    return json.dumps({"explanation": "The first one reads better.", "verdict": "A"})


def verdict_of(reply: str) -> str:
    return json.loads(reply)["verdict"] if reply.startswith("{") else "unreadable"


def join_orders(bodies: list[dict[str, Any]], rule: Any) -> Counter[str]:
    """Shi et al.'s table: both orders of each (item, pair of answers, seed) joined."""
    orders: dict[tuple[int, frozenset[str], int], dict[str, str]] = {}
    for body in bodies:
        messages = body["messages"]
        texts = [t for _, _, t in ANSWER.findall(messages[-1]["content"])]
        item = shown(messages)[0][0]
        key = (item, frozenset(texts), int(body.get("seed") or 0))
        orders.setdefault(key, {})[texts[0]] = verdict_of(rule(messages))
    table: Counter[str] = Counter()
    letter = {"A": "A", "B": "B", "tie": "C"}
    for got in orders.values():
        assert len(got) == 2, got  # both orders were asked
        v, w = got.values()
        if "unreadable" in (v, w):
            table["unreadable"] += 1
            continue
        pair = letter[v] + letter[w]
        table[
            "consistent" if pair in ("AB", "BA", "CC")
            else "primacy" if pair in ("AA", "AC", "CA") else "recency"
        ] += 1  # fmt: skip
    return table


def stored(store: Path) -> dict[str, Counter[str]]:
    with sqlite3.connect(store) as conn:
        rows = conn.execute("SELECT judge, verdict, raw FROM pairwiseverdict").fetchall()
    out: dict[str, Counter[str]] = {}
    for judge, verdict, _ in rows:
        out.setdefault(judge, Counter())[verdict] += 1
    return out


def _runs(engine: Engine) -> list[int]:
    with session_scope(engine) as session:
        import_items(session, SAMPLE, "sample")
        keys = sorted(session.exec(select(Item.key).where(Item.stage == "S1")).all())[:6]
    ids = []
    for name, qualities in QUALITY.items():
        rows = [
            {"item_id": k, "part": "answer", "text": f"{name} on item {i} with quality {q}."}
            for i, (k, q) in enumerate(zip(keys, qualities, strict=True))
            if q is not None
        ]
        ids.append(import_responses(engine, "sample", rows, model=name).generation_run_id)
    return ids


def test_planted_pairwise_judges_through_the_cli(
    tmp_path: Path, db_url: str, engine: Engine
) -> None:
    store = Path(str(engine.url.database))
    runs = [str(r) for r in _runs(engine)]
    # questions per pair of runs: good-mid 6, good-poor 5, mid-poor 5 (poor lacks item 5)
    questions = 6 + 5 + 5
    with StubServer(responder=blind_rule) as stub:
        config = write_config(tmp_path / "blind.toml", stub.base_url, db_url)
        plan = fairjudge(config, "judge-pairs", *runs, "--repeats", "2", "--dry-run", "--json")
        assert plan.returncode == 0, plan.stderr
        assert stub.state.bodies == []  # a dry run sends nothing
        planned = json.loads(plan.stdout)["pairs"]
        # 16 questions x 2 orders x 2 repetitions, none cached yet
        assert sum(p["calls_to_send"] for p in planned) == questions * 2 * 2
        assert [p["questions_missing_an_answer"] for p in planned] == [0, 1, 1]
        done = fairjudge(config, "judge-pairs", *runs, "--repeats", "2", "--json")
        assert done.returncode == 0, done.stderr
        blind_bodies = list(stub.state.bodies)
        assert len(blind_bodies) == questions * 2 * 2
        judge_blind = json.loads(done.stdout)["judge"]
        again = fairjudge(config, "judge-pairs", *runs, "--repeats", "2", "--json")
        assert again.returncode == 0, again.stderr
        assert len(stub.state.bodies) == len(blind_bodies)  # a rerun sends 0 calls
        assert all(p["tasks"] == 0 for p in json.loads(again.stdout)["passes"])
    with StubServer(responder=first_rule) as stub:
        config = write_config(tmp_path / "first.toml", stub.base_url, db_url)
        done = fairjudge(config, "judge-pairs", *runs, "--json")
        assert done.returncode == 0, done.stderr
        first_bodies = list(stub.state.bodies)
        judge_first = json.loads(done.stdout)["judge"]
        # the command ends with its judge's figures: every pair primacy, flagged
        (fig,) = json.loads(done.stdout)["figures"]["judges"]
        assert (fig["judge"], fig["primacy_preferring"], fig["flagged"]) == (judge_first, 16, True)
        assert len(first_bodies) == questions * 2
    assert judge_blind != judge_first  # another server is another judge

    # stored verdicts equal the verdicts the stub sent, counted from its request bodies
    counts = stored(store)
    assert counts[judge_blind] == Counter(
        verdict_of(blind_rule(b["messages"])) for b in blind_bodies
    )
    assert counts[judge_first] == Counter({"A": questions * 2})
    # item 0's prose is kept raw as unreadable, never a verdict: 3 pairs x 2 orders x 2 reps
    assert counts[judge_blind]["unreadable"] == 12
    with sqlite3.connect(store) as conn:
        raws = {
            r
            for (r,) in conn.execute("SELECT raw FROM pairwiseverdict WHERE verdict = 'unreadable'")
        }
    assert raws == {PROSE}

    shown_out = fairjudge(config, "judgments", "position", "--json", "--bootstrap", "200")
    assert shown_out.returncode == 0, shown_out.stderr
    figures = {j["judge"]: j for j in json.loads(shown_out.stdout)["judges"]}
    blind, first = figures[judge_blind], figures[judge_first]
    expect_blind = join_orders(blind_bodies, blind_rule)
    expect_first = join_orders(first_bodies, first_rule)
    # blind: 16 questions x 2 reps = 32 pairs, item 0's 3 pairs x 2 reps unreadable
    assert expect_blind == Counter({"consistent": 26, "unreadable": 6})
    assert (blind["consistent"], blind["primacy_preferring"], blind["recency_preferring"]) == (
        expect_blind["consistent"], 0, 0,
    )  # fmt: skip
    assert blind["unreadable_pairs"] == expect_blind["unreadable"]
    assert blind["position_consistency"] == 1.0 and not blind["flagged"]
    assert blind["repetition_stability"] == 1.0  # a deterministic rule repeats itself
    assert expect_first == Counter({"primacy": 16})
    assert first["primacy_preferring"] == 16 and first["position_consistency"] == 0.0
    assert first["flagged"]
    # good vs mid, by hand from QUALITY (item 0 unreadable): item 1 win, 2 tie, 3 loss, 4 win,
    # 5 loss, in each of the 2 repetitions
    (row,) = [
        r for r in blind["win_rates"]
        if {r["model"].split()[0], r["other"].split()[0]} == {"good", "mid"}
    ]  # fmt: skip
    wins, losses = (row["wins"], row["losses"]) if row["model"].startswith("good") else (
        row["losses"], row["wins"],
    )  # fmt: skip
    assert (wins, row["ties"], losses, row["unreadable"]) == (4, 2, 4, 2)
    # three models: Bradley-Terry strengths for each of them
    assert blind["bradley_terry"] is not None and len(blind["bradley_terry"]) == 3

    # the API serves the same figures for the judge, unchanged (its label has a "/")
    with StubServer() as stub:
        api = make_api(db_url, stub, tmp_path)
        try:
            reply = api.get(f"/api/v1/pairwise/position?judge={quote(judge_first)}&n_bootstrap=200")
            assert reply.status_code == 200, reply.json
            (j,) = reply.json["judges"]
            assert (j["pairs"], j["primacy_preferring"], j["flagged"]) == (16, 16, True)
        finally:
            api.close()


def test_failed_calls_are_not_verdicts_and_a_rerun_retries_exactly_them(
    tmp_path: Path, db_url: str, engine: Engine
) -> None:
    store = Path(str(engine.url.database))
    good, mid, _ = (str(r) for r in _runs(engine))
    failing = {"on": True}

    def flaky(messages: list[dict[str, str]]) -> str | int:
        # item 1's calls fail with HTTP 500 (the config allows 1 retry) while "on"
        if failing["on"] and shown(messages)[0][0] == 1:
            return 500
        return blind_rule(messages)

    with StubServer(responder=flaky) as stub:
        config = write_config(tmp_path / "f.toml", stub.base_url, db_url)
        done = fairjudge(config, "judge-pairs", good, mid)
        # exit 3 (incomplete): item 1's two orders failed for good and were not stored
        assert done.returncode == 3, done.stderr
        assert "2 call(s) failed for good and were not stored" in done.stderr
        with sqlite3.connect(store) as conn:
            (n,) = conn.execute("SELECT count(*) FROM pairwiseverdict").fetchone()
        assert n == 6 * 2 - 2
        sent = len(stub.state.bodies)
        failing["on"] = False
        # while another holder has the run's lease, the command is refused before any call
        with run_lease(engine, "pairwise", 1):
            busy = fairjudge(config, "judge-pairs", good, mid)
        assert busy.returncode == 1 and "pairwise run 1 is being run by process" in busy.stderr
        assert len(stub.state.bodies) == sent
        again = fairjudge(config, "judge-pairs", good, mid, "--json")
        assert again.returncode == 0, again.stderr
        new = stub.state.bodies[sent:]
        # only item 1's two orders were asked again, each once
        assert sorted(shown(b["messages"])[0][0] for b in new) == [1, 1]
    with sqlite3.connect(store) as conn:
        (n,) = conn.execute("SELECT count(*) FROM pairwiseverdict").fetchone()
    assert n == 12


def test_bad_input_is_one_line_before_any_call(tmp_path: Path, db_url: str, engine: Engine) -> None:
    good, _, _ = (str(r) for r in _runs(engine))
    with StubServer(responder=blind_rule) as stub:
        config = write_config(tmp_path / "f.toml", stub.base_url, db_url)
        one = fairjudge(config, "judge-pairs", good)
        assert one.returncode == 1 and "two generation runs or more" in one.stderr
        twice = fairjudge(config, "judge-pairs", good, good)
        assert twice.returncode == 1 and "each once" in twice.stderr
        nope = fairjudge(config, "judge-pairs", good, "999")
        assert nope.returncode == 1 and "no generation run 999" in nope.stderr
        # --endpoint names the judge (the request's override of [judge] endpoint)
        other = fairjudge(config, "judge-pairs", good, "2", "--endpoint", "nope")
        assert other.returncode == 1 and "--endpoint nope: " in other.stderr, other.stderr
        crit = fairjudge(config, "judge-pairs", good, "2", "--criterion", "vibes")
        assert crit.returncode == 1
        assert "no pairwise criterion 'vibes'; known: fairness, overall" in crit.stderr
        assert stub.state.bodies == []


def test_max_cost_holds_calls_back(tmp_path: Path, db_url: str, engine: Engine) -> None:
    good, mid, _ = (str(r) for r in _runs(engine))
    with StubServer(responder=blind_rule) as stub:
        config = write_config(tmp_path / "f.toml", stub.base_url, db_url)
        # no prices: refused before any call, the line says what to set
        priceless = fairjudge(config, "judge-pairs", good, mid, "--max-cost", "1")
        assert priceless.returncode == 1 and "input_price_per_mtok" in priceless.stderr
        text = config.read_text().replace(
            "max_backoff_s = 0.1\n",
            "max_backoff_s = 0.1\ninput_price_per_mtok = 1.0\noutput_price_per_mtok = 2.0\n",
        )
        config.write_text(text)
        # a bound of 0: any call could pass it, so none goes out; exit 3, nothing stored
        held = fairjudge(config, "judge-pairs", good, mid, "--max-cost", "0")
        assert held.returncode == 3 and "--max-cost 0 reached" in held.stderr
        assert stub.state.bodies == []
        # the bound is kept with the pair's run: the same command without --max-cost holds too
        kept = fairjudge(config, "judge-pairs", good, mid)
        assert kept.returncode == 3 and "--max-cost 0 reached (the bound is kept" in kept.stderr
        assert stub.state.bodies == []
        done = fairjudge(config, "judge-pairs", good, mid, "--json", "--max-cost", "1")
        assert done.returncode == 0, done.stderr
        (p,) = json.loads(done.stdout)["passes"]
        assert p["model_calls"] == 12 == len(stub.state.bodies)
        # the stub reports 10 prompt and 5 completion tokens a call (tests/support/stub_openai):
        # 12 calls at 1 and 2 per million tokens: (120 * 1 + 60 * 2) / 1e6
        assert p["cost"]["prompt_tokens"] == 120 and p["cost"]["completion_tokens"] == 60
        assert abs(p["cost"]["cost"] - 240 / 1e6) < 1e-15
        # a bound below what the run's stored verdicts cost (240e-6, above) stops before any
        # call: what was spent counts against it, as judge's kept bound does; the line says
        # so (spent 0.000240 in all; a bound counting only this command would say 0.000000)
        low = fairjudge(config, "judge-pairs", good, mid, "--repeats", "2", "--max-cost", "0.0002")
        assert low.returncode == 3 and "spent 0.000240 in all" in low.stderr, low.stderr
        assert len(stub.state.bodies) == 12
        # a second repetition asks only it: 6 questions x 2 orders, each with seed 1 (rep 2)
        more = fairjudge(config, "judge-pairs", good, mid, "--repeats", "2", "--max-cost", "1")
        assert more.returncode == 0, more.stderr
        new = stub.state.bodies[12:]
        assert len(new) == 12 and {b.get("seed") for b in new} == {1}
