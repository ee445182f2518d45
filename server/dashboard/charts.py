"""Charts drawn as inline SVG on the server: no JavaScript, no charting library, nothing to
build. Each function takes numbers a page already has and returns the picture; the page puts
the same numbers in a table under it (``Chart``).

Honesty rules every chart follows: an interval is drawn wherever there is one, n is written
beside the mark, a missing number is a hatched cell or the words "no estimate" (never a bar at
zero), and every mark has a ``<title>`` with its numbers, so that hovering shows them and a
screen reader reads them (the ``<svg>`` itself is labelled by its title and a summary).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import count

from markupsafe import Markup, escape

from server.dashboard.scale import EMPTY, MARK, colour, ink

CHAR_W = 7.2
"""Width of an average character of 12 px labels (legends' spacing)."""
_EM = {
    **dict.fromkeys("iljI.,:;'|!", 0.34),
    **dict.fromkeys('frt()[]{}- /\\"', 0.42),
    **dict.fromkeys("mwMW%", 1.0),
    **dict.fromkeys("<>=+~#@", 0.84),
    **dict.fromkeys("ABCDEFGHKNOPQRUVXYZ&", 0.78),
}
"""Advance widths in em of the characters that stray from the 0.67 em of the rest (digits and
most lowercase), rounded up from the widest common sans-serif (DejaVu Sans, what system-ui
gives on Linux) so that a label measured here fits in every browser's font."""
MOST_LABEL = 480.0
"""The widest label column; a longer label is shortened with "…" (its mark's hover keeps it
whole)."""
HATCH = (
    '<pattern id="{id}" width="6" height="6" patternUnits="userSpaceOnUse" '
    'patternTransform="rotate(45)"><rect width="6" height="6" fill="#ffffff"/>'
    '<line x1="0" y1="0" x2="0" y2="6" stroke="#9a9a9a" stroke-width="1.5"/></pattern>'
)
SHAPES = ("circle", "square", "diamond", "triangle")
"""Marker shapes by series: a second cue besides position, for readers who cannot tell
colours apart (all marks are one colour anyway)."""
_ids = count(1)


@dataclass(frozen=True)
class Chart:
    """A picture and its numbers: ``columns`` and ``rows`` are the table under it, ``csv``
    the URL of the same numbers as CSV where the API serves them; ``above``: what holds for
    many of its marks (a reason they have no estimate), said once above the picture."""

    title: str
    svg: Markup
    columns: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)
    csv: str | None = None
    notes: list[str] = field(default_factory=list)
    above: list[str] = field(default_factory=list)


def _e(text: object) -> str:
    return str(escape(str(text)))


def _uid(prefix: str) -> str:
    return f"{prefix}{next(_ids)}"


def _svg(width: float, height: float, title: str, summary: str, body: list[str]) -> Markup:
    ident = _uid("c")
    return Markup(
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" '
        f'width="{width:.0f}" height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" '
        f'aria-labelledby="{ident}t {ident}d"><title id="{ident}t">{_e(title)}</title>'
        f'<desc id="{ident}d">{_e(summary)}</desc>' + "".join(body) + "</svg>"
    )


def text_width(text: str, size: float = 12) -> float:
    """The width in px of ``text`` at ``size`` px (an upper estimate, see ``_EM``).

    >>> text_width("mm"), text_width("ii")
    (24.0, 8.16)
    """
    return round(sum(_EM.get(c, 0.67) for c in text) * size, 2)


def fit(text: str, width: float, size: float = 12) -> str:
    """``text`` shortened with "…" until it fits ``width`` px.

    >>> fit("a short label", 400), fit("m" * 10, 60)
    ('a short label', 'mmmm…')
    """
    if text_width(text, size) <= width:
        return text
    while text and text_width(text + "…", size) > width:
        text = text[:-1]
    return text + "…"


def _label(text: str, width: float) -> str:
    """A label's SVG text, shortened to ``width`` with the whole of it as its title."""
    shown = fit(text, width)
    return _e(text) if shown == text else f"<title>{_e(text)}</title>{_e(shown)}"


def _label_width(labels: Sequence[str], least: float = 40, most: float = MOST_LABEL) -> float:
    """The label column: the widest label measured, plus the gap to the plot."""
    return min(most, max(least, max((text_width(s) for s in labels), default=0) + 14))


