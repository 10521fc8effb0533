"""docs/BENCHMARKS.md holds only what its run measured: no figure of its own, verdicts from the data."""

from __future__ import annotations

import re

from bench import __main__ as bench_main
from bench import airflow_deferrable
from bench.report import Report

NUMBER = re.compile(r"\d")


def _report(name: str, figure: str) -> Report:
    return Report(name=name, title=f"Title {name}", command=f"python -m bench.{name}", columns=["a", "b"],
                  rows=[["x", figure]], notes=[f"note {figure}"], aims=["aim 7 s"], verdicts=[f"{figure}: aim met"])


def test_the_generated_report_has_no_figure_the_run_did_not_produce(tmp_path, monkeypatch):
    monkeypatch.setattr(bench_main, "machine", lambda: ["MACHINE-LINE"])
    reports = [_report("one", "11.5"), _report("two", "42")]
    text = bench_main.write(reports, tmp_path, ["--runs", "3"]).read_text()
    rest = text
    for report in reports:
        assert report.markdown() in rest
        rest = rest.replace(report.markdown(), "")
    header = rest.splitlines()[2]
    assert header.startswith("Written by `make bench`")  # the command and the date of this run
    rest = rest.replace(header, "")
    assert not NUMBER.search(rest), f"figures that no run produced: {rest!r}"


def test_verdicts_are_computed_from_the_figures():
    rows = [airflow_deferrable.Row(n, "deferrable, shared poll", 120.0, 0, rate, 1)
            for n, rate in ((1, 12.0), (200, 13.0))]
    assert airflow_deferrable._verdict(rows).endswith("aim met")
    rows[1].requests_per_min = 2400.0
    assert airflow_deferrable._verdict(rows).endswith("aim missed")
