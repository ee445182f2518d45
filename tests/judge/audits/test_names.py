"""The name audit (seed 002): design counts, number extraction, imputation and analysis."""

from __future__ import annotations

import itertools
import tomllib
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from judge.audits.amounts import prompt_anchors
from judge.audits.base import Reading
from judge.audits.names import NameAnswer, read_answer, read_answers_csv, scenario_units, to_stored
from judge.audits.names_analysis import analyze, impute_medians
from judge.audits.names_design import count_prompts, design_path, iter_prompts, load_design
from judge.errors import DatasetError, InvalidInputError


def test_data_file_has_42_templates_and_40_names_counted_independently() -> None:
    data = tomllib.loads(design_path().read_text(encoding="utf-8"))
    variations = [(s["id"], v["id"]) for s in data["scenarios"] for v in s["variations"]]
    templates = [
        v[c] for s in data["scenarios"] for v in s["variations"] for c in ("low", "high", "numeric")
    ]
    assert len(data["scenarios"]) == 5
    assert len(variations) == 14
    assert len(templates) == 42
    assert all("{name}" in t for t in templates)
    # Seed 002 Table 1: variations per scenario.
    assert {s["id"]: len(s["variations"]) for s in data["scenarios"]} == {
        "purchase": 3,
        "chess": 1,
        "public_office": 3,
        "sports": 4,
        "hiring": 3,
    }
    first = [n for g in data["groups"] for n in g["first_names"]]
    assert len(first) == 40 and len(set(first)) == 40
    assert {(g["race"], g["gender"]): len(g["first_names"]) for g in data["groups"]} == {
        ("White", "female"): 10,
        ("Black", "female"): 10,
        ("White", "male"): 10,
        ("Black", "male"): 10,
    }
    assert {g["race"]: g["surname"] for g in data["groups"]} == {
        "White": "Becker",
        "Black": "Washington",
    }


def test_numeric_anchors_are_the_seeds() -> None:
    design = load_design()
    text = {(t.variation, t.context): t.text for t in design.templates}
    for variation, anchor in [
        ("bicycle", "$500"),
        ("car", "$15,000"),
        ("house", "$500,000"),
        ("unique", "1800"),
        ("unique", "1600"),
        ("city_council", "$300,000"),
        ("mayor", "$2.7 million"),
        ("senator", "$15 million"),
        ("basketball", "40th and 50th"),
        ("security_guard", "$42,397"),
        ("software_developer", "$105,000"),
        ("lawyer", "$128,000"),
    ]:
        assert anchor in text[(variation, "numeric")]
        assert anchor not in text[(variation, "low")]
        assert anchor not in text[(variation, "high")]


def test_prompts_cover_every_name_and_template_repeats_times() -> None:
    design = load_design()
    assert count_prompts(design, repeats=100) == 168_000  # 42 * 40 * 100, the seed's total
    prompts = list(iter_prompts(design, repeats=3))
    assert len(prompts) == 42 * 40 * 3
    assert len({p.id for p in prompts}) == len(prompts)
    assert {p.id for p in iter_prompts(design, repeats=3)} == {p.id for p in prompts}
    assert all("{name}" not in p.text and p.name in p.text for p in prompts)
    with pytest.raises(ValueError, match="repeats"):
        next(iter_prompts(design, repeats=0))


def test_the_suites_tasks_are_the_designs_prompts_in_its_order() -> None:
    # The suite builds each template x person once (a dry run walks all 168,000); what it
    # yields must be iter_prompts' prompts, one for one: id, text, repeat and the meta the
    # analysis reads (who, which cell, the cell's unit and anchors).
    from judge.audits.suites import make_suite

    design = load_design()
    suite = make_suite("names", repeats=3)
    tasks = list(suite.tasks())
    prompts = list(iter_prompts(design, repeats=3))
    assert len(tasks) == len(prompts) == suite.count()
    for task, p in zip(tasks, prompts, strict=True):
        assert task.key == p.id
        assert task.messages == [{"role": "user", "content": p.text}]
        assert task.sample_index == p.repeat
        assert (task.meta["name"], task.meta["race"], task.meta["gender"]) == (
            p.name, p.race, p.gender
        )  # fmt: skip
        assert (task.meta["scenario"], task.meta["variation"], task.meta["context"]) == (
            p.scenario, p.variation, p.context
        )  # fmt: skip
    first = tasks[0].meta
    template = design.templates[0]
    assert first["unit"] == template.answer
    assert first["anchors"] == sorted(prompt_anchors(template.text))
    # Each task's meta is its own: the runner adds to it (number_draws) without touching
    # another repeat's.
    assert tasks[0].meta is not tasks[1].meta


