"""Model names are checked before any heavy work: ``POST /api/v1/placement/predict/`` with an
unknown name is a 400 that never reaches tracing, the predictor, or even ``import torch``
(issue 24: predicting an unknown model took 11 s, the torch import, before its 400)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIRequestFactory, force_authenticate

from placement.backends.features import TORCHVISION_MODELS, check_model_name

REPO = Path(__file__).resolve().parents[3]


def test_static_torchvision_names_are_the_installed_torchvisions():
    import torchvision

    assert TORCHVISION_MODELS == set(torchvision.models.list_models())


@pytest.mark.parametrize("name, ok", [
    ("resnet18", True), ("vit_b_16", True), ("gavel:ResNet-18", True), ("bert-small", True),
    ("no-such-net", False), ("gavel:NoSuchFamily", False), ("onnx:/etc/passwd", False), ("", False),
])
def test_check_model_name(name, ok):
    if ok:
        check_model_name(name, data_dir=REPO / "data")
    else:
        with pytest.raises(KeyError):
            check_model_name(name, data_dir=REPO / "data")


def _predict(body):
    from placement.api import PredictView

    req = APIRequestFactory().post("/api/v1/placement/predict/", body, format="json")
    force_authenticate(req, user=User(username="u"))  # not saved: the view reads no user row
    return PredictView.as_view()(req)


def test_unknown_model_is_refused_before_features_or_predictor():
    heavy = mock.Mock(side_effect=AssertionError("heavy path reached"))
    with mock.patch("placement.services.job_features", heavy), \
            mock.patch("placement.backends.features.model_features", heavy), \
            mock.patch("placement.services._predictor", heavy):
        r = _predict({"model_name": "no-such-net", "batch_size": 8})
    assert r.status_code == 400
    assert list(r.data) == ["model_name"] and "no-such-net" in r.data["model_name"][0]
    heavy.assert_not_called()


def test_unknown_model_is_refused_without_importing_torch():
    # a fresh interpreter: in this one other tests have imported torch already
    code = (
        "import json, sys, django; django.setup()\n"
        "from tests.unit.placement.test_model_names import _predict\n"
        "r = _predict({'model_name': 'no-such-net', 'batch_size': 8})\n"
        "print(json.dumps({'status': r.status_code, 'loaded': sorted(m for m in ('torch', 'torchvision', 'xgboost')"
        " if m in sys.modules)}))\n"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "webapp.settings.test", "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"status": 400, "loaded": []}
