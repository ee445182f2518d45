"""The dashboard's one colour scale: a single-hue sequential blue (ColorBrewer's "Blues",
Harrower and Brewer 2003), from near white for the lowest value to dark blue for the highest.
Its lightness falls steadily from one end to the other, so it reads the same in greyscale and
for readers with any colour-vision deficiency (there is one hue, nothing to confuse), and
"darker is more" holds in print. A value's colour is never the only way to read it: every
cell carries its number as text, and a cell without a number is hatched, not coloured.

>>> colour(0.0), colour(1.0)
('#f7fbff', '#08306b')
>>> ink(colour(0.0)), ink(colour(1.0))
('#000000', '#ffffff')
"""

from __future__ import annotations

BLUES = (
    "#f7fbff",
    "#deebf7",
    "#c6dbef",
    "#9ecae1",
    "#6baed6",
    "#4292c6",
    "#2171b5",
    "#08519c",
    "#08306b",
)
"""The nine classes of ColorBrewer's sequential "Blues", light to dark; their relative
luminance is 0.96, 0.82, 0.69, 0.55, 0.38, 0.26, 0.16, 0.08, 0.03 (monotone)."""
MARK = "#08519c"
"""The colour of dots, bars and lines: near the scale's dark end, legible on white and in
grey."""
EMPTY = "#ffffff"
"""Cells without a number: white, hatched (see ``charts.HATCH``), never a colour of the scale."""


def _rgb(hex_colour: str) -> tuple[int, int, int]:
    return int(hex_colour[1:3], 16), int(hex_colour[3:5], 16), int(hex_colour[5:7], 16)


def colour(share: float) -> str:
    """The scale's colour at ``share`` (0: low end, 1: high end; clipped), interpolated
    between the two nearest stops."""
    share = min(1.0, max(0.0, share))
    place = share * (len(BLUES) - 1)
    low = int(place)
    if low == len(BLUES) - 1:
        return BLUES[-1]
    part = place - low
    a, b = _rgb(BLUES[low]), _rgb(BLUES[low + 1])
    mixed = (round(x + (y - x) * part) for x, y in zip(a, b, strict=True))
    return "#{:02x}{:02x}{:02x}".format(*mixed)


def ink(background: str) -> str:
    """Black or white text, whichever contrasts more with ``background`` (WCAG 2's relative
    luminance and contrast ratio). Pure black and white keep at least 4.58:1 on any colour:
    the two ratios are equal where (L + 0.05)^2 = 1.05 x 0.05, L = 0.179, both 4.58:1."""

    def linear(channel: int) -> float:
        c = channel / 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (linear(c) for c in _rgb(background))
    luminance = 0.2126 * r + 0.7152 * g + 0.0722 * b
    on_white = 1.05 / (luminance + 0.05)
    on_black = (luminance + 0.05) / 0.05
    return "#ffffff" if on_white >= on_black else "#000000"
