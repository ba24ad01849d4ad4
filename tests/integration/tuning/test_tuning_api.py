"""Tuning through the REST API and dashboard (PostgreSQL; no worker needed: nothing is run)."""
from __future__ import annotations

from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from rest_framework.test import APIClient

from webapp.experiments import get_experiment_kind
from webapp.models import Experiment
from tests.conftest import token_client

pytestmark = pytest.mark.integration

ONNX = Path(__file__).resolve().parents[3] / "data" / "onnx-light-models"


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user("tuner", password="pw")


@pytest.fixture
def api(user):
    c = token_client(user)
    return c


@pytest.mark.parametrize(
    "params,field,message",
    [
        ({"model": "mlp", "runner": "nope"}, "runner", "available: "),
        ({"model": "mlp", "scheduler": "nope"}, "scheduler", "unknown scheduler"),
        ({"model": "no-such-net"}, "model", "unknown model 'no-such-net'; use a torchvision name (e.g. resnet18"),
        ({"model": "mlp", "onnx": "onnx-light-models/light_vgg19.onnx"}, "non_field_errors", "exactly one"),
        ({"onnx": "onnx-light-models/missing.onnx"}, "onnx", "no ONNX model"),
        ({"model": "mlp", "trials": 0}, "trials", ""),
        ({"model": "mlp", "seed_database": "never-imported"}, "seed_database", "no imported database"),
        # issue 24: a NAME only, never a path to another experiment's or the system's files
        ({"model": "mlp", "seed_database": "../../staticfiles"}, "seed_database", "is not a database name"),
        ({"model": "mlp", "seed_database": "../../../../etc"}, "seed_database", "is not a database name"),
        ({"model": "mlp", "seed_database": "../exp-1"}, "seed_database", "is not a database name"),
        ({"model": "mlp", "seed_database": ".."}, "seed_database", "is not a database name"),
        ({"model": "mlp", "scheduler": "trimmer", "options": {"min_task_improvement": -1}}, "options",
         "min_task_improvement"),
        ({"model": "mlp", "scheduler": "trimmer", "options": {"min_task_improvement": "abc"}}, "options",
         "min_task_improvement must be a number"),
        ({"model": "mlp", "scheduler": "trimmer", "options": {"exploration_floor": True}}, "options",
         "exploration_floor must be a number"),
        ({"model": "mlp", "scheduler": "trimmer", "options": {"preempt_warmup": -5}}, "options",
         "preempt_warmup must be an integer"),
        # passed validation, then failed in TVM on the worker (a 64-bit int where C++ wants 32)
        ({"model": "mlp", "scheduler": "trimmer", "options": {"oversample": 2**40}}, "options",
         "oversample must be at most 64"),
        ({"model": "mlp", "scheduler": "trimmer", "options": {"trimmer": 0}}, "options",
         "options['trimmer'] must be a dict"),
        # Trimmer's options with another scheduler would be stored and silently ignored
        ({"model": "mlp", "options": {"patience": 2}}, "options", "apply to scheduler 'trimmer' only"),
        ({"model": "mlp", "scheduler": "round-robin", "options": {"trimmer": {"patience": 2}}}, "options",
         "apply to scheduler 'trimmer' only"),
        # the local runner's and gradient scheduler's options: were stored, then failed on the worker
        ({"model": "mlp", "options": {"window_size": "abc"}}, "options", "window_size must be an integer"),
        ({"model": "mlp", "options": {"builder_workers": 0}}, "options", "builder_workers must be an integer"),
        ({"model": "mlp", "options": {"run_timeout_s": -1}}, "options", "run_timeout_s must be a number of seconds"),
        ({"model": "mlp", "options": {"cpu_cache_flush": "abc"}}, "options", "cpu_cache_flush must be true or false"),
        # the gradient scheduler's window with Trimmer was silently ignored
        ({"model": "mlp", "scheduler": "trimmer", "options": {"window_size": 3}}, "options",
         "applies to scheduler 'gradient' only"),
        ({"model": "mlp", "runner": "doppler", "options": {"doppler": {"min_repeats": 0}}}, "options", "min_repeats"),
        ({"model": "mlp", "runner": "doppler", "options": {"doppler": {"min_repeats": "abc"}}}, "options", "DOPpler options"),
        ({"model": "mlp", "runner": "doppler", "options": {"doppler": "notadict"}}, "options", "must be an object of DOPpler settings"),
        ({"model": "mlp", "runner": "doppler", "options": {"doppler": {"devices": "tpu:7"}}}, "options", "tpu:7"),
        ({"model": "mlp", "runner": "doppler", "options": {"doppler": {"paired": True}}}, "options",
         "the DOPpler option 'paired' (paired timing against a reference kernel) was removed"),
        # found by a new-user try: CPU kernels measured on "cuda:7" and recorded as that GPU's
        ({"model": "mlp", "runner": "doppler", "options": {"doppler": {"devices": "cuda:7"}}}, "options",
         "DOPpler devices ['cuda7'] cannot measure a 'llvm' tuning"),
        ({"model": "mlp", "runner": "doppler", "options": {"doppler": {"estimator": "median"}}}, "options",
         "estimator must be one of ['mean', 'min']"),
        ({"model": "mlp", "runner": "doppler", "options": {"doppler": {"screen_repeats": "2"}}}, "options",
         "screen_repeats must be an integer"),
        ({"model": "mlp", "runner": "doppler", "options": {"doppler": {"screen_repeats": True}}}, "options",
         "screen_repeats must be an integer"),
        ({"model": "mlp", "runner": "doppler", "options": {"doppler": {"Paired": True}}}, "options",
         "unknown DOPpler option(s) ['Paired']; known: ['additive_step', 'backoff_factor', 'base_timeout_s', "
         "'build_timeout_s', 'build_workers', 'ci_rel_halfwidth', 'devices'"),
        # DOPpler settings with another runner were stored and silently ignored
        ({"model": "mlp", "options": {"doppler": {"estimator": "min"}}}, "options",
         "applies to runner 'doppler' only; this tuning uses 'local'"),
        ({"model": "mlp", "options": {"screen_ratio": 0.5}}, "options", "DOPpler settings go under 'doppler'"),
        # found by a fresh-clone try: 3e10 elements (120 GB) was accepted; contradictory budgets ran
        ({"model": "convnet", "input_shape": [1, 3, 100000, 100000]}, "input_shape", "30,000,000,000 elements"),
        ({"model": "mlp", "min_trials_per_task": 50, "max_trials_per_task": 5}, "min_trials_per_task",
         "more than max_trials_per_task (5)"),
        ({"model": "mlp", "options": {"search": {"population_size": 8}}}, "options", "search.init_min_unmeasured"),
        ({"model": "mlp", "weight_prepack": "sometimes"}, "weight_prepack", "valid boolean"),
        ({"model": "mlp", "measure_onnxruntime": "sometimes"}, "measure_onnxruntime", "Must be a valid boolean"),
    ],
)
def test_bad_tuning_parameters_are_refused_and_nothing_stored(api, params, field, message):
    resp = api.post("/api/v1/experiments/", {"kind": "tuning", "parameters": params}, format="json")
    assert resp.status_code == 400, resp.content
    assert message in resp.content.decode()
    assert field in resp.json()["parameters"]
    assert Experiment.objects.count() == 0


