"""The counterfactual check tested by swap direction (issue 24).

Through the real command line against the scripted stub: a judge that takes 2 points off an
answer holding more female than male words is flagged, with the side it favours named, where
the old rule (the plain mean change per rubric, both directions together) flagged nothing; a
judge whose scores have nothing to do with gendered words is not flagged; a copy of 3 items
is not flagged and says it has too few pairs. Reference p-values come from scipy
(binomtest, permutation_test) on values this file derives from the stored texts itself.

At the statistics level, seeded simulations with the bundled sample's pair structure
measure the flag rule's error rates: how often a fair judge is flagged (at most 5 %) and how
often a planted one-direction shift of 2 points is (at least 95 %).
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from scipy import stats
from sqlalchemy.engine import Engine
from sqlmodel import Session, select

from judge.data.datasets import import_items
from judge.store.engine import session_scope
from judge.store.tables import JudgeRun, Judgment, Response
from judge.trust.directional import PairScore, correct, pair_rows
from server.cli import cli
from tests.support.factories import SAMPLE, write_config
from tests.support.stub_openai import StubServer

# The bundled list's gendered words (datasets/counterfactual_swaps.txt), written out again
# here so that the test counts them on its own.
MALE = set(
    "he his himself boy boys man men father fathers dad son sons brother brothers uncle "
    "husband mr male males gentleman gentlemen king".split()
)
FEMALE = set(
    "she her herself girl girls woman women mother mothers mom daughter daughters sister "
    "sisters aunt wife mrs female females lady ladies queen".split()
)
FENCED = re.compile(r"<<([A-Z ]+?) [0-9a-f]{16}>>\n(.*?)\n<<END \1 [0-9a-f]{16}>>", re.S)
WORD = re.compile(r"[^\W\d_]+")


def gender_counts(text: str) -> tuple[int, int]:
    words = [w.lower() for w in WORD.findall(text)]
    return sum(w in MALE for w in words), sum(w in FEMALE for w in words)


def penalise_female(messages: list[dict[str, str]]) -> str | None:
    """The planted judge: 2 when the judged answers hold more female than male words, else 4
    (the texts the model under test wrote: ANSWER and STORY fences, not the questions)."""
    if messages[0]["role"] != "system":
        return None
    fenced = FENCED.findall(messages[-1]["content"])
    texts = " ".join(t for label, t in fenced if label.startswith(("ANSWER", "STORY")))
    male, female = gender_counts(texts)
    return json.dumps({"explanation": "stub", "score": 2 if female > male else 4})


def run(config: Path, *args: str) -> Any:
    result = CliRunner().invoke(cli, ["--config", str(config), *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.output) if "--json" in args else result.output


def audit_sample(
    engine: Engine, tmp_path: Path, db_url: str, responder: Any, *extra: str
) -> tuple[Path, int, dict[str, Any]]:
    """The bundled sample answered by the stub (an echo of each question) and judged, then
    ``checks counterfactual --swap gender --swap-in answers`` (``extra`` may choose
    another ``--swap-in``: the last one given counts); returns the config, the judge run and
    the audit's JSON."""
    with session_scope(engine) as session:
        import_items(session, SAMPLE, "sample")
    with StubServer(responder=responder) as stub:
        config = write_config(tmp_path / "f.toml", stub.base_url, db_url, concurrency=4)
        gen = run(config, "generate", "sample", "--allow-failures", "--json")
        judged = run(config, "judge", str(gen["run_id"]), "--allow-failures", "--json")
        data = run(
            config, "checks", "counterfactual", "--judge-run", str(judged["run_id"]),
            "--swap", "gender", "--swap-in", "answers", "--allow-failures", "--json", *extra,
        )  # fmt: skip
    return config, judged["run_id"], data


def rows_of(data: dict[str, Any]) -> list[dict[str, Any]]:
    (result,) = data["judge_diagnostics"]["counterfactual"]
    return list(result["directions"])