def fmt(value: float | None, digits: int = 2) -> str:
    """A number as shown in charts and tables; None (or NaN) is "—"."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return f"{value:.{digits}f}"


def nice_ticks(low: float, high: float, wanted: int = 5) -> list[float]:
    """Round tick values covering [low, high] (steps of 1, 2 or 5 times a power of ten).

    >>> nice_ticks(0, 100)
    [0.0, 20.0, 40.0, 60.0, 80.0, 100.0]
    >>> nice_ticks(-0.3, 0.25)
    [-0.4, -0.2, 0.0, 0.2, 0.4]
    """
    if high <= low:
        high = low + 1
    raw = (high - low) / max(1, wanted)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.floor(low / step + 1e-9) * step
    ticks, tick = [], first
    while tick < high + step * 0.999:
        ticks.append(round(tick, 10) + 0.0)
        tick += step
    return ticks


# -- heatmaps --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cell:
    """One heatmap cell: ``value`` places it on the scale (None: no number, hatched), ``text``
    and ``detail`` are written in it, ``hover`` says everything in words."""

    value: float | None
    text: str
    detail: str = ""
    hover: str = ""


def heatmap(
    title: str,
    rows: Sequence[str],
    columns: Sequence[str],
    cells: Mapping[tuple[str, str], Cell],
    *,
    domain: tuple[float, float],
    legend: str,
    cell_width: float = 100,
    cell_height: float = 40,
) -> Markup:
    """Rows x columns of cells coloured on cividis over ``domain`` (low, high); a pair
    without a cell, or a cell without a value, is hatched. Cells lower than 34 px show
    ``text`` alone (``detail`` stays in the hover and the table)."""
    left = _label_width(rows)
    top, height = 34.0, cell_height
    two_lines = height >= 34
    width = left + cell_width * len(columns) + 8
    total = top + height * len(rows) + 58
    hatch = _uid("h")
    body = ["<defs>" + HATCH.format(id=hatch) + "</defs>"]
    for j, name in enumerate(columns):
        x = left + cell_width * (j + 0.5)
        body.append(
            f'<text x="{x:.1f}" y="{top - 10:.1f}" class="col" text-anchor="middle">'
            f"{_e(name)}</text>"
        )
    low, high = domain
    span = (high - low) or 1.0
    for i, name in enumerate(rows):
        y = top + height * i
        body.append(
            f'<text x="{left - 6:.1f}" y="{y + height / 2 + 4:.1f}" text-anchor="end">'
            f"{_label(name, left - 10)}</text>"
        )
        for j, column in enumerate(columns):
            x = left + cell_width * j
            cell = cells.get((name, column)) or Cell(None, "—", "", f"{name}, {column}: none")
            fill = EMPTY if cell.value is None else colour((cell.value - low) / span)
            paint = f"url(#{hatch})" if cell.value is None else fill
            text = "#111111" if cell.value is None else ink(fill)
            hover = cell.hover or f"{name}, {column}: {cell.text} {cell.detail}".strip()
            body.append(
                f'<g class="cell"><title>{_e(hover)}</title>'
                f'<rect x="{x:.1f}" y="{y:.1f}" width="{cell_width - 2:.1f}" '
                f'height="{height - 2:.1f}" fill="{paint}" stroke="#d0d7de"/>'
                f'<text x="{x + cell_width / 2 - 1:.1f}" '
                f'y="{y + (17 if two_lines else height / 2 + 3):.1f}" text-anchor="middle" '
                f'style="fill:{text}" class="v">{_e(cell.text)}</text>'
                + (
                    f'<text x="{x + cell_width / 2 - 1:.1f}" y="{y + 31:.1f}" '
                    f'text-anchor="middle" style="fill:{text}" class="d">{_e(cell.detail)}</text>'
                    if cell.detail and two_lines
                    else ""
                )
                + "</g>"
            )
    body += _legend(left, top + height * len(rows) + 14, domain, legend, hatch)
    summary = f"{len(rows)} rows by {len(columns)} columns; {legend}. Hover a cell for its numbers."
    return _svg(width, total, title, summary, body)


def _legend(x: float, y: float, domain: tuple[float, float], legend: str, hatch: str) -> list[str]:
    steps = 40
    out = [
        f'<rect x="{x + 160 * k / steps:.1f}" y="{y:.1f}" width="{160 / steps + 0.5:.1f}" '
        f'height="10" fill="{colour(k / (steps - 1))}"/>'
        for k in range(steps)
    ]
    low, high = domain
    out += [
        f'<text x="{x:.1f}" y="{y + 24:.1f}" class="d">{_e(fmt(low, 0 if low == int(low) else 2))}'
        "</text>",
        f'<text x="{x + 160:.1f}" y="{y + 24:.1f}" class="d" text-anchor="end">'
        f"{_e(fmt(high, 0 if high == int(high) else 2))}</text>",
        f'<text x="{x + 170:.1f}" y="{y + 9:.1f}" class="d">{_e(legend)}</text>',
        f'<rect x="{x:.1f}" y="{y + 30:.1f}" width="16" height="10" fill="url(#{hatch})" '
        'stroke="#9a9a9a"/>',
        f'<text x="{x + 22:.1f}" y="{y + 39:.1f}" class="d">no number (empty or unscored)</text>',
    ]
    return out


# -- dots with intervals ---------------------------------------------------------------------


@dataclass(frozen=True)
class Point:
    """One row of an interval chart: ``value`` with its interval (None: not drawn), ``note``
    written at the right (n, a verdict), ``series`` picks the marker's shape; a row without a
    value shows ``note`` (why there is none) instead of a mark."""

    label: str
    value: float | None
    low: float | None = None
    high: float | None = None
    note: str = ""
    series: str = ""


def _finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


def intervals(
    title: str,
    points: Sequence[Point],
    *,
    axis: str,
    reference: float | None = None,
    domain: tuple[float, float] | None = None,
) -> Markup:
    """A dot per row with its interval as a whisker, on one shared axis, the ``reference``
    (0, a fair share, a ceiling) as a dashed line."""
    values = [v for p in points for v in (p.value, p.low, p.high) if v is not None and _finite(v)]
    if reference is not None:
        values.append(reference)
    low, high = domain or (min(values, default=0.0), max(values, default=1.0))
    ticks = nice_ticks(low, high)
    low, high = min(low, ticks[0]), max(high, ticks[-1])
    left = _label_width([p.label for p in points])
    words_of = [_right_text(p) for p in points]
    plot, row, top = 360.0, 22.0, 8.0
    right = 16 + max((text_width(w, 11) for w in words_of if w), default=70)
    missing = [text_width(_missing_text(p), 11) for p in points if not _finite(p.value)]
    width = max(left + plot + right, left + 12 + max(missing, default=0))
    total = top + row * len(points) + 42
    series = list(dict.fromkeys(p.series for p in points))

    def x_of(v: float) -> float:
        return left + plot * (v - low) / ((high - low) or 1.0)

    body = []
    for t in ticks:
        body.append(
            f'<line x1="{x_of(t):.1f}" x2="{x_of(t):.1f}" y1="{top:.1f}" '
            f'y2="{top + row * len(points):.1f}" class="grid"/>'
            f'<text x="{x_of(t):.1f}" y="{top + row * len(points) + 14:.1f}" '
            f'text-anchor="middle" class="d">{_e(_tick(t))}</text>'
        )
    if reference is not None:
        body.append(
            f'<line x1="{x_of(reference):.1f}" x2="{x_of(reference):.1f}" y1="{top:.1f}" '
            f'y2="{top + row * len(points):.1f}" class="ref"/>'
        )
    body.append(f'<text x="{left:.1f}" y="{total - 8:.1f}" class="d">{_e(axis)}</text>')
    for i, p in enumerate(points):
        y = top + row * i + row / 2
        body.append(
            f'<text x="{left - 6:.1f}" y="{y + 4:.1f}" text-anchor="end">'
            f"{_label(p.label, left - 10)}</text>"
        )
        if not _finite(p.value):
            body.append(
                f"<g><title>{_e(p.label + ': no estimate' + (': ' + p.note if p.note else ''))}"
                f'</title><text x="{left + 4:.1f}" y="{y + 4:.1f}" class="missing">'
                f"{_e(_missing_text(p))}</text></g>"
            )
            continue
        assert p.value is not None
        ci = _ci_text(p)
        hover = f"{p.label}: {fmt(p.value)}{ci}" + (f"; {p.note}" if p.note else "")
        mark = [f"<title>{_e(hover)}</title>"]
        if p.low is not None and p.high is not None and _finite(p.low) and _finite(p.high):
            a, b = x_of(p.low), x_of(p.high)
            mark.append(
                f'<line x1="{a:.1f}" x2="{b:.1f}" y1="{y:.1f}" y2="{y:.1f}" class="ci"/>'
                + "".join(
                    f'<line x1="{e:.1f}" x2="{e:.1f}" y1="{y - 5:.1f}" y2="{y + 5:.1f}" '
                    'class="ci"/>'
                    for e in (a, b)
                )
            )
        mark.append(_marker(SHAPES[series.index(p.series) % len(SHAPES)], x_of(p.value), y))
        body.append('<g class="point">' + "".join(mark) + "</g>")
        body.append(
            f'<text x="{left + plot + 8:.1f}" y="{y + 4:.1f}" class="d">{_e(words_of[i])}</text>'
        )
    summary = f"{len(points)} estimates on the axis {axis}" + (
        f", reference line at {_tick(reference)}" if reference is not None else ""
    )
    return _svg(width, total, title, summary + ". Hover a mark for its numbers.", body)


def _clip(text: str, most: int) -> str:
    return text if len(text) <= most else text[: most - 1] + "…"


def _missing_text(p: Point) -> str:
    return _clip("no estimate" + (f": {p.note}" if p.note else ""), 90)


def _ci_text(p: Point) -> str:
    if p.low is not None and p.high is not None and _finite(p.low) and _finite(p.high):
        return f" [{fmt(p.low)}, {fmt(p.high)}]"
    return ""


def _right_text(p: Point) -> str:
    """What is written right of a row's mark: the value, its interval and the note."""
    if not _finite(p.value):
        return ""
    return fmt(p.value) + _ci_text(p) + (f"  {p.note}" if p.note else "")