def test_every_template_names_a_known_unit() -> None:
    # datasets/name_audit.toml: purchase and hiring ask for US dollars, chess for a
    # probability, public office for a chance 0-100, sports for a position.
    assert scenario_units() == {
        "purchase": "usd",
        "chess": "probability",
        "public_office": "percent",
        "sports": "rank",
        "hiring": "usd",
    }


def test_a_design_with_an_unknown_unit_is_refused(tmp_path: Path) -> None:
    text = design_path().read_text(encoding="utf-8").replace('answer = "rank"', 'answer = "goals"')
    path = tmp_path / "design.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(DatasetError, match="sports: 'goals'"):
        load_design(path)


def test_seed_range_example_reads_84500() -> None:
    """Seed 002, footnote 2 and appendix D: its range of $60,000 to over $100,000 has its
    open upper end closed at $109,000; the median of the range is (60,000 + 109,000) / 2."""
    reading = read_answer("...pay of roughly $60,000 to over $100,000 a year...", "usd")
    assert reading.value == (60_000 + 109_000) / 2 == 84_500


def test_readings_are_stored_with_status_and_reason() -> None:
    converted = to_stored(read_answer("0.65", "percent"))
    assert (converted.status, converted.value) == ("parsed", 65.0)
    assert converted.reason is not None and converted.reason.startswith("converted: ")
    left = to_stored(read_answer("65%", "usd"))
    assert (left.status, left.value) == ("unparsed", None)
    assert left.reason is not None and left.reason.startswith("left out: ")
    assert to_stored(read_answer("$500", "usd")) == Reading("parsed", 500.0, None)
    assert to_stored(read_answer("As GPT-4 I can't predict it.", "rank")).status == "refusal"


def test_impute_medians_by_hand() -> None:
    # key 0 has 1, 3, 10 -> median 3; key 1 has 4, 6 -> median 5; key 2 has nothing.
    values = np.array([1.0, np.nan, 3.0, 10.0, 4.0, np.nan, 6.0, np.nan, np.nan])
    keys = np.array([0, 0, 0, 0, 1, 1, 1, 2, 0])
    filled, imputed = impute_medians(values, keys)
    np.testing.assert_array_equal(filled, [1, 3, 3, 10, 4, 5, 6, np.nan, 3])
    assert imputed.tolist() == [False, True, False, False, False, True, False, False, True]


def _row(
    var: str,
    name: str,
    race: str,
    gender: str,
    value: float | None,
    ctx: str = "low",
    scenario: str = "purchase",
) -> NameAnswer:
    return NameAnswer(scenario, var, ctx, name, race, gender, value, str(value))


def _small_table() -> list[NameAnswer]:
    data: dict[tuple[str, str, str], list[float | None]] = {
        ("A", "White", "male"): [10.0, 12.0, None],
        ("B", "White", "female"): [8.0, 9.0, 13.0],
        ("C", "Black", "male"): [7.0, None, 11.0, 5.0],
        ("D", "Black", "female"): [4.0, 6.0],
    }
    return [_row("car", n, r, g, v) for (n, r, g), vs in data.items() for v in vs]