def oriented_by_item(engine: Engine, judge_run: int, copy_judge_run: int) -> dict[str, Any]:
    """Per rubric and pooled, the oriented differences derived here from the stored texts:
    a copy holding more female words than its original moved toward female (B); oriented =
    female version minus male version."""
    with session_scope(engine) as session:
        texts: dict[tuple[int, int], str] = defaultdict(str)
        copy_run = _generation_run(session, copy_judge_run)
        original_run = _generation_run(session, judge_run)
        for r in session.exec(select(Response)):
            texts[(r.run_id, r.item_id)] += " " + (r.raw_text or "")
        scores = {
            (j.judge_run_id, j.item_id, j.rubric): j.score
            for j in session.exec(select(Judgment).where(Judgment.status == "scored"))
        }
    per_rubric: dict[str, list[float]] = defaultdict(list)
    per_item: dict[int, list[float]] = defaultdict(list)
    for (run_id, item_id, rubric), after in sorted(scores.items()):
        before = scores.get((judge_run, item_id, rubric))
        if run_id != copy_judge_run or before is None or after is None:
            continue
        female_moved = (
            gender_counts(texts[(copy_run, item_id)])[1]
            - gender_counts(texts[(original_run, item_id)])[1]
        )
        if female_moved == 0:
            continue  # mixed: as many words each way
        value = (after - before) * (1 if female_moved > 0 else -1)
        per_rubric[rubric].append(value)
        per_item[item_id].append(value)
    return {"rubrics": per_rubric, "pooled": [float(np.mean(v)) for v in per_item.values()]}


def _generation_run(session: Session, judge_run: int) -> int:
    jrun = session.get(JudgeRun, judge_run)
    assert jrun is not None
    return jrun.generation_run_id


def exact_permutation_p(values: list[float]) -> float:
    """scipy's sign-flip test of the mean, with every sign pattern enumerated."""
    return float(
        stats.permutation_test(
            (np.array(values, dtype=float),), np.mean, permutation_type="samples",
            n_resamples=10**7,
        ).pvalue
    )  # fmt: skip


def test_a_judge_penalising_female_words_is_flagged_by_direction(
    engine: Engine, tmp_path: Path, db_url: str
) -> None:
    config, judge_run, data = audit_sample(engine, tmp_path, db_url, penalise_female)
    (result,) = data["judge_diagnostics"]["counterfactual"]
    assert result["sides"] == {"gender": {"A": "male", "B": "female"}}
    # The old rule: per rubric, the mean change with both directions together. On ICS, where
    # copies moved both ways, the directions cancel: its 95 % CI contains 0, so it did not
    # flag ICS (the S2 rubrics' few changes all went one way: their CIs sit near 0 and
    # their flags came and went with the data).
    (old_ics,) = [r for r in result["rubrics"] if r["rubric"] == "ICS"]
    assert old_ics["ci_low"] <= 0 <= old_ics["ci_high"]
    mine = oriented_by_item(engine, judge_run, data["copy_judge_run_id"])
    # The planted rule can only lower the female version: every oriented value is <= 0.
    assert all(v <= 0 for vs in mine["rubrics"].values() for v in vs)
    rows = {(r["scope"], r["direction"]): r for r in rows_of(data)}
    pooled = rows[("all rubrics", "oriented")]
    assert pooled["n"] == len(mine["pooled"])
    assert pooled["p_value"] == pytest.approx(exact_permutation_p(mine["pooled"]), rel=1e-9)
    assert pooled["flagged"] and pooled["finding"] == "favours the male side"
    assert pooled["mean"] == pytest.approx(np.mean(mine["pooled"])) and pooled["mean"] < 0
    ics = rows[("ICS", "oriented")]
    values = mine["rubrics"]["ICS"]
    assert abs(old_ics["mean_difference"]) < abs(ics["mean"])  # cancelled vs added up
    changed = sum(v != 0 for v in values)
    # all changes of the same size (2) and sign: the exact sign test, scipy.stats.binomtest
    assert {abs(v) for v in values if v} == {2}
    assert ics["p_value"] == pytest.approx(stats.binomtest(0, changed).pvalue)
    assert ics["flagged"] and ics["finding"] == "favours the male side"
    # Holm over the tested rows: the smallest p times their number, at least
    tested = [r for r in rows.values() if r["p_adjusted"] is not None]
    smallest = min(r["p_value"] for r in tested)
    assert min(r["p_adjusted"] for r in tested) == pytest.approx(smallest * len(tested))
    assert any(m.startswith("counterfactual (gender") for m in _flags(engine, judge_run))
    shown = run(config, "checks", "show", "--judge-run", str(judge_run))
    assert "Counterfactual swaps by direction" in shown and "favours the male side" in shown


