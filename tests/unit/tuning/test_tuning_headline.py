"""The tuning kind's landing-page headline: tuned vs the faster peer (PyTorch eager, onnxruntime)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest


def test_headline_is_tuned_over_eager():
    from tuning.experiment import tuning_headline

    exp = SimpleNamespace(pk=3, result={"model": "resnet18", "num_threads": 2, "tuned": {"median_s": 0.030},
                                        "eager": {"median_s": 0.015}, "untuned": {"median_s": 0.9},
                                        "budget": {"tasks_tuned": ["a", "b"], "tasks_untuned": ["c"]}})
    h = tuning_headline(exp)
    assert h.ratio == pytest.approx(2.0) and h.verdict == "worse"
    assert (h.ours, h.baseline, h.baseline_name) == ("30.00 ms", "15.00 ms", "PyTorch eager")
    assert "2/3 tasks tuned" in h.note


def test_no_headline_without_eager():
    from tuning.experiment import tuning_headline

    assert tuning_headline(SimpleNamespace(pk=1, result={"tuned": {"median_s": 0.01}, "eager": None})) is None


def test_headline_compares_with_the_faster_peer():
    from tuning.experiment import tuning_headline

    base = {"model": "convnet", "num_threads": 2, "tuned": {"median_s": 0.0004}, "eager": {"median_s": 0.0005}}
    h = tuning_headline(SimpleNamespace(pk=4, result={**base, "onnxruntime": {"median_s": 0.0002}}))
    assert (h.baseline_name, h.baseline) == ("onnxruntime", "0.20 ms") and h.ratio == pytest.approx(2.0)
    h = tuning_headline(SimpleNamespace(pk=5, result={**base, "onnxruntime": {"error": "export failed"}}))
    assert h.baseline_name == "PyTorch eager" and h.ratio == pytest.approx(0.8)
    h = tuning_headline(SimpleNamespace(pk=6, result={**base, "eager": None, "onnxruntime": {"median_s": 0.0008}}))
    assert h.baseline_name == "onnxruntime" and h.ratio == pytest.approx(0.5)
