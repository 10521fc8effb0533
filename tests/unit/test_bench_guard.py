"""bench.guard_cost runs without a cluster: a short run gives its two rows and a verdict per aim."""

from bench import guard_cost


def test_a_short_run_reports_both_ways_of_starting_and_a_verdict_per_aim():
    report = guard_cost.run(runs=2)
    assert [row[0] for row in report.rows] == ["bash -c (no guard)", "the executor's UserProcess (guard)"]
    assert len(report.verdicts) == 2 and all(v.endswith(("met", "MISSED")) for v in report.verdicts)
    assert float(report.rows[1][3]) > 0
