"""Headline.verdict: ours / baseline read the right way round, with a 2 % tie band."""
import pytest

from webapp.experiments import Headline


@pytest.mark.parametrize("ratio, better, verdict", [
    (0.80, "lower", "better"),   # 20 % lower JCT is better
    (1.25, "lower", "worse"),
    (1.019, "lower", "tie"),     # within 2 %
    (0.981, "higher", "tie"),
    (1.33, "higher", "better"),  # 33 % more improvement is better
    (0.50, "higher", "worse"),
    (None, "lower", ""),
])
def test_verdict(ratio, better, verdict):
    h = Headline(engine="e", metric="m", ours="1", baseline_name="b", baseline="2", ratio=ratio, better=better)
    assert h.verdict == verdict
