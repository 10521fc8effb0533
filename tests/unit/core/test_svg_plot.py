"""The metric plot both job pages draw (core/svg_plot.py), on made-up series: it must always be well-formed
SVG whose texts are escaped, whatever a program reported."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

from tony_airflow.core.svg_plot import HEIGHT, MAX_POINTS, NAME_CHARS, WIDTH, metric_plot, number

SVG = "{http://www.w3.org/2000/svg}"


def parsed(svg: str) -> ET.Element:
    """The plot as XML: it fails here when a text was not escaped."""
    root = ET.fromstring(svg)
    assert root.tag == SVG + "svg" and root.get("class") == "metric-plot"
    return root


def coords(root: ET.Element) -> list[tuple[float, float]]:
    line = root.find(SVG + "polyline")
    assert line is not None
    return [(float(x), float(y)) for x, y in (p.split(",") for p in line.get("points", "").split())]


def texts(root: ET.Element) -> list[str]:
    return [t.text or "" for t in root.iter(SVG + "text")]


def inside_the_frame(points: list[tuple[float, float]]) -> bool:
    return all(0 <= x <= WIDTH and 0 <= y <= HEIGHT for x, y in points)


def test_an_empty_series_draws_a_frame_that_says_so():
    root = parsed(metric_plot("loss", []))
    assert root.get("data-points") == "0" and root.find(SVG + "polyline") is None
    assert "no values yet" in texts(root) and texts(root)[0] == "loss"


def test_one_point_is_a_dot_in_the_middle():
    root = parsed(metric_plot("loss", [(120, 0.214)]))
    assert root.find(SVG + "polyline") is None
    dot = root.find(SVG + "circle")
    assert dot is not None and inside_the_frame([(float(dot.get("cx", -1)), float(dot.get("cy", -1)))])
    assert texts(root)[0] == "loss 0.214"


def test_nan_and_inf_are_not_drawn_but_counted_and_a_nan_latest_value_is_said():
    points = [(1, 1.0), (2, math.nan), (3, math.inf), (4, -math.inf), (5, 0.5), (math.nan, 0.4), (6, math.nan)]
    root = parsed(metric_plot("loss", points))
    assert coords(root) and len(coords(root)) == 2 and inside_the_frame(coords(root))
    assert root.get("data-points") == "2"
    assert texts(root)[0] == "loss nan (5 not drawn: not finite)"


def test_only_non_finite_values_is_an_empty_plot():
    root = parsed(metric_plot("loss", [(1, math.nan), (2, math.inf)]))
    assert "no values yet" in texts(root) and "2 not drawn" in texts(root)[0]


def test_odd_points_from_a_program_are_dropped_not_raised():
    root = parsed(metric_plot("m", [None, (1,), "ab", (2, "x"), (3, None), (4, True), (5, 2), (6, 3)]))  # type: ignore[list-item]
    assert len(coords(root)) == 2 and "6 not drawn" in texts(root)[0]


def test_500_points_are_all_drawn_in_step_order_within_the_frame():
    points = [(s, 1.0 / (1 + s)) for s in range(500)]
    points.reverse()  # any order: drawn by step
    root = parsed(metric_plot("loss", points))
    drawn = coords(root)
    assert len(drawn) == 500 and root.get("data-points") == "500" and inside_the_frame(drawn)
    assert [x for x, _ in drawn] == sorted(x for x, _ in drawn)
    assert drawn[0][1] < drawn[-1][1]  # the loss falls: the first point is the highest (the smallest y)
    assert texts(root)[0] == "loss 1"  # the latest reported, as reported (the list's last)


def test_a_long_series_is_thinned_keeping_its_first_and_last_points():
    root = parsed(metric_plot("loss", [(s, float(s)) for s in range(20_000)]))
    drawn = coords(root)
    assert len(drawn) == MAX_POINTS and inside_the_frame(drawn)
    assert "step 0" in texts(root) and "2e+04" in texts(root)


def test_a_flat_series_is_drawn_in_the_middle():
    drawn = coords(parsed(metric_plot("accuracy", [(1, 0.5), (2, 0.5), (3, 0.5)])))
    middle = (22 + HEIGHT - 20) / 2
    assert all(abs(y - middle) < 1 for _, y in drawn)


def test_a_very_long_name_is_cut_in_the_picture_and_whole_in_its_tooltip():
    name = "validation/" + "per_class_accuracy_" * 20
    root = parsed(metric_plot(name, [(1, 0.1), (2, 0.2)]))
    heading = texts(root)[0]
    assert heading.startswith(name[:NAME_CHARS - 1] + "…") and len(heading) < NAME_CHARS + 10
    assert root.findtext(SVG + "title") == name and root.get("data-metric") == name
    assert root.get("width") == str(WIDTH)


def test_a_name_with_markup_is_escaped():
    name = '<script>alert("x")</script>&<b>'
    svg = metric_plot(name, [(1, 0.1), (2, 0.2)])
    assert "<script" not in svg and "<b>" not in svg
    root = parsed(svg)
    assert root.findtext(SVG + "title") == name and root.get("data-metric") == name
    assert texts(root)[0].startswith(name)


def test_numbers_have_four_significant_digits():
    assert [number(0.21434), number(12345.0), number(3), number(math.nan), number("x")] == [
        "0.2143", "1.234e+04", "3", "nan", "x"]
