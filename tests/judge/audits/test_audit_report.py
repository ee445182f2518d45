"""The name audit's report: a bar chart of race x gender means with 95 % CIs per cell, the
table of Welch comparisons, and the HTML page that draws them.

Expected figures are computed here from the hand-made answers with numpy and scipy (the mean,
and the t-interval from ``scipy.stats.t.interval``; Welch's test from
``scipy.stats.ttest_ind(equal_var=False)``), never read back from the code under test.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from judge.audits.names_analysis import CellResult, GroupSummary, NameAuditResult, analyze
from judge.audits.report import names_report
from judge.reports.render import write_report
from judge.reports.sections import BarChart, Section

# Answers per (cell, race, gender): two cells, four race x gender groups, different spreads.
VALUES: dict[tuple[str, str, str], dict[tuple[str, str], list[float]]] = {
    ("purchase", "bicycle", "low"): {
        ("White", "male"): [200.0, 240.0, 260.0, 300.0],
        ("White", "female"): [180.0, 220.0, 250.0],
        ("Black", "male"): [100.0, 150.0, 170.0, 130.0, 120.0],
        ("Black", "female"): [90.0, 160.0, 110.0],
    },
    ("hiring", "engineer", "high"): {
        ("White", "male"): [90_000.0, 95_000.0, 100_000.0],
        ("White", "female"): [85_000.0, 99_000.0, 91_000.0, 88_000.0],
        ("Black", "male"): [80_000.0, 97_000.0, 86_000.0],
        ("Black", "female"): [70_000.0, 92_000.0, 81_000.0, 79_000.0],
    },
}
SURNAME = {"White": "Becker", "Black": "Washington"}
TITLE = "{}/{}/{}: mean by race and gender (95 % CI)"


def _rows() -> list[tuple[str, str, str, str, str, str, float | None, str]]:
    rows = []
    for (sc, var, ctx), groups in VALUES.items():
        for (race, gender), values in groups.items():
            # Two names per group, so the per-name chart has something to show too.
            for i, v in enumerate(values):
                name = f"{gender[0].upper()}{i % 2} {SURNAME[race]}"
                rows.append((sc, var, ctx, name, race, gender, v, str(v)))
    return rows


def _section(report_sections: list[Section]) -> Section:
    (section,) = report_sections
    return section


def _charts(section: Section) -> dict[str, BarChart]:
    return {f.title: f for f in section.figures if isinstance(f, BarChart)}


def test_one_chart_per_cell_with_numpy_means_and_scipy_t_intervals() -> None:
    """Expected: for each group, ``np.mean`` of its answers and
    ``scipy.stats.t.interval(0.95, n - 1, loc=mean, scale=sd / sqrt(n))`` with the sample
    sd (ddof=1), all from VALUES above; no interval for a group of fewer than 5."""
    section = _section(names_report(analyze(_rows())).sections)
    charts = _charts(section)
    assert "Per-name standardised mean (z, sports left out)" in charts  # kept
    for (sc, var, ctx), groups in VALUES.items():
        chart = charts[TITLE.format(sc, var, ctx)]
        bars = {label: (value, lo, hi) for label, value, lo, hi in chart.bars}
        assert set(bars) == {f"{race} {gender}" for race, gender in groups}
        # Both cells are about money (the bundled design's purchase and hiring): the axis
        # says so, and n beside every mark is the group's count of answers.
        assert chart.ylabel == "mean (US dollars)"
        sizes = {f"{race} {gender}": len(v) for (race, gender), v in groups.items()}
        assert chart.ns == [sizes[label] for label, *_ in chart.bars]
        for (race, gender), values in groups.items():
            x = np.asarray(values)
            value, got_lo, got_hi = bars[f"{race} {gender}"]
            assert value == pytest.approx(x.mean(), rel=1e-12)
            if x.size < 5:
                # Below the 5 answers the one interval rule asks (judge.stats.intervals).
                assert (got_lo, got_hi) == (None, None)
                continue
            sem = x.std(ddof=1) / math.sqrt(x.size)
            lo, hi = stats.t.interval(0.95, x.size - 1, loc=x.mean(), scale=sem)
            assert got_lo == pytest.approx(lo, rel=1e-12)
            assert got_hi == pytest.approx(hi, rel=1e-12)
    # The two cell charts and the per-name chart; nothing else.
    assert len(charts) == 3


def test_comparisons_table_matches_scipy_welch() -> None:
    """Expected: the difference of ``np.mean``s and the p-value of
    ``scipy.stats.ttest_ind(x, y, equal_var=False)``, x the group's answers and y White male's
    (race x gender rows) from VALUES above."""
    section = _section(names_report(analyze(_rows())).sections)
    (table,) = [
        t
        for t in section.tables
        if t.title == "Differences against the reference groups (Welch's t-test)"
    ]
    assert table.columns[:4] == ["cell", "group", "reference", "difference"]
    by_key = {(row[0], row[1]): row for row in table.rows}
    for (sc, var, ctx), groups in VALUES.items():
        y = np.asarray(groups[("White", "male")])
        for race, gender in [("Black", "male"), ("Black", "female"), ("White", "female")]:
            x = np.asarray(groups[(race, gender)])
            row = by_key[(f"{sc}/{var}/{ctx}", f"{race} {gender}")]
            assert row[2] == "White male"
            assert float(row[3]) == pytest.approx(x.mean() - y.mean(), abs=0.051)  # 1 decimal
            p = stats.ttest_ind(x, y, equal_var=False).pvalue
            assert float(row[table.columns.index("p")]) == pytest.approx(p, abs=5e-5)  # 4 decimals
    # Every comparison also goes to the CSV, unrounded.
    diff_csv = section.csv["names_comparisons.csv"]
    black_male = [
        r for r in diff_csv if r["cell"] == "purchase/bicycle/low" and r["group"] == "Black male"
    ]
    x = np.asarray(VALUES[("purchase", "bicycle", "low")][("Black", "male")])
    y = np.asarray(VALUES[("purchase", "bicycle", "low")][("White", "male")])
    assert black_male[0]["p_value"] == pytest.approx(
        stats.ttest_ind(x, y, equal_var=False).pvalue, rel=1e-12
    )


def test_nan_means_and_bounds_stay_out_of_the_bars() -> None:
    """Hand-built cell (no analysis): the expected bars are read off the GroupSummary values
    written below: a NaN or missing mean drops the group, a NaN bound becomes None."""
    nan = float("nan")
    cell = CellResult(
        scenario="chess",
        variation="rating",
        context="numeric",
        n=5,
        imputed={},
        unimputable=0,
        by_race=(),
        by_gender=(),
        by_race_gender=(
            GroupSummary("Black female", 0, None, None, None, None),
            GroupSummary("Black male", 1, 1500.0, None, None, None),
            GroupSummary("White female", 2, nan, nan, nan, nan),
            GroupSummary("White male", 2, 1600.0, 10.0, nan, 1700.0),
        ),
        comparisons=(),
    )
    result = NameAuditResult((cell,), (), 5, 0, 0, 0, (), 0)
    charts = _charts(_section(names_report(result).sections))
    chart = charts[TITLE.format("chess", "rating", "numeric")]
    assert chart.bars == [("Black male", 1500.0, None, None), ("White male", 1600.0, None, 1700.0)]


def test_falls_back_to_race_and_gender_groups() -> None:
    """Hand-built cell without race x gender groups: the expected bars are its race groups
    then its gender groups, with the values written below."""
    cell = CellResult(
        scenario="chess",
        variation="rating",
        context="low",
        n=4,
        imputed={},
        unimputable=0,
        by_race=(GroupSummary("Black", 2, 10.0, 1.0, 1.0, 19.0),),
        by_gender=(GroupSummary("male", 2, 12.0, 1.0, 3.0, 21.0),),
        by_race_gender=(),
        comparisons=(),
    )
    result = NameAuditResult((cell,), (), 4, 0, 0, 0, (), 0)
    chart = _charts(_section(names_report(result).sections))[TITLE.format("chess", "rating", "low")]
    assert chart.bars == [("Black", 10.0, 1.0, 19.0), ("male", 12.0, 3.0, 21.0)]


def test_write_report_puts_every_cell_chart_in_the_html(tmp_path: Path) -> None:
    """Expected: the cell titles built from VALUES' keys, and one PNG per chart (two cells plus
    the per-name chart); the CSV rows come from VALUES' groups (2 races + 2 genders + 4
    race x gender per cell)."""
    paths = write_report(names_report(analyze(_rows())), tmp_path)
    page = paths["html"].read_text(encoding="utf-8")
    for sc, var, ctx in VALUES:
        assert TITLE.format(sc, var, ctx) in page
    assert "Differences against the reference groups (Welch&#39;s t-test)" in page
    assert page.count("data:image/png;base64,") == 3
    with (tmp_path / "names.csv").open(newline="", encoding="utf-8") as handle:
        assert len(list(csv.DictReader(handle))) == 2 * (2 + 2 + 4)
    assert (tmp_path / "names_comparisons.csv").exists()


def test_many_cells_chart_only_those_with_a_welch_p_below_005() -> None:
    """61 cells (over the 60 drawn in full). Expected charted cells: those where
    ``scipy.stats.ttest_ind(equal_var=False)`` of some group against its reference (computed
    here) gives p < 0.05; by construction only cells 0, 7 and 30, where Black answers are
    shifted by +50, are. Every cell stays in the table of means."""
    base = [10.0, 12.0, 11.0, 13.0, 9.0]
    shifted_cells = {0, 7, 30}
    rows = []
    answers: dict[int, dict[tuple[str, str], list[float]]] = {}
    for c in range(61):
        answers[c] = {}
        for race in ("White", "Black"):
            for gender in ("male", "female"):
                shift = 50.0 if c in shifted_cells and race == "Black" else 0.0
                values = [v + shift for v in base]
                answers[c][(race, gender)] = values
                for i, v in enumerate(values):
                    name = f"{gender[0].upper()}{i % 2} {SURNAME[race]}"
                    rows.append(("purchase", f"v{c:02d}", "low", name, race, gender, v, str(v)))

    def any_significant(groups: dict[tuple[str, str], list[float]]) -> bool:
        pooled = {
            "race": {r: sum((groups[(r, g)] for g in ("male", "female")), []) for r in SURNAME},
            "gender": {g: sum((groups[(r, g)] for r in SURNAME), []) for g in ("male", "female")},
        }
        tests = [(pooled["race"]["Black"], pooled["race"]["White"])]
        tests.append((pooled["gender"]["female"], pooled["gender"]["male"]))
        tests += [(groups[k], groups[("White", "male")]) for k in groups if k != ("White", "male")]
        ps = [stats.ttest_ind(x, y, equal_var=False).pvalue for x, y in tests]
        return any(p < 0.05 for p in ps if not math.isnan(p))

    expected = {
        TITLE.format("purchase", f"v{c:02d}", "low")
        for c, groups in answers.items()
        if any_significant(groups)
    }
    assert len(expected) == len(shifted_cells)  # the construction does what it says
    section = _section(names_report(analyze(rows)).sections)
    cell_titles = {t for t in _charts(section) if t.endswith("(95 % CI)")}
    assert cell_titles == expected
    assert any("p < 0.05" in note and "61" in note for note in section.notes)
    means = section.tables[0]
    assert len({row[0] for row in means.rows}) == 61