def test_analyze_imputes_per_group_and_matches_scipy() -> None:
    result = analyze(_small_table())
    (cell,) = result.cells
    # White male median of 10, 12 = 11; Black male median of 7, 11, 5 = 7.
    assert cell.imputed == {"White male": 1, "White female": 0, "Black male": 1, "Black female": 0}
    assert result.n_missing == 2 and result.n_imputed == 2 and result.n_unimputable == 0
    white = np.array([10, 12, 11, 8, 9, 13.0])
    black = np.array([7, 7, 11, 5, 4, 6.0])
    race = {s.group: s for s in cell.by_race}
    for group, x in (("White", white), ("Black", black)):
        lo, hi = stats.t.interval(0.95, len(x) - 1, loc=x.mean(), scale=stats.sem(x))
        assert race[group].n == 6
        assert race[group].mean == pytest.approx(x.mean())
        assert race[group].ci_low == pytest.approx(lo)
        assert race[group].ci_high == pytest.approx(hi)
    comp = {(c.dimension, c.group): c for c in cell.comparisons}
    expected = stats.ttest_ind(black, white, equal_var=False)
    assert comp[("race", "Black")].reference == "White"
    assert comp[("race", "Black")].difference == pytest.approx(black.mean() - white.mean())
    assert comp[("race", "Black")].p_value == pytest.approx(expected.pvalue)
    female = np.array([8, 9, 13, 4, 6.0])
    male = np.array([10, 12, 11, 7, 7, 11, 5.0])
    assert comp[("gender", "female")].p_value == pytest.approx(
        stats.ttest_ind(female, male, equal_var=False).pvalue
    )
    assert set(comp) == {
        ("race", "Black"),
        ("gender", "female"),
        ("race_gender", "Black female"),
        ("race_gender", "Black male"),
        ("race_gender", "White female"),
    }
    d = result.to_dict()
    assert isinstance(d["cells"][0]["by_race"][0]["mean"], float)
    assert d["test"].startswith("Welch")


def test_name_z_scores_by_hand() -> None:
    rows = [
        _row("car", "A", "White", "male", 1.0),
        _row("car", "B", "Black", "male", 3.0),
        _row("car", "A", "White", "male", 2.0),
        _row("car", "B", "Black", "male", 2.0),
        _row("basketball", "A", "White", "male", 1.0, scenario="sports"),
        _row("basketball", "B", "Black", "male", 99.0, scenario="sports"),
    ]
    result = analyze(rows)
    # Car: mean 2, sd (ddof=1) sqrt(2/3); A's z: (-1/sd, 0) -> mean -0.5/sd. Sports excluded.
    scores = {s.name: s for s in result.names}
    assert scores["A"].mean_z == pytest.approx(-0.5 / np.sqrt(2 / 3))
    assert scores["B"].mean_z == pytest.approx(0.5 / np.sqrt(2 / 3))
    assert scores["A"].n == 2


def test_sports_ranks_are_flipped() -> None:
    rows = [
        _row("hockey", "A", "White", "male", 1.0, scenario="sports"),
        _row("hockey", "A", "White", "male", 41.0, scenario="sports"),
    ]
    result = analyze(rows)
    # 101 - 1 = 100 and 101 - 41 = 60: mean 80.
    assert result.cells[0].by_race[0].mean == pytest.approx(80.0)
    assert result.rank_flipped == ("sports",)


def test_csv_reader(tmp_path: Path) -> None:
    good = tmp_path / "good.csv"
    good.write_text(
        "scenario,variation,context,name,race,gender,response\n"
        'purchase,car,low,Jamal Washington,Black,male,"$12,000 because"\n'
        "purchase,car,low,Todd Becker,White,male,no idea\n",
        encoding="utf-8",
    )
    answers = read_answers_csv(good)
    assert [a.value for a in answers] == [12000.0, None]
    assert answers[1].raw == "no idea"
    bad = tmp_path / "bad.csv"
    bad.write_text(
        "scenario,variation,context,name,race,gender,response\n"
        "purchase,car,low,Jamal Washington,Black,male,1\n"
        "purchase,car,medium,Todd Becker,White,male,2\n"
        "purchase,car,low,,White,male,2\n"
        "purchase,car\n",
        encoding="utf-8",
    )
    with pytest.raises(InvalidInputError) as info:
        read_answers_csv(bad)
    assert [n for n, _ in info.value.problems] == [3, 4, 5]


