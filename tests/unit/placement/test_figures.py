"""Figures are pure functions of a simulation result."""
from placement import figures

RESULT = {"policies": {
    name: {"summary": {"makespan_s": 7200.0 * k, "mean_queueing_delay_s": 3600.0 * k},
           "jct_quantiles_s": [float(i * k) for i in range(101)],
           "queueing_quantiles_s": [float(i) for i in range(101)],
           "utilisation": {"t": [0.0, 86400.0], "util": [10.0 * k, 0.0]}}
    for k, name in ((1, "horus"), (2, "fifo"))}}


def test_figures_carry_the_numbers():
    assert list(figures.makespan_figure(RESULT).data[0].y) == [2.0, 4.0]  # hours
    assert [t.name for t in figures.jct_cdf_figure(RESULT).data] == ["horus", "fifo"]
    q = figures.queueing_figure(RESULT).data
    assert list(q[0].y) == [1.0, 2.0] and list(q[1].y) == [50 / 3600, 50 / 3600]
    u = figures.utilisation_figure(RESULT).data[1]
    assert list(u.x) == [0.0, 1.0] and list(u.y) == [20.0, 0.0]