def test_seed_database_naming_an_existing_experiment_dir_is_refused(api, settings, tmp_path):
    """The attack of issue 24: ``../exp-<id>`` is a directory that exists (another owner's
    tuning), so a mere is_dir check let it through as a seed database."""
    settings.VAR_DIR = tmp_path / "var"
    victim = settings.VAR_DIR / "tuning" / "exp-41"
    victim.mkdir(parents=True)
    (settings.VAR_DIR / "tuning" / "databases").mkdir()
    resp = api.post("/api/v1/experiments/", {"kind": "tuning", "parameters": {"model": "mlp", "seed_database": "../exp-41"}},
                    format="json")
    assert resp.status_code == 400, resp.content
    assert "is not a database name" in resp.json()["parameters"]["seed_database"][0]
    assert Experiment.objects.count() == 0


def test_queue_follows_target():
    spec = get_experiment_kind("tuning")
    assert spec.queue_for({"target": "llvm"}) == "cpu"
    assert spec.queue_for({"target": "cuda"}) == "gpu"


def test_onnx_upload_then_tuning_experiment(api, settings, tmp_path):
    settings.VAR_DIR = tmp_path
    data = (ONNX / "light_squeezenet.onnx").read_bytes()
    resp = api.post("/api/v1/tuning/onnx/", {"file": SimpleUploadedFile("m.onnx", data)}, format="multipart")
    assert resp.status_code == 201, resp.content
    upload = resp.json()
    assert [1, 3, 224, 224] in upload["inputs"]
    bad = api.post("/api/v1/tuning/onnx/", {"file": SimpleUploadedFile("x.onnx", b"\x01garbage")}, format="multipart")
    assert bad.status_code == 400 and "not a valid ONNX model" in bad.json()["file"][0]
    settings.MAX_UPLOAD_MIB = 0  # every non-empty file is then over the limit
    big = api.post("/api/v1/tuning/onnx/", {"file": SimpleUploadedFile("m2.onnx", data)}, format="multipart")
    assert big.status_code == 400 and "over the upload limit of 0 MiB" in big.json()["file"][0]
    assert len(list((tmp_path / "tuning" / "uploads").glob("*.onnx"))) == 1


