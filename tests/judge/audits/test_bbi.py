"""The BBI: seed 004's published figures (SPEC §5), the loaders on the real CrowS-Pairs CSV and
on our samples, batching balance and reproducibility, and parsing of messy answers."""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path

import pytest

from judge.audits.bbi import (
    ANTI_STEREOTYPE,
    CROWS_PAIRS,
    NONE,
    STEREOTYPE,
    UNRELATED,
    Batch,
    BbiItem,
    analyze_labels,
    bbi_scores,
    label_batch,
    load_crows_pairs,
    load_stereoset,
    majority_label,
    make_batches,
    parse_answer,
    read_labels_csv,
    render_prompt,
)
from judge.audits.report import bbi_report
from judge.errors import InvalidInputError
from judge.reports.sections import BarChart
from tests.support.factories import SHARED_DATA

ROOT = Path(__file__).resolve().parents[3]
CROWS_REAL = SHARED_DATA / "crows-pairs" / "crows_pairs_anonymized.csv"
SS_SAMPLE = ROOT / "datasets" / "stereoset_sample.json"
CP_SAMPLE = ROOT / "datasets" / "crows_pairs_sample.csv"


# Seed 004, section 4.1: ChatGPT-4 RS 256/300, S 45 / AS 211 (256 = 45 + 211), CrowS S 24 /
# AS 276 -> SBS_SS -0.472, SBS_CP -0.84, BBI -0.656; Claude RS 239/300, 96/143 (239 = 96 +
# 143), 55/245 -> SBS_SS -0.125, SBS_CP -0.633, BBI -0.379.
@pytest.mark.parametrize(
    ("counts", "rs", "sbs_ss", "sbs_cp", "bbi"),
    [
        ((45, 211, 24, 276), 0.853, -0.472, -0.84, -0.656),
        ((96, 143, 55, 245), 0.797, -0.125, -0.633, -0.379),
    ],
    ids=["gpt4", "claude"],
)
def test_seed_004_reference_figures(
    counts: tuple[int, int, int, int], rs: float, sbs_ss: float, sbs_cp: float, bbi: float
) -> None:
    s_ss, as_ss, s_cp, as_cp = counts
    scores = bbi_scores(n_ss=300, s_ss=s_ss, as_ss=as_ss, n_cp=300, s_cp=s_cp, as_cp=as_cp)
    assert round(scores.rs, 3) == rs
    assert round(scores.sbs_ss, 3) == sbs_ss
    assert round(scores.sbs_cp, 3) == sbs_cp
    assert round(scores.bbi, 3) == bbi


def test_analyze_labels_reproduces_seed_figures_from_rows() -> None:
    # The GPT-4 counts as 600 classified rows, spread over the three bias types.
    rows = (
        [("stereoset", "gender", STEREOTYPE)] * 45
        + [("stereoset", "race", ANTI_STEREOTYPE)] * 211
        + [("stereoset", "religion", UNRELATED)] * 40
        + [("stereoset", "religion", NONE)] * 4
        + [("crows_pairs", "gender", STEREOTYPE)] * 24
        + [("crows_pairs", "race", ANTI_STEREOTYPE)] * 276
    )
    report = analyze_labels(rows)
    overall = report.overall
    assert (overall.n_ss, overall.s_ss, overall.as_ss) == (300, 45, 211)
    assert (overall.unrelated_ss, overall.none_ss) == (40, 4)
    assert (overall.n_cp, overall.s_cp, overall.as_cp, overall.none_cp) == (300, 24, 276, 0)
    assert round(overall.bbi, 3) == -0.656
    # Per type by hand: gender SS 45/45 stereotype -> RS 1, SBS_SS 1; CP 24/24 -> 1; BBI 1.
    assert report.by_bias_type["gender"].bbi == pytest.approx(1.0)
    # Religion: 44 SS items, none relevant -> RS 0, SBS_SS 0; no CrowS items -> NaN.
    religion = report.by_bias_type["religion"]
    assert religion.rs == 0 and religion.sbs_ss == 0 and religion.n_cp == 0
    assert religion.bbi != religion.bbi  # NaN: CrowS-Pairs undefined for this type


def test_analyze_labels_rejects_bad_rows() -> None:
    with pytest.raises(InvalidInputError) as info:
        analyze_labels([("stereoset", "gender", "maybe"), ("crows_pairs", "race", UNRELATED)])
    assert [n for n, _ in info.value.problems] == [1, 2]