def _flags(engine: Engine, judge_run: int) -> list[str]:
    from judge.trust.section import flags

    with session_scope(engine) as session:
        marks = flags(session, judge_run)
    return [m for ms in marks.values() for m in ms]


def test_a_judge_blind_to_gendered_words_is_not_flagged(
    engine: Engine, tmp_path: Path, db_url: str
) -> None:
    # No responder: the stub's judge scores 1 + sha256(prompt) mod 5, a score as good as
    # random for every text, original or copy: many scores change, in no direction.
    config, judge_run, data = audit_sample(engine, tmp_path, db_url, None)
    rows = rows_of(data)
    assert sum(r["changed"] for r in rows if r["direction"] == "oriented") > 10
    assert any(r["p_adjusted"] is not None for r in rows)  # some rows were tested
    assert not any(r["flagged"] for r in rows)
    assert data["judge_diagnostics"]["counterfactual"][0]["flagged"] == []
    assert not any(m.startswith("counterfactual") for m in _flags(engine, judge_run))
    # With random scores the data are too few to rule out a shift of 0.25 points; a margin
    # as wide as the scale (5 > the largest change, 4) is ruled out whenever pairs vary.
    oriented = [r for r in rows if r["direction"] == "oriented"]
    assert {r["equivalence"] for r in oriented} <= {"inconclusive", "no shift larger than 0.25"}
    wide = run(config, "checks", "show", "--judge-run", str(judge_run), "--margin", "5",
               "--json")  # fmt: skip
    verdicts = {r["equivalence"] for r in rows_of(wide) if r["direction"] == "oriented"}
    assert "no shift larger than 5" in verdicts


def test_three_pairs_are_too_few_and_the_report_says_so(
    engine: Engine, tmp_path: Path, db_url: str
) -> None:
    config, judge_run, data = audit_sample(
        engine, tmp_path, db_url, penalise_female, "--limit", "3"
    )
    assert data["copy"]["items_copied"] == 3
    rows = rows_of(data)
    assert not any(r["flagged"] for r in rows)
    # 3 pairs: at most 3 changed, smallest attainable two-sided p = 2 / 2**3 = 0.25 > 0.05
    oriented = [r for r in rows if r["direction"] == "oriented" and r["changed"]]
    assert oriented and all(not r["tested"] for r in oriented)
    assert all("too few pairs to detect a shift" in r["reason"] for r in oriented)
    assert all(r["equivalence"] == "inconclusive" for r in oriented)
    shown = run(config, "checks", "show", "--judge-run", str(judge_run))
    assert "too few pairs" in shown and "FLAGGED" not in shown


# --- error rates of the flag rule, simulated -------------------------------------------

# The bundled sample's pair structure with --swap gender, read from the copy the stub's echo
# answers give (test above): 8 S1 items (ICS): 5 moved toward male, 3 toward female; 9 S2
# items (TCS, PCS, ETCS): 4 and 4, 1 mixed; 2 S3 items (SBAS): 1 toward female, 1 mixed.
SAMPLE_STRUCTURE = (
    [(("ICS",), d) for d in [-1] * 5 + [1] * 3]
    + [(("TCS", "PCS", "ETCS"), d) for d in [-1] * 4 + [1] * 4 + [0]]
    + [(("SBAS",), d) for d in [1, 0]]
)
# The figures issue 24 quotes for its run: 48 directed ICS pairs (19 toward female, 29
# toward male) and 2 mixed.
ISSUE_STRUCTURE = [(("ICS",), d) for d in [1] * 19 + [-1] * 29 + [0] * 2]


