"""Workload model and simulator: the trace as documented, the generator against the sample's
statistics, and latencies worked out by hand on one- and two-node clusters."""
import numpy as np
import pytest

from rlweights.core.cluster import ClusterSetup, cluster_setups, load_pai_machines, sample_cluster_setup
from rlweights.core.scheduler import Node, Pod
from rlweights.core.simulator import SimConfig, simulate
from rlweights.core.workload import (
    FunctionProfile, Workload, WorkloadError, azure_sample_workload, function_stats, generate_workload,
    read_azure_trace,
)

MiB = 2**20
GiB = 2**30


def test_trace_matches_its_source_md():
    rows = read_azure_trace()
    assert len(rows.func_ids) == 199
    assert len(set(rows.func_ids)) == 31
    assert rows.duration_s.max() == pytest.approx(405, abs=1)
    assert (rows.arrival_s >= 0).all()


def test_generator_reproduces_per_function_rates_and_durations():
    stats = function_stats(read_azure_trace())
    rng = np.random.default_rng(7)
    length = 200 * stats.span_s
    wl = generate_workload(stats, rng, length)
    counts = np.bincount(wl.func, minlength=len(stats.func_ids))
    expected = stats.rate_per_s * length
    # Poisson: within 5 standard deviations of the sample's rate, per function
    assert np.all(np.abs(counts - expected) <= 5 * np.sqrt(expected) + 1)
    # log-normal durations: the median of ln(duration) (unaffected by the 1 ms floor) is the
    # sample's per-function mean of ln(duration); standard error of a median 1.2533 sigma / sqrt(n)
    for k in np.argsort(-counts)[:5]:
        x = np.log(wl.duration_s[wl.func == k])
        assert np.median(x) == pytest.approx(stats.log_mu[k], abs=4 * 1.2533 * stats.log_sigma[k] / np.sqrt(len(x)))
    # total rate scales with rate_scale
    wl2 = generate_workload(stats, np.random.default_rng(7), stats.span_s * 20, rate_scale=10.0)
    assert len(wl2) == pytest.approx(199 * 200, rel=0.05)


def test_generator_is_seeded_and_validates():
    stats = function_stats(read_azure_trace())
    a = generate_workload(stats, np.random.default_rng(3), 300, 5)
    b = generate_workload(stats, np.random.default_rng(3), 300, 5)
    assert np.array_equal(a.arrival_s, b.arrival_s) and np.array_equal(a.duration_s, b.duration_s)
    with pytest.raises(WorkloadError):
        generate_workload(stats, np.random.default_rng(3), -1)


def test_bad_trace_is_rejected(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("app,func,end\n1,2,3\n")
    with pytest.raises(WorkloadError):
        read_azure_trace(p)
    p.write_text("app,func,end_timestamp,duration\na,b,3,x\n")
    with pytest.raises(WorkloadError):
        read_azure_trace(p)


def test_cluster_setups_follow_pai_mix():
    machines = load_pai_machines()
    assert len(machines) == 1897  # 798+497+280+135+83+59+45 rows (wc -l)
    setups = cluster_setups(5, 3)
    assert setups[0].summary() == cluster_setups(5, 3)[0].summary()
    big = sample_cluster_setup(np.random.default_rng(0), 400, machines)
    share_p100 = sum(n.labels["alibabacloud.com/gpu-card-model"] == "P100" for n in big.nodes) / 400
    assert share_p100 == pytest.approx(798 / 1897, abs=0.08)
    with pytest.raises(ValueError):
        sample_cluster_setup(np.random.default_rng(0), 0, machines)


def one_function(usage_milli=2000, image_mib=100):
    pod = Pod("fn", cpu_milli=1000, memory_bytes=256 * MiB, images=("img:v1",), labels={"app": "fn"}, cache_key="fn")
    return FunctionProfile("fn", "img:v1", image_mib * MiB, 1000, 256 * MiB, pod, cpu_usage_milli=usage_milli)


def test_latencies_by_hand_one_node():
    setup = ClusterSetup("one", [Node("n0", 4000, 8 * GiB)])
    wl = Workload("w", [one_function()], np.array([0.0, 1.0, 5.0, 30.0]), np.array([2.0, 2.0, 1.0, 1.0]), np.zeros(4, int))
    perf = simulate(setup, wl, [1] * 7, config=SimConfig(keep_alive_s=10, pull_bandwidth_mib_s=100, container_start_s=0.5))
    # t=0: cold, pull 100 MiB at 100 MiB/s = 1 s, +0.5 s start, runs 2 s alone (2/4 cores) -> 3.5
    # t=1: first container busy -> cold; the pull is ready at 1.0 -> start 1.5; busy 2+2 = 4 cores -> x1 -> 3.5 - 1 = 2.5
    # t=5: warm (both idle until 13.5) -> 1.0;  t=30: expired -> cold, image cached -> 0.5 + 1 = 1.5
    assert perf.mean_s == pytest.approx((3.5 + 2.5 + 1.0 + 1.5) / 4)
    assert perf.p95_s == pytest.approx(2.5 + 0.85 * 1.0)  # numpy linear percentile of [1, 1.5, 2.5, 3.5]
    assert (perf.cold_starts, perf.pulls) == (3, 1)


def test_contention_slows_execution():
    setup = ClusterSetup("small", [Node("n0", 2000, 8 * GiB)])
    wl = Workload("w", [one_function(image_mib=0)], np.array([0.0, 0.0]), np.array([10.0, 10.0]), np.zeros(2, int))
    perf = simulate(setup, wl, [1] * 7, config=SimConfig(container_start_s=0.0))
    # first: 2 cores on 2 -> x1 (10 s); second: (2 + 2) / 2 = x2 (20 s)
    assert perf.mean_s == pytest.approx(15.0)
    assert perf.mean_slowdown == pytest.approx(1.5)


def test_image_locality_weight_avoids_pulls():
    nodes = [Node("has", 4000, 8 * GiB, images={"img:v1": 1000 * MiB}), Node("empty", 4000, 8 * GiB)]
    setup = ClusterSetup("two", nodes, background=[(0, Pod("bg", cpu_milli=2000))])
    wl = Workload("w", [one_function(image_mib=1000)], np.array([0.0]), np.array([1.0]), np.zeros(1, int))
    cfg = SimConfig(container_start_s=0.5)
    # ImageLocality only: "has" scores 100*(500 MiB - 23 MiB)//977 MiB = 48 vs 0 -> no pull: 0.5 + 1
    assert simulate(setup, wl, [0, 0, 0, 1, 0, 0, 0], config=cfg).mean_s == pytest.approx(1.5)
    # LeastAllocated only: "empty" is less allocated -> pull 1000 MiB at 100 MiB/s = 10 s
    assert simulate(setup, wl, [1, 0, 0, 0, 0, 0, 0], config=cfg).mean_s == pytest.approx(11.5)


def test_sample_workload_runs_on_a_pai_setup():
    wl = azure_sample_workload(np.random.default_rng(0))
    perf = simulate(cluster_setups(1, 1)[0], wl, [1] * 7)
    assert perf.invocations == 199 and perf.mean_s > 0 and perf.p95_s >= perf.mean_s


def test_azure_sample_speedup_compresses_arrivals_only():
    a = azure_sample_workload(np.random.default_rng(0))
    b = azure_sample_workload(np.random.default_rng(0), speedup=10)
    assert np.allclose(b.arrival_s * 10, a.arrival_s) and np.array_equal(a.duration_s, b.duration_s)
    with pytest.raises(WorkloadError):
        azure_sample_workload(np.random.default_rng(0), speedup=0)