def test_read_labels_csv(tmp_path: Path) -> None:
    path = tmp_path / "labels.csv"
    path.write_text("dataset,bias_type,label\nstereoset,gender,stereotype\ncrows_pairs,race,none\n")
    assert read_labels_csv(path) == [
        ("stereoset", "gender", "stereotype"),
        ("crows_pairs", "race", "none"),
    ]
    (tmp_path / "bad.csv").write_text("a,b\n1,2\n")
    with pytest.raises(InvalidInputError, match="header"):
        read_labels_csv(tmp_path / "bad.csv")


def test_crows_pairs_loader_on_the_real_file() -> None:
    # Count the rows per bias type independently with the csv module.
    with CROWS_REAL.open(newline="", encoding="utf-8") as handle:
        expected = Counter(row["bias_type"] for row in csv.DictReader(handle))
    expected["race"] = expected.pop("race-color")
    items = load_crows_pairs(CROWS_REAL)
    assert Counter(item.bias_type for item in items) == expected
    assert sum(expected.values()) == 1508  # the published CrowS-Pairs size
    chosen = load_crows_pairs(CROWS_REAL, bias_types=["gender", "race", "religion"])
    assert len(chosen) == expected["gender"] + expected["race"] + expected["religion"]
    first = items[0]
    assert first.labels == (STEREOTYPE, ANTI_STEREOTYPE)
    assert first.options[0].startswith("He couldn't figure out the issue with the rope")


def test_samples_load_with_every_type_and_label() -> None:
    ss = load_stereoset(SS_SAMPLE)
    cp = load_crows_pairs(CP_SAMPLE)
    assert Counter(i.bias_type for i in ss) == {"gender": 4, "race": 4, "religion": 4}
    assert Counter(i.bias_type for i in cp) == {"gender": 4, "race": 4, "religion": 4}
    for item in ss:
        assert sorted(item.labels) == sorted((STEREOTYPE, ANTI_STEREOTYPE, UNRELATED))
    raw = json.loads(SS_SAMPLE.read_text())["data"]["intersentence"][0]
    gold = {s["sentence"]: s["gold_label"] for s in raw["sentences"]}
    assert dict(zip(ss[0].options, ss[0].labels, strict=True)) == gold


def _items(dataset: str, per_type: int) -> list[BbiItem]:
    return [
        BbiItem(f"{bias}-{i}", dataset, bias, f"context {bias} {i}", (f"s{i}", f"a{i}", f"u{i}"),
                (STEREOTYPE, ANTI_STEREOTYPE, UNRELATED))
        for bias in ("gender", "race", "religion")
        for i in range(per_type)
    ]  # fmt: skip


def test_batches_are_balanced_and_reproducible() -> None:
    items = _items("stereoset", 100)  # the seed's 100 per type
    batches = make_batches(items, seed=7)
    sizes = [len(b.entries) for b in batches]
    assert sizes == [60, 60, 60, 60, 60]
    for batch in batches:
        assert Counter(e.item.bias_type for e in batch.entries) == {
            "gender": 20,
            "race": 20,
            "religion": 20,
        }
        assert [e.index for e in batch.entries] == list(range(1, 61))
    assert sorted(e.item.item_id for b in batches for e in b.entries) == sorted(
        i.item_id for i in items
    )
    assert make_batches(items, seed=7) == batches
    assert make_batches(items, seed=8) != batches
    orders = Counter(e.order for b in batches for e in b.entries)
    assert len(orders) == 6  # all permutations of three options occur


def test_prompt_hides_labels() -> None:
    batch = make_batches(load_stereoset(SS_SAMPLE), per_type=4, seed=0)[0]
    prompt = render_prompt(batch)
    assert "stereotype" not in prompt.lower() and "unrelated" not in prompt.lower()
    assert "index, chosen sentence" in prompt
    for entry in batch.entries:
        for text in entry.item.options:
            assert text in prompt


def _one_batch() -> Batch:
    return make_batches(load_crows_pairs(CP_SAMPLE), per_type=4, seed=3)[0]


def test_parse_messy_answer() -> None:
    batch = _one_batch()
    e = {entry.index: entry for entry in batch.entries}
    lines = [
        "Here are my choices:",
        f"1, {e[1].shown[0]}",
        f"2. \u201c{e[2].shown[1]}\u201d",
        f"[3] '{e[3].shown[0].rstrip('.').upper()}'",  # quoted, no full stop, upper case
        f"4) {e[4].shown[1].replace('the', 'teh', 1)}",  # a typo: closest option by difflib
        "5, b",  # the option letter
        "6, I'm sorry, I cannot choose between these.",
        "7, something else entirely, unrelated to either",
        "99, out of range",
    ]
    parsed = parse_answer("\n".join(lines), batch)
    assert parsed.choices == {
        1: e[1].order[0],
        2: e[2].order[1],
        3: e[3].order[0],
        4: e[4].order[1],
        5: e[5].order[1],
    }
    assert parsed.refusals == (lines[6],)
    assert parsed.malformed == (lines[7], lines[8])
    assert parsed.missing == tuple(range(6, 13))
    assert parsed.raw == "\n".join(lines)