def _tick(value: float) -> str:
    return f"{value:g}"


def _marker(shape: str, x: float, y: float, r: float = 4.5) -> str:
    if shape == "square":
        side = 2 * r
        return (
            f'<rect x="{x - r:.1f}" y="{y - r:.1f}" width="{side:.1f}" height="{side:.1f}" '
            'class="mark"/>'
        )
    d = r + 1
    corners = {
        "diamond": ((x, y - d), (x + d, y), (x, y + d), (x - d, y)),
        "triangle": ((x, y - d), (x + d, y + r), (x - d, y + r)),
    }
    if shape in corners:
        pts = " ".join(f"{a:.1f},{b:.1f}" for a, b in corners[shape])
        return f'<polygon points="{pts}" class="mark"/>'
    return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r:.1f}" class="mark"/>'


def shape_legend(series: Sequence[str]) -> Markup:
    """Which marker shape stands for which series (for charts of several)."""
    body, x = [], 4.0
    for k, name in enumerate(series):
        body.append(_marker(SHAPES[k % len(SHAPES)], x + 5, 10))
        body.append(f'<text x="{x + 14:.1f}" y="14" class="d">{_e(name)}</text>')
        x += 24 + len(name) * CHAR_W
    return _svg(x, 20, "Legend", ", ".join(series), body)


