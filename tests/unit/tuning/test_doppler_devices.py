"""DOPpler's device-slot parsing and options (tuning.backends.doppler; no TVM needed for CPU)."""
from __future__ import annotations

import os

import pytest

from tuning.backends.doppler import parse_devices
from tuning.core.doppler import DopplerConfig

ALLOWED = sorted(os.sched_getaffinity(0))


def test_cpu_sets_of_num_threads_cores():
    # one slot per disjoint set of num_threads cores; a remainder smaller than a set is left out
    slots = parse_devices("cpu", 1)
    assert [s.cores for s in slots] == [(c,) for c in ALLOWED]
    assert all(s.num_threads == 1 and s.kind == "cpu" for s in slots)
    whole = parse_devices("cpu", len(ALLOWED))
    assert [s.cores for s in whole] == [tuple(ALLOWED)] and whole[0].num_threads == len(ALLOWED)
    # more threads than cores: one set of all cores
    assert [s.cores for s in parse_devices("cpu", len(ALLOWED) + 5)] == [tuple(ALLOWED)]


def test_explicit_core_sets():
    first = ALLOWED[0]
    slots = parse_devices(f"cpu:{first}", 4)
    assert [(s.cores, s.num_threads, s.name) for s in slots] == [((first,), 1, f"cpu{first}")]
    if len(ALLOWED) >= 2:
        a, b = ALLOWED[:2]
        assert [s.cores for s in parse_devices(f"cpu:{a}|{b}", 1)] == [(a,), (b,)]
        assert [s.cores for s in parse_devices(f"cpu:{a}-{b}", 1)] == [tuple(range(a, b + 1))]


@pytest.mark.parametrize("bad", [f"cpu:{max(ALLOWED) + 1}", "cpu:", "tpu", "rpc://nohost", "cuda:x"])
def test_bad_devices_are_rejected(bad):
    with pytest.raises(ValueError):
        parse_devices(bad, 1)


def test_cuda_list_needs_no_probe():
    slots = parse_devices("cuda:0,1", 1)
    assert [(s.kind, s.gpu, s.name) for s in slots] == [("cuda", 0, "cuda0"), ("cuda", 1, "cuda1")]


def test_options_override_spec_defaults():
    cfg = DopplerConfig.from_options({"max_rel_error": 0.1, "backoff_factor": 0.25}, max_dop=4)
    assert (cfg.max_rel_error, cfg.backoff_factor, cfg.max_dop, cfg.sample_fraction) == (0.1, 0.25, 4, 0.20)


def test_close_removes_the_build_artifact_directory(tmp_path):
    # the engine's artifact directory is its own temporary directory: close() must not leave it
    # behind (it did: one empty /tmp/doppler-artifacts-* per tuning); work_dir stays
    from tuning.backends.doppler import DopplerEngine

    engine = DopplerEngine(parse_devices(f"cpu:{ALLOWED[0]}", 1), work_dir=tmp_path)
    artifacts = engine.artifact_dir
    assert artifacts.is_dir() and artifacts.parent != tmp_path
    (artifacts / "leftover.so").write_bytes(b"x")
    engine.close()
    assert not artifacts.exists()
    assert tmp_path.is_dir()
    engine.close()  # a second close is harmless


def test_bad_screen_and_estimator_settings_are_refused_by_name():
    from tuning.backends.doppler import engine_settings

    with pytest.raises(ValueError, match="estimator"):
        engine_settings({"estimator": "median"}, 1)
    for bad in (9, 0, True, "2", 1.5):
        with pytest.raises(ValueError, match="screen_repeats"):
            engine_settings({"screen_repeats": bad}, 1)
    _, config, _ = engine_settings({"estimator": "min", "screen_repeats": 2}, 1)
    assert config.estimator == "min" and config.screen_repeats == 2


def test_the_removed_paired_option_is_refused_with_the_reason():
    from tuning.backends.doppler import engine_settings

    for value in (True, "yes", 1):
        with pytest.raises(ValueError, match=r"'paired'.*was removed.*Paired timing \(removed\)"):
            engine_settings({"paired": value}, 1)
    # false was the default: an experiment stored with it still runs, with the only timing there is
    _, _, kwargs = engine_settings({"paired": False}, 1)
    assert "paired" not in kwargs


def test_devices_that_cannot_measure_the_target_are_refused():
    # a CPU tuning measured on "cuda:7" slots ran on the CPU and was recorded as cuda7's
    from tuning.backends.doppler import engine_settings

    with pytest.raises(ValueError, match=r"devices \['cuda7'\] cannot measure a 'llvm' tuning"):
        engine_settings({"devices": "cuda:7"}, 1, target_kind="llvm")
    with pytest.raises(ValueError, match=r"cannot measure a 'cuda' tuning"):
        engine_settings({"devices": "cpu"}, 1, target_kind="cuda")
    slots, _, _ = engine_settings({"devices": "cpu"}, 1, target_kind="llvm")
    assert {s.kind for s in slots} == {"cpu"}
    slots, _, _ = engine_settings({"devices": "cuda:0"}, 1, target_kind="cuda")  # existence: checked where it runs
    assert [s.name for s in slots] == ["cuda0"]


def test_a_gpu_index_this_machine_lacks_is_named_where_the_engine_starts():
    import tvm

    from tuning.backends.doppler.settings import check_gpus_present
    from tuning.backends.doppler.slots import SlotSpec

    index = 0
    while tvm.cuda(index).exist:  # the first index this machine does not have
        index += 1
    with pytest.raises(ValueError, match=rf"\['cuda{index}'\]: no such CUDA device on this machine"):
        check_gpus_present([SlotSpec(kind="cuda", name=f"cuda{index}", gpu=index)])
    check_gpus_present([SlotSpec(kind="cpu", name="cpu0", cores=(0,))])  # CPU slots: nothing to check
