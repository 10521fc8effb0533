"""The registry benchmark's growth verdict is computed from the run's own figures (issue #30 item 11)."""

from bench.registry_scale import growth_verdicts


def test_linear_growth_passes_and_quadratic_growth_fails():
    assert "PASS" in growth_verdicts([(100, 0.2), (1000, 1.0), (2000, 2.1), (5000, 5.2)])[0]
    quadratic = growth_verdicts([(1000, 3.0), (2000, 10.8), (5000, 51.7)])  # the registry before its fix
    assert "FAIL" in quadratic[0] and "N^1.7" in quadratic[0], quadratic
    assert "not measured" in growth_verdicts([(100, 0.1), (1000, 1.0)])[0]