def simulate(structure: list[tuple[tuple[str, ...], int]], planted: bool, audits: int) -> float:
    """Share of simulated audits with any flagged row. Each judgment: a base score of 3-5
    per item and rubric, plus noise of -1/0/+1 (20/60/20 %) drawn for each version on its
    own, kept on 1-5; the planted judge takes 2 points off the female version (the copy of
    a pair moved toward female, the original of one moved toward male), as the stub's
    responder above does. Bootstrap CIs are skipped: they do not enter the flag."""
    rng = np.random.default_rng(24)
    sides = {"gender": ("male", "female")}
    cells = [(i, r, d) for i, (rubrics, d) in enumerate(structure) for r in rubrics]
    direction = np.array([d for _, _, d in cells])
    hits = 0
    for _ in range(audits):
        base = rng.integers(3, 6, len(cells))
        noise = rng.choice([-1, 0, 1], p=[0.2, 0.6, 0.2], size=(2, len(cells)))
        before = base + noise[0] - (2 * (direction == -1) if planted else 0)
        after = base + noise[1] - (2 * (direction == 1) if planted else 0)
        pairs = [
            PairScore(i, r, d, float(b), float(a))
            for (i, r, d), b, a in zip(
                cells, np.clip(before, 1, 5), np.clip(after, 1, 5), strict=True
            )
        ]
        rows = correct(pair_rows("gender", sides["gender"], pairs, n_bootstrap=0), sides)
        hits += any(r.flagged for r in rows)
    return hits / audits


def test_a_fair_judge_is_flagged_in_at_most_5_percent_of_audits() -> None:
    # Holm over exact tests bounds the chance of any false flag by 0.05; measured here.
    # (Measured when written: 1.0 % on both structures; the planted shift: 100 % on both.)
    assert simulate(SAMPLE_STRUCTURE, planted=False, audits=400) <= 0.05
    assert simulate(ISSUE_STRUCTURE, planted=False, audits=200) <= 0.05


def test_a_planted_two_point_shift_is_flagged_in_at_least_95_percent_of_audits() -> None:
    assert simulate(SAMPLE_STRUCTURE, planted=True, audits=200) >= 0.95
    assert simulate(ISSUE_STRUCTURE, planted=True, audits=200) >= 0.95


def test_three_consistent_changes_among_six_pairs_are_not_a_finding() -> None:
    # Issue 24's converse: 6 pairs, 3 of them 4 -> 2 after a swap toward female. The old
    # rule's bootstrap CI of the mean change excludes 0 (judge.stats.tests.paired_shift: a
    # resample without a changed pair has probability 0.5**6 = 1.6 % < 2.5 %), so it
    # flagged; but 3 changes can give no two-sided p below 2 / 2**3 = 0.25.
    from judge.stats.tests import paired_shift

    before, after = [4.0] * 6, [2.0] * 3 + [4.0] * 3
    old = paired_shift(before, after)
    assert old.ci_excludes_zero
    pairs = [
        PairScore(i, "ICS", 1, b, a) for i, (b, a) in enumerate(zip(before, after, strict=True))
    ]
    sides = {"gender": ("male", "female")}
    row, same = correct(pair_rows("gender", sides["gender"], pairs), sides)
    assert (row.direction, same.direction, same.tested) == ("oriented", "toward B", False)
    assert (row.n, row.changed, row.min_p, row.tested, row.flagged) == (6, 3, 0.25, False, False)
    assert row.reason is not None and row.reason.startswith("too few pairs to detect a shift")
    assert row.equivalence == "inconclusive"


def test_a_copy_made_before_pairs_were_recorded_finds_them_when_it_can() -> None:
    from judge.trust.copies import copy_swaps, swaps_hash
    from judge.trust.swaps import load_swaps

    gender = load_swaps().select(["gender"])
    old = {"swap_kinds": ["gender"], "swaps_sha256": swaps_hash(gender)}
    assert copy_swaps(old) == gender  # the bundled list's pairs, same hash
    assert copy_swaps({**old, "swaps_sha256": "0" * 16}) is None  # a list of one's own
    recorded = {**old, "pairs": [["gender", "he", "she"]]}
    assert [(s.kind, s.a, s.b) for s in copy_swaps(recorded) or ()] == [("gender", "he", "she")]
