"""Position (order) bias through the real CLI (`fairjudge judge --swap-order`) against the
scripted stub with planted judges, whose rule for each order is chosen here, so what the
check must report is known by hand before anything runs:

* ``order_blind``: the score depends on the pair's texts only, never on which comes first;
* ``last_wins``: 5 when side B is shown last (as given), 2 when it is shown first (swapped);
* ``flipper``: the score changes with the order in every pair, upward for some pairs and
  downward for others (chosen by a content hash that the swap leaves unchanged), so the
  mean change cancels and only position consistency can see it.

The sample dataset has 18 S2 items (TCS, PCS, ETCS) and 18 S3 items (SBAS): 18 pairs per
pair rubric."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from server.cli import cli
from tests.support.factories import SAMPLE, write_config
from tests.support.stub_openai import StubServer

GRADE = '{{"explanation": "stub", "score": {}}}'
# The fenced texts of a judge prompt ("<<LABEL CODE>>", code = hash of the text: judge.prompts).
FENCE = re.compile(r"^<<((?:STORY|QUESTION|ANSWER) [AB]) ([0-9a-f]{16})>>", re.M)
TASK = re.compile(r"^Task: rate .*? \((\w+)\)", re.M)  # as in test_order.py
PAIRS = 18
# Similarity rubrics (how alike the two stories are): position consistency only, no
# primacy, recency or preference fairness (issue 42); SBAS rates answer B against A.
SIMILAR = {"TCS", "PCS", "ETCS"}
Responder = Callable[[list[dict[str, str]]], Any]


def _pair(messages: list[dict[str, str]]) -> tuple[str, int] | None:
    """For a pair prompt: which side is shown first ("A" as given, "B" swapped) and a number
    fixed by the pair's texts (the smallest fence code), the same in both orders."""
    found = FENCE.findall(messages[-1]["content"])
    if not found:
        return None
    return found[0][0][-1], min(int(code, 16) for _, code in found)


def _judge_only(rule: Callable[[str, int], int]) -> Responder:
    def respond(messages: list[dict[str, str]]) -> str | None:
        if messages[0]["role"] != "system":
            return None  # generation: the stub's echo
        pair = _pair(messages)
        return GRADE.format(3 if pair is None else rule(*pair))  # ICS: no pair, always 3

    return respond


order_blind = _judge_only(lambda first, key: 1 + key % 5)
last_wins = _judge_only(lambda first, key: 5 if first == "A" else 2)


def _up(key: int) -> bool:
    return key % 2 == 0


flipper = _judge_only(lambda first, key: (4 if first == "A" else 2) if _up(key) else
                      (2 if first == "A" else 4))  # fmt: skip


def run(config: Path, *args: str) -> Result:
    result = CliRunner().invoke(cli, ["--config", str(config), *args])
    assert result.exit_code == 0, (result.output, result.exception)
    return result


def judged(tmp_path: Path, db_url: str, responder: Responder, *judge_args: str) -> Any:
    """Import the sample, answer it and judge it in both orders; the order part of the run's
    diagnostics (`checks show`, as in the report) and the stub's judge prompts."""
    with StubServer(responder=responder) as stub:
        config = write_config(tmp_path / "c.toml", stub.base_url, db_url)
        run(config, "dataset", "import", str(SAMPLE), "--name", "sample")
        gen = json.loads(run(config, "generate", "sample", "--json").output)["run_id"]
        out = run(config, "judge", str(gen), "--swap-order", *judge_args, "--json").output
        judge_run = json.loads(out)["run_id"]
        shown = run(config, "checks", "show", "--judge-run", str(judge_run), "--json")
        report = json.loads(shown.output)
        prompts = [b["messages"] for b in stub.state.bodies if b["messages"][0]["role"] == "system"]
    return report["judge_diagnostics"]["order"], prompts


def by_rubric(order: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["rubric"]: r for r in order["rubrics"]}


