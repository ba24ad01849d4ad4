"""Ansor's gradient score (:func:`tuning.backends.gradient.gradient_scores`), checked by hand."""
from __future__ import annotations

import pytest

from tuning.backends.gradient import gradient_scheduler, gradient_scores


def test_scores_follow_ansor_formula():
    # task 0: 4 rounds, best 4 -> 3 -> 2 -> 1 (s); window 3: g1 = (4 - 1) / 3 = 1, g2 = 1 / 4
    # task 1: 1 round, best 2: g1 = 0 (fewer than window + 1 rounds), g2 = 2 / 1
    # task 2: nothing valid yet -> -1e9
    hist = [[4.0, 3.0, 2.0, 1.0], [2.0], [1e10]]
    got = gradient_scores(hist, [2.0, 1.0, 5.0], [0, 1, 2], alpha=0.2, window=3)
    assert got[0] == pytest.approx(2.0 * (0.2 * 1.0 + 0.8 * 0.25))
    assert got[1] == pytest.approx(1.0 * (0.8 * 2.0))
    assert got[2] == -1e9


def test_bad_options_are_refused():
    with pytest.raises(ValueError, match="alpha"):
        gradient_scheduler(alpha=1.5)
    with pytest.raises(ValueError, match="window_size"):
        gradient_scheduler(window_size=0)
