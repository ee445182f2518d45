"""Charts that say what they show: labels that fit inside the picture (measured against
matplotlib's own text metrics for DejaVu Sans, the widest common system sans-serif), n
beside every mark, and a reason many rows share said once above the chart, not in each row."""

from __future__ import annotations

from xml.etree import ElementTree

from matplotlib.backends.backend_agg import RendererAgg
from matplotlib.font_manager import FontProperties

from judge.reports.sections import BarChart
from server.dashboard.agreement_page import estimates_chart
from server.dashboard.charts import Point, intervals, text_width
from server.dashboard.figures import bar_chart
from server.usecases.dashboard import agreement_options

SVG = "{http://www.w3.org/2000/svg}"
LABELS = [
    "names oriented, every item",
    "WWW MMM gendered words (Women/Men)",
    "group words: answers that name a group explicitly",
    "Muslim <-> Christian, items of stage S3",
    "ii ll",
]


def _width(text: str, size: float) -> float:
    """The text's advance width in px by matplotlib's renderer (72 dpi: 1 pt = 1 px)."""
    renderer = RendererAgg(100, 100, 72)
    prop = FontProperties(family="DejaVu Sans", size=size)
    width, _, _ = renderer.get_text_width_height_descent(text, prop, ismath=False)
    return float(width)


def test_the_width_estimate_is_an_upper_bound_of_the_real_font() -> None:
    for label in [*LABELS, "S2 ETCS>=4: prediction-powered", "0123456789 %"]:
        assert text_width(label) >= _width(label, 12), label


def test_every_label_of_an_interval_chart_starts_inside_the_picture() -> None:
    points = [Point(label, 0.1 * k, 0.0, 0.2 * k, f"n={k}") for k, label in enumerate(LABELS)]
    root = ElementTree.fromstring(intervals("t", points, axis="score points"))
    ends = [t for t in root.iter(f"{SVG}text") if t.get("text-anchor") == "end"]
    assert [("".join(t.itertext())) for t in ends] == LABELS  # none shortened here
    for t in ends:
        # An end-anchored label starts at x minus its real width: never left of 0.
        assert float(t.get("x", 0)) - _width("".join(t.itertext()), 12) >= 0, t.text


def test_a_label_too_long_for_the_column_is_shortened_and_kept_in_its_title() -> None:
    long = "a counterfactual swap label " * 8
    root = ElementTree.fromstring(intervals("t", [Point(long, 1.0, 0.5, 1.5)], axis="x"))
    (label,) = [t for t in root.iter(f"{SVG}text") if t.get("text-anchor") == "end"]
    title = label.find(f"{SVG}title")
    assert title is not None and title.text == long  # the whole label, for hover and readers
    shown = title.tail or ""
    assert shown.endswith("…") and long.startswith(shown[:-1])
    assert float(label.get("x", 0)) - _width(shown, 12) >= 0


def test_n_is_written_beside_every_mark_of_a_bar_chart() -> None:
    figure = BarChart(
        "m", [("A", 1.0, 0.5, 1.5), ("B", 2.0, None, None)], "mean (US dollars)", ns=[7, 3]
    )
    chart = bar_chart(figure)
    assert "n=7" in chart.svg and "n=3" in chart.svg and "mean (US dollars)" in chart.svg
    assert [row[-1] for row in chart.rows] == ["7", "3"] and chart.columns[-1] == "n"
    # Without counts nothing is invented.
    bare = bar_chart(BarChart("m", [("A", 1.0, 0.5, 1.5)], "rho"))
    assert "n=" not in bare.svg and bare.columns[-1] == "CI high"


def _estimate(method: str, value: float | None, reason: str = "") -> dict[str, object]:
    low, high = (None, None) if value is None else (value - 5, value + 5)
    return {"method": method, "value": value, "ci_low": low, "ci_high": high, "n": 0,
            "N": 18, "effective_n": None, "reason": reason}  # fmt: skip


def test_a_reason_many_rows_share_is_said_once_above_the_chart() -> None:
    imported = "imported ratings have no sampling design to weight by; pass assume_random"
    cells = [
        {"factor": "all", "label": f"S{k} ICS>=3", "judge_only": _estimate("judge-only", 50.0),
         "human_only": _estimate("human-only", None, imported),
         "prediction_powered": _estimate("prediction-powered", None, imported)}
        for k in range(1, 10)
    ]  # fmt: skip
    cells[0]["human_only"] = _estimate("human-only", None, "only 1 rated item(s) in this cell")
    chart = estimates_chart({"metrics": cells}, 1, agreement_options({}))
    assert chart.above == [f"No estimate for 17 of the 27 rows: {imported}"]
    assert str(chart.svg).count(imported) == 0  # not in the rows, so not truncated either
    assert str(chart.svg).count(">no estimate: N=18; reason above the chart</text>") == 17
    # A reason of one row only stays in that row.
    assert "only 1 rated item(s) in this cell" in str(chart.svg)
    # Detection the other way: with no shared reason nothing is said above.
    alone = estimates_chart({"metrics": cells[:1]}, 1, agreement_options({}))
    assert alone.above == []