def test_other_users_tuning_is_hidden(api, django_user_model, client):
    other = django_user_model.objects.create_user("other", password="pw")
    exp = Experiment.objects.create(owner=other, kind="tuning", parameters={"model": "mlp"})
    assert api.get(f"/api/v1/tuning/experiments/{exp.pk}/").status_code == 404
    client.login(username="other", password="pw")
    page = client.get("/tuning/")
    assert page.status_code == 200 and b"Tuning" in page.content
    body = APIClient()
    body.force_authenticate(other)
    ov = body.get(f"/api/v1/tuning/experiments/{exp.pk}/").json()
    assert ov["tasks"] == [] and ov["curve"] == [] and ov["result"] is None


def test_database_from_another_target_is_refused(user, settings, tmp_path):
    """The web-llm database (measured on metal) seeded into an LLVM tuning: the run fails
    before any tuning with the target named, and its work directory gets no records."""
    from tuning.services import tuning_database_import
    from webapp.services import experiment_run
    from webapp.states import State

    settings.VAR_DIR = tmp_path
    summary = tuning_database_import(src=Path(settings.DATA_DIR) / "tvm-metaschedule-db" / "web-llm", name="web-llm")
    assert summary["records"] == 19
    exp = Experiment.objects.create(owner=user, kind="tuning", parameters={"model": "matmul", "trials": 4, "seed_database": "web-llm"})
    done = experiment_run(experiment_id=exp.pk)
    assert done.state == State.FAILED
    assert "TargetMismatch" in done.error and "'metal' vs requested 'llvm'" in done.error
    assert not (tmp_path / "tuning" / f"exp-{exp.pk}" / "database_tuning_record.json").exists()


@pytest.mark.parametrize(
    "params",
    [
        # alpha is the gradient scheduler's option too; builder_workers the local runner's
        {"model": "mlp", "scheduler": "gradient", "options": {"alpha": 0.3, "builder_workers": 1}},
        {"model": "mlp", "scheduler": "trimmer", "options": {"patience": 2, "oversample": 64, "trimmer": {}}},
    ],
)
def test_options_a_scheduler_reads_are_accepted(api, params):
    resp = api.post("/api/v1/experiments/", {"kind": "tuning", "parameters": params}, format="json")
    assert resp.status_code == 201, resp.content
    stored = Experiment.objects.get()
    assert stored.parameters["options"] == params["options"]


@pytest.mark.parametrize("raw,where", [
    ('{"model": "mlp", "scheduler": "trimmer", "options": {"energy_budget_j": 1e400}}', "options.energy_budget_j"),
    ('{"model": "mlp", "input_shape": [1, -1e999]}', "input_shape[1]"),
])
def test_an_overflowing_number_is_refused_naming_its_key(api, raw, where):
    # 1e400 is valid JSON that parses to infinity; the refusal used to be "Value must be valid JSON."
    body = '{"kind": "tuning", "parameters": ' + raw + "}"
    resp = api.post("/api/v1/experiments/", data=body, content_type="application/json")
    assert resp.status_code == 400, resp.content
    assert resp.json()["parameters"] == [f"{where}: not a finite number (a JSON number too large for a double, "
                                         "such as 1e400)"]
    assert Experiment.objects.count() == 0