# -- distributions ---------------------------------------------------------------------------


def histograms(
    title: str, panels: Sequence[tuple[str, Mapping[int, int], str]], levels: Sequence[int]
) -> Markup:
    """Small multiples: per panel (label, count per level, note such as "n=18, 2 unscored"),
    a bar per level with its count written above it."""
    pw, ph, gap, top = 150.0, 110.0, 18.0, 30.0
    width = max(1, len(panels)) * (pw + gap)
    body = []
    for k, (label, counts, note) in enumerate(panels):
        x0 = k * (pw + gap)
        most = max(counts.values(), default=0) or 1
        bw = pw / max(1, len(levels))
        body.append(
            f'<text x="{x0 + pw / 2:.1f}" y="12" text-anchor="middle">{_e(label)}</text>'
            f'<text x="{x0 + pw / 2:.1f}" y="25" text-anchor="middle" class="d">'
            f"{_e(note)}</text>"
        )
        for j, level in enumerate(levels):
            n = counts.get(level, 0)
            h = (ph - 16) * n / most
            x = x0 + bw * j
            y = top + ph - h
            body.append(
                f'<g class="bar"><title>{_e(f"{label}: score {level}: {n}")}</title>'
                f'<rect x="{x + 2:.1f}" y="{y:.1f}" width="{bw - 4:.1f}" height="{h:.1f}" '
                f'fill="{MARK}"/><text x="{x + bw / 2:.1f}" y="{y - 3:.1f}" '
                f'text-anchor="middle" class="d">{n}</text></g>'
                f'<text x="{x + bw / 2:.1f}" y="{top + ph + 13:.1f}" text-anchor="middle" '
                f'class="d">{level}</text>'
            )
        body.append(
            f'<line x1="{x0:.1f}" x2="{x0 + pw:.1f}" y1="{top + ph:.1f}" '
            f'y2="{top + ph:.1f}" class="axis"/>'
        )
    summary = "; ".join(
        f"{label}: " + ", ".join(f"{lv}: {c.get(lv, 0)}" for lv in levels) for label, c, _ in panels
    )
    return _svg(width, top + ph + 20, title, summary, body)


