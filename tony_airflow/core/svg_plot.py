"""A small line plot of one metric over steps, as inline SVG markup.

The AM's job page and the history's job page both show each training metric's curve. They are
server-rendered SVG, not a JavaScript charting library: the pages are read through YARN's web proxy on
clusters that reach nothing outside (no CDN), and a page that is plain HTML refreshes, prints and
screenshots the same everywhere. One function draws every curve, so both pages look alike.

The data is what the AM's store and the history's TRAINING events hold: (step, value) pairs reported by
the program, so anything may be in them. Values that are not finite numbers (NaN, inf, None, text) are
not drawn but counted and said; a latest value of NaN is shown as such (a diverged loss is news).
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Sequence
from typing import Any

WIDTH = 320
HEIGHT = 130
MAX_POINTS = 1000      # more are thinned evenly (first and last kept): a curve needs no more than its pixels
NAME_CHARS = 40        # a longer name is cut with "…" in the picture; its <title> (the tooltip) holds it whole
_LEFT, _RIGHT, _TOP, _BOTTOM = 56, 10, 22, 20  # room for the value labels, the title and the step labels


def number(value: Any) -> str:
    """A metric's value in at most 4 significant digits ("0.2143", "1.2e+04", "nan")."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    return f"{value:.4g}"


def _clean(points: Iterable[Sequence[Any]]) -> tuple[list[tuple[float, float]], int, Any]:
    """The drawable points sorted by step, how many were not drawable, and the last value as reported."""
    good: list[tuple[float, float]] = []
    dropped, last = 0, None
    isfinite = math.isfinite
    for point in points:
        try:
            step, value = point[0], point[1]
        except (TypeError, IndexError, KeyError):
            dropped += 1
            continue
        last = value
        try:  # isfinite refuses what is not a number (None, text); a bool is not a metric
            drawable = (isfinite(step) and isfinite(value) and type(step) is not bool
                        and type(value) is not bool)
        except TypeError:
            drawable = False
        if drawable:
            good.append((float(step), float(value)))
        else:
            dropped += 1
    good.sort(key=lambda p: p[0])
    return good, dropped, last


def _thin(points: list[tuple[float, float]], limit: int) -> list[tuple[float, float]]:
    if len(points) <= limit:
        return points
    stride = (len(points) - 1) / (limit - 1)
    return [points[round(i * stride)] for i in range(limit)]


def _span(low: float, high: float) -> tuple[float, float]:
    """A range that can be divided by: a flat curve is drawn in the middle of a small band around it."""
    if high > low:
        return low, high
    pad = abs(low) * 0.1 or 1.0
    return low - pad, high + pad


def metric_plot(name: str, points: Iterable[Sequence[Any]], width: int = WIDTH, height: int = HEIGHT) -> str:
    """The SVG of `name`'s curve over `points` ((step, value) pairs, in any order): a title with the latest
    value, the lowest and highest value on the left, the first and last step below. Every text is
    HTML-escaped, so the result can be put into a page as it is. An empty series draws a frame saying so."""
    drawn, dropped, last = _clean(points)
    drawn = _thin(drawn, MAX_POINTS)
    short = name if len(name) <= NAME_CHARS else name[:NAME_CHARS - 1] + "…"
    heading = short if last is None else f"{short} {number(last)}"
    if dropped:
        heading += f" ({dropped} not drawn: not finite)"
    x0, x1, y0, y1 = _LEFT, width - _RIGHT, _TOP, height - _BOTTOM
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="metric-plot" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" data-metric="{html.escape(name)}" data-points="{len(drawn)}" '
        f'aria-label="{html.escape(name)} over steps">',
        f"<title>{html.escape(name)}</title>",
        f'<text x="{x0}" y="14" font-size="12" font-weight="bold">{html.escape(heading)}</text>',
        f'<rect x="{x0}" y="{y0}" width="{x1 - x0}" height="{y1 - y0}" fill="#fafafa" stroke="#ccc"/>',
    ]
    if not drawn:
        parts.append(f'<text x="{(x0 + x1) / 2:.1f}" y="{(y0 + y1) / 2 + 4:.1f}" font-size="11" fill="#777" '
                     f'text-anchor="middle">no values yet</text>')
        return "".join(parts) + "</svg>"
    s_low, s_high = _span(drawn[0][0], drawn[-1][0])
    values = [v for _, v in drawn]
    low, high = min(values), max(values)
    v_low, v_high = _span(low, high)

    sx, sy = (x1 - x0) / (s_high - s_low), (y1 - y0) / (v_high - v_low)  # pixels per step, per value

    def y(value: float) -> float:
        return y1 - (value - v_low) * sy

    parts += [
        f'<text x="{x0 - 4}" y="{y0 + 10}" font-size="10" text-anchor="end">{html.escape(number(high))}</text>',
        f'<text x="{x0 - 4}" y="{y1}" font-size="10" text-anchor="end">{html.escape(number(low))}</text>',
        f'<text x="{x0}" y="{height - 5}" font-size="10">step {html.escape(number(drawn[0][0]))}</text>',
        f'<text x="{x1}" y="{height - 5}" font-size="10" text-anchor="end">{html.escape(number(drawn[-1][0]))}</text>',
    ]
    if len(drawn) == 1:
        step, value = drawn[0]
        parts.append(f'<circle cx="{(x0 + x1) / 2:.1f}" cy="{y(value):.1f}" r="3" fill="#1a73e8"/>')
    else:
        coords = " ".join([f"{x0 + (s - s_low) * sx:.1f},{y1 - (v - v_low) * sy:.1f}" for s, v in drawn])
        parts.append(f'<polyline points="{coords}" fill="none" stroke="#1a73e8" stroke-width="1.5"/>')
    return "".join(parts) + "</svg>"
