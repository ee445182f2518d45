"""Planted pairwise judges through ``fairjudge judgments import --format csv`` and ``judgments
position --json``: an order-blind judge (its verdict names the same model in both orders) is
not flagged, and one that picks the first-shown answer 40 % of the time is flagged "primacy".

Four models of planted quality judged on 30 questions, every pair in both orders, two
repetitions. The expected figures are counted here from the planted verdicts; the win-rate
intervals are Wilson's formula written out here; the Bradley-Terry strengths are a direct
maximum-likelihood fit here (``scipy.optimize.minimize``), ties half a win each.
"""

from __future__ import annotations

import csv
import itertools
import json
import math
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.optimize import minimize

from tests.server.cli.test_judgments_bad_input import work_config
from tests.support.cli import fairjudge

MODELS = ["m1", "m2", "m3", "m4"]
QUALITY = {"m1": 1.0, "m2": 0.3, "m3": -0.2, "m4": -1.1}
QUESTIONS = [f"q{k}" for k in range(30)]
Z = 1.959963984540054  # the normal's 97.5 % point


def plant(rng: np.random.Generator) -> list[dict[str, Any]]:
    rows = []
    for q, (a, b), rep in itertools.product(QUESTIONS, itertools.combinations(MODELS, 2), (1, 2)):
        p = 1 / (1 + math.exp(QUALITY[b] - QUALITY[a]))
        u = rng.random()
        truth = "tie" if abs(u - p) < 0.1 else (a if u < p else b)
        for first, second in ((a, b), (b, a)):
            letter = {first: "A", second: "B", "tie": "tie"}[truth]
            rows.append(dict(judge="blind", question=q, model_a=first, model_b=second,
                             verdict=letter, repetition=rep))  # fmt: skip
            biased = "A" if rng.random() < 0.4 else letter
            rows.append(dict(judge="first", question=q, model_a=first, model_b=second,
                             verdict=biased, repetition=rep))  # fmt: skip
    return rows


def counted(rows: list[dict[str, Any]], judge: str) -> dict[str, Any]:
    """The authors' table on each (question, pair, repetition), and each pair's outcome."""
    verdict = {
        (r["question"], r["model_a"], r["model_b"], r["repetition"]): r["verdict"]
        for r in rows
        if r["judge"] == judge
    }
    table: Counter[str] = Counter()
    outcome: list[tuple[str, str, str]] = []
    for (q, a, b, rep), v in verdict.items():
        if a > b:
            continue
        w = verdict[(q, b, a, rep)]
        pair = {"A": "A", "B": "B", "tie": "C"}[v] + {"A": "A", "B": "B", "tie": "C"}[w]
        kind = "consistent" if pair in ("AB", "BA", "CC") else (
            "primacy" if pair in ("AA", "AC", "CA") else "recency"
        )  # fmt: skip
        table[kind] += 1
        winner = {"A": a, "B": b, "tie": "tie"}[v] if kind == "consistent" else "tie"
        outcome.append((a, b, winner))
    return {"table": table, "outcome": outcome}


def wilson(k: int, n: int) -> tuple[float, float]:
    p = k / n
    centre = (p + Z**2 / (2 * n)) / (1 + Z**2 / n)
    half = Z / (1 + Z**2 / n) * math.sqrt(p * (1 - p) / n + Z**2 / (4 * n**2))
    return centre - half, centre + half


def direct_strengths(outcome: list[tuple[str, str, str]]) -> dict[str, float]:
    index = {m: k for k, m in enumerate(MODELS)}
    wins = np.zeros((4, 4))
    for a, b, w in outcome:
        i, j = index[a], index[b]
        s = 1.0 if w == a else 0.0 if w == b else 0.5
        wins[i, j] += s
        wins[j, i] += 1 - s

    def nll(free: np.ndarray) -> float:
        t = np.concatenate([[0.0], free])
        return float(np.sum(wins * np.logaddexp(0.0, -(t[:, None] - t[None, :]))))

    t = np.concatenate([[0.0], minimize(nll, np.zeros(3), method="BFGS", tol=1e-12).x])
    return dict(zip(MODELS, t - t.mean(), strict=True))


def test_planted_first_position_judge_is_flagged_and_order_blind_is_not(tmp_path: Path) -> None:
    rows = plant(np.random.default_rng(3))
    path = tmp_path / "planted.csv"
    with path.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    config = work_config(tmp_path)
    done = fairjudge("--config", config, "judgments", "import", path, "--format", "csv")
    assert done.returncode == 0, done.stderr
    shown = fairjudge("--config", config, "judgments", "position", "--json", "--bootstrap", "300")
    assert shown.returncode == 0, shown.stderr
    result = json.loads(shown.stdout)
    by_judge = {j["judge"]: j for j in result["judges"]}
    assert result["flagged"] == ["first"]

    blind, first = by_judge["blind"], by_judge["first"]
    pairs = len(QUESTIONS) * 6 * 2  # 30 questions x 6 model pairs x 2 repetitions
    assert blind["pairs"] == first["pairs"] == pairs
    # order-blind: every pair consistent by construction
    assert (blind["position_consistency"], blind["preference_fairness"]) == (1.0, 0.0)
    assert blind["flagged"] is False and blind["repetition_stability"] is not None
    biased = counted(rows, "first")["table"]
    assert first["position_consistency"] == pytest.approx(biased["consistent"] / pairs)
    assert first["preference_fairness"] == pytest.approx(
        (biased["recency"] - biased["primacy"]) / pairs
    )
    assert "primacy" in first["flag_reasons"] and first["preference_fairness"] < -0.2

    outcome = counted(rows, "blind")["outcome"]
    for rates in blind["win_rates"]:
        mine = [w for a, b, w in outcome if (a, b) == (rates["model"], rates["other"])]
        n, wins = len(mine), mine.count(rates["model"])
        assert (rates["pairs"], rates["wins"], rates["ties"]) == (n, wins, mine.count("tie"))
        assert rates["wins_rate_ci"] == pytest.approx(list(wilson(wins, n)), abs=1e-9)
    strengths = {s["model"]: s["strength"] for s in blind["bradley_terry"]}
    assert strengths == pytest.approx(direct_strengths(outcome), abs=1e-5)
    for s in blind["bradley_terry"]:
        assert s["ci"][0] <= s["strength"] <= s["ci"][1]