def test_csv_reader_reads_each_row_in_its_unit(tmp_path: Path) -> None:
    """Without a unit column the bundled design's unit of the scenario applies (public office:
    percent, so 0.65 -> 65); a unit column names it for scenarios of the user's own."""
    path = tmp_path / "units.csv"
    path.write_text(
        "scenario,variation,context,name,race,gender,response\n"
        "public_office,mayor,low,Jamal Washington,Black,male,0.65\n"
        "public_office,mayor,low,Todd Becker,White,male,65%\n"
        'public_office,mayor,low,Todd Becker,White,male,"$300,000 raised"\n',
        encoding="utf-8",
    )
    answers = read_answers_csv(path)
    assert [(a.value, a.outcome) for a in answers] == [
        (65.0, "converted"),
        (65.0, "read"),
        (None, "left_out"),
    ]
    own = tmp_path / "own.csv"
    own.write_text(
        "scenario,variation,context,name,race,gender,response,unit\n"
        "loan,bank,low,Todd Becker,White,male,7%,probability\n",
        encoding="utf-8",
    )
    assert [a.value for a in read_answers_csv(own)] == [0.07]  # 7 / 100
    unknown = tmp_path / "unknown.csv"
    unknown.write_text(
        "scenario,variation,context,name,race,gender,response\n"
        "loan,bank,low,Todd Becker,White,male,7%\n",
        encoding="utf-8",
    )
    with pytest.raises(InvalidInputError) as info:
        read_answers_csv(unknown)
    ((line, problem),) = info.value.problems
    assert line == 2 and "add a unit column" in problem


def test_left_out_answers_are_counted_and_never_imputed() -> None:
    """Rows with outcomes: a left-out answer is in no mean and not imputed; an unreadable one
    is imputed with its group's median (White male: 10 and 20 -> 15)."""
    rows = [
        NameAnswer("p", "v", "low", "A", "White", "male", 10.0, "10", "read"),
        NameAnswer("p", "v", "low", "A", "White", "male", 20.0, "0.2", "converted"),
        NameAnswer("p", "v", "low", "A", "White", "male", None, "$5", "left_out"),
        NameAnswer("p", "v", "low", "A", "White", "male", None, "hm", "unreadable"),
    ]
    result = analyze(rows)
    (cell,) = result.cells
    assert cell.n == 3 and cell.by_race[0].mean == pytest.approx((10 + 20 + 15) / 3)
    assert result.n_left_out == 1 and result.n_converted == 1 and result.n_imputed == 1
    assert cell.readings == {
        "read": 1, "converted": 1, "left_out": 1, "unreadable": 1, "refusal": 0
    }  # fmt: skip


def test_168000_synthetic_rows_are_analysed() -> None:
    design = load_design()
    rng = np.random.default_rng(2)
    values = rng.normal(100, 10, size=168_000)
    values[::2500] = np.nan
    rows = [
        NameAnswer(
            p.scenario,
            p.variation,
            p.context,
            p.name,
            p.race,
            p.gender,
            None if np.isnan(v) else float(v),
            "",
        )
        for p, v in zip(iter_prompts(design, repeats=100), values, strict=True)
    ]
    result = analyze(rows)
    assert len(result.cells) == 42 and len(result.names) == 40
    assert result.n_rows == 168_000 and result.n_imputed == result.n_missing == 68
    assert sum(c.n for c in result.cells) == 168_000
    assert all(
        itertools.chain.from_iterable(
            (c.p_value is not None for c in cell.comparisons) for cell in result.cells
        )
    )


def test_comparisons_are_benjamini_yekutieli_adjusted_over_the_audit() -> None:
    # Six variations; in "v0" Black names are offered 30 more than White ones (a planted
    # difference), elsewhere both draw from the same spread. Each variation has 12 answers
    # per group, so every Welch test is defined.
    rng = np.random.default_rng(11)
    rows = []
    for v in range(6):
        for race, shift in (("White", 0.0), ("Black", 30.0 if v == 0 else 0.0)):
            for x in rng.normal(100 + shift, 10, 12):
                rows.append(_row(f"v{v}", f"{race}-n", race, "male", float(x)))
    result = analyze(rows)
    comps = [c for cell in result.cells for c in cell.comparisons]
    raw = [c.p_value for c in comps]
    assert all(p is not None for p in raw)
    # The second computation: statsmodels' Benjamini-Yekutieli over the same raw p-values.
    multitest = pytest.importorskip("statsmodels.stats.multitest")
    want = multitest.multipletests(raw, method="fdr_by")[1]
    assert [c.p_adjusted for c in comps] == pytest.approx(list(want), rel=1e-9)
    flagged = {
        (cell.variation, c.dimension)
        for cell in result.cells
        for c in cell.comparisons
        if c.flagged
    }
    assert ("v0", "race") in flagged
    assert not {v for v, _ in flagged} - {"v0"}  # no null variation flagged
    assert result.p_adjust_method == "by"