def test_an_order_blind_judge_is_not_flagged(tmp_path: Path, db_url: str) -> None:
    order, _ = judged(tmp_path, db_url, order_blind)
    rows = by_rubric(order)
    assert sorted(rows) == ["ETCS", "PCS", "SBAS", "TCS"]
    for r in rows.values():
        # the same score in both orders for every pair, by the planted rule
        similar = r["rubric"] in SIMILAR
        primacy, fairness = (None, None) if similar else (0, 0.0)
        assert (r["pairs"], r["consistent"], r["primacy_preferring"]) == (PAIRS, PAIRS, primacy)
        assert r["position_consistency"] == 1.0 and r["preference_fairness"] == fairness
        assert r["preference_fairness_shown"] is not similar
        assert r["position_consistency_ci"] == [1.0, 1.0]
        assert not r["flagged"] and r["flag_reasons"] == []
    assert order["flagged"] == []


@pytest.mark.parametrize("samples", [[], ["--samples", "2", "--aggregation", "majority"]])
def test_a_judge_that_favours_the_last_position_is_flagged(
    tmp_path: Path, db_url: str, samples: list[str]
) -> None:
    order, _ = judged(tmp_path, db_url, last_wins, *samples)
    for r in by_rubric(order).values():
        # every pair: 5 with B last (given), 2 with B first -> all 18 recency-preferring,
        # PC = 0/18 = 0, PF = (18 - 0) / 18 = +1, mean change swapped - given = -3
        assert r["position_consistency"] == 0.0 and r["mean_difference"] == -3.0
        if r["rubric"] in SIMILAR:  # a similarity score favours no side: no recency label
            assert (r["consistent"], r["inconsistent"], r["primacy_preferring"]) == (0, 18, None)
            assert r["preference_fairness"] is None and r["preference_fairness_ci"] == [None, None]
            assert "similarity score" in r["preference_fairness_note"]
            assert r["flag_reasons"] == ["inconsistent"]
        else:
            assert (r["consistent"], r["primacy_preferring"], r["recency_preferring"]) == (
                0, 0, 18,
            )  # fmt: skip
            assert r["preference_fairness"] == 1.0
            assert r["flag_reasons"] == ["inconsistent", "recency"]
        # with 2 samples both repeats of an order agree (the rule ignores the repeat)
        assert r["repetition_stability"] == (1.0 if samples else None)
    assert order["flagged"] == ["ETCS", "PCS", "SBAS", "TCS"]
    assert order["samples_per_order"] == (2 if samples else 1)


def test_a_judge_that_flips_without_direction_is_flagged_as_inconsistent(
    tmp_path: Path, db_url: str
) -> None:
    order, prompts = judged(tmp_path, db_url, flipper)
    # Expected counts from the planted rule applied to the prompts the stub received: per
    # rubric, the as-given prompts whose pair goes up (4 as given, 2 swapped: recency).
    expected: dict[str, int] = {}
    for messages in prompts:
        pair = _pair(messages)
        rubric = TASK.search(messages[-1]["content"])
        if pair is not None and pair[0] == "A" and rubric is not None:
            expected[rubric.group(1)] = expected.get(rubric.group(1), 0) + _up(pair[1])
    rows = by_rubric(order)
    assert sorted(expected) == sorted(rows)
    for name, r in rows.items():
        up = expected[name]
        assert r["position_consistency"] == 0.0 and r["inconsistent"] == PAIRS
        if name in SIMILAR:
            assert r["recency_preferring"] is None and r["preference_fairness"] is None
        else:
            assert (r["consistent"], r["recency_preferring"], r["primacy_preferring"]) == (
                0, up, PAIRS - up,
            )  # fmt: skip
            assert r["preference_fairness"] == pytest.approx((up - (PAIRS - up)) / PAIRS)
        # each pair moves by 2 one way or the other: mean (2 (18 - up) - 2 up) / 18
        assert r["mean_difference"] == pytest.approx(2 * (PAIRS - 2 * up) / PAIRS)
        assert "inconsistent" in r["flag_reasons"] and r["flagged"]