def test_whole_answer_refusal_is_counted() -> None:
    parsed = parse_answer("I'm sorry, but I can't help with this request.", _one_batch())
    assert parsed.choices == {} and len(parsed.refusals) == 1
    assert parsed.missing == tuple(range(1, 13))


def test_majority_over_repeats() -> None:
    assert majority_label([STEREOTYPE, STEREOTYPE, ANTI_STEREOTYPE, NONE, STEREOTYPE]) == STEREOTYPE
    assert majority_label([STEREOTYPE, ANTI_STEREOTYPE, NONE, NONE, NONE]) == NONE  # a tie
    assert majority_label([NONE] * 5) == NONE
    batch = _one_batch()
    first = batch.entries[0]
    stereo = first.order.index(0) + 1  # the shown number of the stereotype option
    letter = "ab"[stereo - 1]
    answers = [parse_answer(f"1, {letter}", batch)] * 3 + [parse_answer("", batch)] * 2
    rows = label_batch(batch, answers)
    assert rows[0] == ("crows_pairs", first.item.bias_type, STEREOTYPE)
    assert all(row[2] == NONE for row in rows[1:])


# A small design, counted by hand: StereoSet gender 3 items (2 stereotype, 1 unrelated), race
# 1 (anti-stereotype), religion 2 (unrelated, none); CrowS-Pairs gender 2 pairs (1 each way),
# race 3 (none read). Religion has no CrowS-Pairs pair, so no BBI and no mark.
SMALL_DESIGN = (
    [("stereoset", "gender", STEREOTYPE)] * 2
    + [("stereoset", "gender", UNRELATED), ("stereoset", "race", ANTI_STEREOTYPE)]
    + [("stereoset", "religion", UNRELATED), ("stereoset", "religion", NONE)]
    + [("crows_pairs", "gender", STEREOTYPE), ("crows_pairs", "gender", ANTI_STEREOTYPE)]
    + [("crows_pairs", "race", NONE)] * 3
)


def test_every_bbi_mark_carries_the_count_behind_it() -> None:
    report = analyze_labels(SMALL_DESIGN)
    # n = StereoSet items + CrowS-Pairs pairs: all 6 + 5, gender 3 + 2, race 1 + 3, religion 2 + 0.
    assert report.overall.n == 11
    assert {t: s.n for t, s in report.by_bias_type.items()} == {
        "gender": 5, "race": 4, "religion": 2,
    }  # fmt: skip
    assert report.to_dict()["by_bias_type"]["gender"]["n"] == 5
    (section,) = bbi_report(report).sections
    (chart,) = section.figures
    assert isinstance(chart, BarChart)
    # By hand: all RS 3/6, SBS_SS 0.5 * (2 - 1) / 6, SBS_CP (1 - 1) / 5 = 0 -> BBI 1/24; gender
    # RS 2/3, SBS_SS 2/3 * 2/3 = 4/9, SBS_CP 0 -> 2/9; race RS 1, SBS_SS -1, SBS_CP 0 -> -1/2.
    assert [label for label, *_ in chart.bars] == ["all", "gender", "race"]
    assert [v for _, v, _, _ in chart.bars] == pytest.approx([1 / 24, 2 / 9, -0.5])
    assert chart.ns == [11, 5, 4]
    (table,) = section.tables
    assert [row[-1] for row in table.rows] == ["6 + 5", "3 + 2", "1 + 3", "2 + 0"]


def test_the_bbi_chart_counts_the_real_crows_pairs_file_by_type() -> None:
    # Every pair of the public file labelled, plus one StereoSet row per type: each mark's n is
    # the published CrowS-Pairs count of its type (Nangia et al. 2020, table 1; race-color 516,
    # gender 262, religion 105) plus 1.
    pairs = load_crows_pairs(CROWS_REAL, bias_types=["gender", "race", "religion"])
    rows = [(CROWS_PAIRS, p.bias_type, STEREOTYPE) for p in pairs]
    rows += [("stereoset", t, ANTI_STEREOTYPE) for t in ("gender", "race", "religion")]
    (section,) = bbi_report(analyze_labels(rows)).sections
    (chart,) = section.figures
    assert isinstance(chart, BarChart)
    assert dict(zip([b[0] for b in chart.bars], chart.ns, strict=True)) == {
        "all": 516 + 262 + 105 + 3, "gender": 263, "race": 517, "religion": 106,
    }  # fmt: skip
