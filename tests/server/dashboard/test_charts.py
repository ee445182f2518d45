"""The dashboard's SVG charts and its generated job form, without a server: what a chart
draws for a number, an interval and a missing number, that its colour scale reads in
greyscale, and that the form's inputs follow the request models' field types and bounds."""

from __future__ import annotations

import re
from xml.etree import ElementTree

import pytest
from werkzeug.datastructures import MultiDict

from judge.errors import InvalidInputError
from server.dashboard import job_form
from server.dashboard.charts import Cell, Point, heatmap, histograms, intervals, scatter
from server.dashboard.scale import colour, ink
from server.usecases.requests import AuditRequest, CounterfactualRequest, JudgeRequest

SVG = "{http://www.w3.org/2000/svg}"


def luminance(hex_colour: str) -> float:
    """WCAG 2's relative luminance, written out here from its definition."""
    channels = [int(hex_colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    lin = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def parsed(svg: str) -> ElementTree.Element:
    root = ElementTree.fromstring(svg)
    assert root.get("role") == "img"
    ids = (root.get("aria-labelledby") or "").split()
    found = {e.get("id") for e in root.iter() if e.get("id")}
    assert ids and set(ids) <= found, "the chart's label points at its title and summary"
    return root


def test_the_colour_scale_reads_in_greyscale() -> None:
    # Darker is more, all the way: each step of the scale is darker than the one before, so
    # a greyscale print (or any colour-vision deficiency) keeps the order.
    shades = [luminance(colour(k / 40)) for k in range(41)]
    assert all(a > b for a, b in zip(shades, shades[1:], strict=False))
    # Text on a cell keeps WCAG's 4.5:1 contrast at every step.
    for k in range(41):
        back = colour(k / 40)
        text = luminance(ink(back))
        lighter, darker = max(text, luminance(back)), min(text, luminance(back))
        assert (lighter + 0.05) / (darker + 0.05) >= 4.5, back


def test_a_heatmap_hatches_missing_cells_and_never_draws_them_as_zero() -> None:
    cells = {
        ("a", "x"): Cell(0.0, "0", "n=4"),
        ("a", "y"): Cell(None, "—", "n=0, 2 unscored"),
        ("b", "x"): Cell(100.0, "100", "n=4"),
    }  # ("b", "y") has no cell at all
    root = parsed(heatmap("t", ["a", "b"], ["x", "y"], cells, domain=(0, 100), legend="%"))
    rects = [g.find(f"{SVG}rect") for g in root.iter(f"{SVG}g") if g.get("class") == "cell"]
    fills = [r.get("fill") for r in rects if r is not None]
    assert fills[0] == colour(0.0) and fills[2] == colour(1.0)
    assert fills[1].startswith("url(#h") and fills[3].startswith("url(#h")  # type: ignore[union-attr]
    titles = [g.findtext(f"{SVG}title") for g in root.iter(f"{SVG}g") if g.get("class") == "cell"]
    assert titles[3] == "b, y: none"


def test_an_interval_chart_draws_whiskers_and_names_missing_estimates() -> None:
    points = [
        Point("judge", 50.0, 40.0, 60.0, "n=18"),
        Point("people", None, note="no rated item"),
        Point("<b>", 75.0, note="n=3"),
    ]
    svg = intervals("t", points, axis="percent", domain=(0, 100), reference=50.0)
    root = parsed(svg)
    marks = [c for c in root.iter(f"{SVG}circle")]
    assert len(marks) == 2  # no mark for the missing estimate
    whisker = next(e for e in root.iter(f"{SVG}line") if e.get("class") == "ci")
    x1, x2 = float(whisker.get("x1", 0)), float(whisker.get("x2", 0))
    centre = float(marks[0].get("cx", 0))
    assert x1 < centre < x2 and abs((centre - x1) - (x2 - centre)) < 0.2  # 40 and 60 around 50
    assert "no estimate: no rated item" in svg and "&lt;b&gt;" in svg and "<b>" not in svg
    assert "50.00 [40.00, 60.00]  n=18" in svg


def test_histograms_and_scatters_keep_every_count_and_pair() -> None:
    svg = histograms("t", [("S1 ICS", {1: 2, 3: 5}, "n=7, 1 unscored")], [1, 2, 3, 4, 5])
    titles = re.findall(r"<title>S1 ICS: score (\d): (\d+)</title>", svg)
    assert titles == [("1", "2"), ("2", "0"), ("3", "5"), ("4", "0"), ("5", "0")]
    assert "n=7, 1 unscored" in svg
    root = parsed(scatter("s", [1, 2, 2], [1.5, 2, 2], domain=(1, 5), x_label="j", y_label="p"))
    assert len(list(root.iter(f"{SVG}circle"))) == 3  # equal pairs are jittered, not merged


def test_form_fields_follow_the_request_models() -> None:
    judge = {f.name: f for f in job_form.job_form_fields("judge")}
    assert set(judge) == set(JudgeRequest.model_fields) - set(JudgeRequest.NOT_FOR_JOBS)
    assert (judge["prompt_variant"].widget, [c for c, _ in judge["prompt_variant"].choices]) == (
        "select",
        ["", "plain", "cot"],
    )
    assert (judge["temperature"].minimum, judge["temperature"].maximum) == ("0", "2")
    assert (judge["samples"].step, judge["samples"].maximum) == ("1", "50")
    assert judge["swap_order"].widget == "checkbox" and judge["generation_run_id"].required
    swap = {f.name: f for f in job_form.job_form_fields("counterfactual")}["swap"]
    assert swap.widget == "checkboxes" and [c for c, _ in swap.choices] == list(
        CounterfactualRequest.model_fields["swap"].annotation.__args__[0].__args__  # type: ignore[union-attr]
    )
    options = {f.name: f for f in job_form.job_form_fields("audit")}["options"]
    assert options.widget == "json" and "levels" in (
        AuditRequest.model_fields["options"].description or ""
    )


def test_a_posted_form_becomes_the_request_or_names_what_is_wrong() -> None:
    made = job_form.parse(
        "counterfactual",
        MultiDict([("judge_run_id", "3"), ("swap", "names"), ("swap", "race")]),
        {},
    )
    assert made == CounterfactualRequest(judge_run_id=3, swap=["names", "race"])
    with pytest.raises(InvalidInputError) as bad:
        job_form.parse("judge", MultiDict([("generation_run_id", "x"), ("samples", "two")]), {})
    assert str(bad.value) == (
        "the judge job form has errors: generation_run_id: 'x' is not an integer; "
        "samples: 'two' is not an integer"
    )
    with pytest.raises(InvalidInputError, match="temperature"):
        job_form.parse("judge", MultiDict([("generation_run_id", "1"), ("temperature", "9")]), {})