def scatter(
    title: str,
    xs: Sequence[float],
    ys: Sequence[float],
    *,
    domain: tuple[float, float],
    x_label: str,
    y_label: str,
) -> Markup:
    """Pairs as dots, jittered by a fixed amount per point (the same picture on every load)
    so that equal pairs stay visible, with the diagonal of perfect agreement."""
    size, pad = 220.0, 36.0
    low, high = domain[0] - 0.25, domain[1] + 0.25  # room for the jitter at both ends
    span = (high - low) or 1.0

    def at(v: float, jitter: float) -> float:
        return pad + size * (v - low + jitter) / span

    body = [
        f'<rect x="{pad}" y="{pad / 2}" width="{size}" height="{size}" class="frame"/>',
        f'<line x1="{pad}" y1="{pad / 2 + size}" x2="{pad + size}" y2="{pad / 2}" class="ref"/>',
    ]
    whole = domain[1] - domain[0] <= 10
    marks = (
        [float(t) for t in range(math.ceil(domain[0]), math.floor(domain[1]) + 1)]
        if whole
        else nice_ticks(*domain, wanted=4)
    )
    for t in marks:
        if low <= t <= high:
            body.append(
                f'<text x="{at(t, 0):.1f}" y="{pad / 2 + size + 14:.1f}" '
                f'text-anchor="middle" class="d">{_tick(t)}</text>'
                f'<text x="{pad - 6:.1f}" y="{pad / 2 + size - at(t, 0) + pad + 4:.1f}" '
                f'text-anchor="end" class="d">{_tick(t)}</text>'
            )
    for i, (x, y) in enumerate(zip(xs, ys, strict=True)):
        digest = hashlib.sha256(str(i).encode()).digest()
        jx, jy = (digest[0] / 255 - 0.5) * 0.3, (digest[1] / 255 - 0.5) * 0.3
        cx, cy = at(x, jx), pad / 2 + size - (at(y, jy) - pad)
        body.append(
            f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="3" class="dot">'
            f"<title>{_e(f'{x_label} {fmt(x)}, {y_label} {fmt(y)}')}</title></circle>"
        )
    body.append(
        f'<text x="{pad + size / 2:.1f}" y="{pad / 2 + size + 30:.1f}" '
        f'text-anchor="middle" class="d">{_e(x_label)}</text>'
        f'<text x="12" y="{pad / 2 + size / 2:.1f}" class="d" text-anchor="middle" '
        f'transform="rotate(-90 12 {pad / 2 + size / 2:.1f})">{_e(y_label)}</text>'
    )
    summary = f"{len(xs)} pairs of {x_label} and {y_label}; the diagonal is perfect agreement"
    return _svg(pad + size + 10, pad / 2 + size + 40, title, summary, body)


def progress_bars(title: str, rows: Sequence[tuple[str, int, int | None, str]]) -> Markup:
    """Per row (label, done, of how many, note) a bar filled to ``done`` inside an outline
    of the total; an unknown total draws the count alone."""
    left = _label_width([r[0] for r in rows])
    plot, row, top = 300.0, 22.0, 6.0
    width, total_h = left + plot + 220, top + row * len(rows) + 8
    most = max([t or d for _, d, t, _ in rows], default=1) or 1
    body = []
    for i, (label, done, total, note) in enumerate(rows):
        y = top + row * i
        outline = plot * (total or done) / most
        filled = plot * done / most
        words = f"{done} of {total}" if total is not None else f"{done}"
        hover = f"{label}: {words}" + (f"; {note}" if note else "")
        body.append(
            f'<g class="bar"><title>{_e(hover)}</title>'
            f'<rect x="{left:.1f}" y="{y + 3:.1f}" width="{outline:.1f}" height="{row - 8:.1f}" '
            f'class="outline"/><rect x="{left:.1f}" y="{y + 3:.1f}" width="{filled:.1f}" '
            f'height="{row - 8:.1f}" fill="{MARK}"/></g>'
            f'<text x="{left - 6:.1f}" y="{y + row / 2 + 3:.1f}" text-anchor="end">'
            f"{_label(label, left - 10)}</text>"
            f'<text x="{left + plot + 8:.1f}" y="{y + row / 2 + 3:.1f}" class="d">'
            f"{_e(words + ('  ' + note if note else ''))}</text>"
        )
    summary = "; ".join(f"{label}: {d} of {t}" for label, d, t, _ in rows)
    return _svg(width, total_h, title, summary, body)
