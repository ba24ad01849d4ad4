"""job_profile keeps its answers per (model, batch, GPU type) while the ProfileRow table is
unchanged (the live scheduler asks for every queued job on every pass) and drops them when a
row is added; callers may change the provenance they get without changing the kept one."""
from __future__ import annotations

import pytest

from placement import services
from placement.models import ProfileRow

pytestmark = [pytest.mark.integration, pytest.mark.django_db]


def test_answers_are_kept_until_the_profile_table_changes():
    util, mem, prov = services.job_profile("resnet18", 32, "V100")
    assert 0 < util <= 100 and mem > 0 and prov["gpu_type"] == "V100"
    prov["note"] = "changed by a caller"
    again = services.job_profile("resnet18", 32, "V100")
    assert again[:2] == (util, mem) and "note" not in again[2]
    assert ("resnet18", 32, "V100") in services._PREDICTOR["memo"]

    ProfileRow.objects.create(model="resnet18", batch_size=7, gpu_type="V100", util_mean_pct=40.0,
                              util_peak_pct=60.0, memory_mib=3000.0, source="test")
    services.job_profile("resnet50", 16, "V100")  # the predictor is rebuilt on the new table
    assert ("resnet18", 32, "V100") not in services._PREDICTOR["memo"]
    assert ("resnet50", 16, "V100") in services._PREDICTOR["memo"]


def test_traced_features_of_a_batch_outside_the_zoo_table_are_kept():
    """A batch size outside the shipped zoo table is traced on the meta device (~0.4 s) once per
    process, not on every submission that names it; callers get copies."""
    from placement.backends.features import model_features

    services._traced_features.cache_clear()
    first = services.job_features("resnet18", 7)
    assert first == model_features("resnet18", 7).as_dict()  # computed independently
    first["memory_mib"] = -1.0  # a caller's change does not reach the kept answer
    again = services.job_features("resnet18", 7)
    assert again["memory_mib"] == model_features("resnet18", 7).as_dict()["memory_mib"]
    info = services._traced_features.cache_info()
    assert (info.misses, info.hits) == (1, 1)
