"""The BBI chart on the dashboard's audit page writes n beside every mark (docs/dashboard.md
promises it for every chart): the counts of a small design, derived by hand."""

from __future__ import annotations

from judge.audits.bbi import analyze_labels
from judge.audits.report import bbi_report
from judge.reports.sections import BarChart
from server.dashboard.figures import bar_chart
from tests.judge.audits.test_bbi import SMALL_DESIGN


def test_the_bbi_chart_shows_each_bias_types_n() -> None:
    (section,) = bbi_report(analyze_labels(SMALL_DESIGN)).sections
    (figure,) = section.figures
    assert isinstance(figure, BarChart)
    chart = bar_chart(figure)
    # By hand (see SMALL_DESIGN): all 6 + 5 = 11, gender 3 + 2 = 5, race 1 + 3 = 4.
    assert [row[0] for row in chart.rows] == ["all", "gender", "race"]
    assert [row[-1] for row in chart.rows] == ["11", "5", "4"] and chart.columns[-1] == "n"
    assert all(f"n={n}" in chart.svg for n in (11, 5, 4))
    assert "BBI (-1 to 1; &gt; 0 stereotypical)" in chart.svg  # the axis: its scale
