"""The three former crashes of issue 22, each with a defined, hand-worked outcome:
PodTopologySpread when no node carries the topology key (was IndexError), a function that can
never be placed (was ValueError from the simulator) and an empty window in ``compare()`` (was
ZeroDivisionError)."""
import numpy as np
import pytest

from rlweights.compare import compare, summarise
from rlweights.core.cluster import ClusterSetup
from rlweights.core.env import SimScenario
from rlweights.core.scheduler import SCORE_PLUGINS, ClusterState, Node, Pod, Scheduler, SpreadConstraint
from rlweights.core.simulator import SimConfig, simulate
from rlweights.core.workload import FunctionProfile, Workload

GiB = 2**30
MiB = 2**20
ZONE = "topology.kubernetes.io/zone"


def spread_pod():
    return Pod("new", labels={"app": "f"},
               spread_constraints=(SpreadConstraint(1, ZONE, "ScheduleAnyway", (("app", "f"),)),))


def test_spread_without_any_zone_label_scores_zero_everywhere():
    st = ClusterState([Node("a", 4000, 8 * GiB), Node("b", 2000, 4 * GiB), Node("c", 8000, 8 * GiB)])
    st.add_pod(0, Pod("f0", cpu_milli=10, labels={"app": "f"}))
    # every node lacks the key -> all ignored (kube's IgnoredNodes) -> score 0 for each
    assert SCORE_PLUGINS["PodTopologySpread"].score(spread_pod(), st, np.arange(3)).tolist() == [0, 0, 0]
    # and the whole profile still chooses: spread weighs 0 for all, LeastAllocated decides.
    # a: cpu (4000-10-0)... computed by hand with non-zero requests (pod requests 0 -> 100m/200Mi):
    # a: cpu (4000-110)*100//4000 = 97, mem (8Gi - 400Mi)*100//8Gi = 95 -> 96
    # b: cpu (2000-100)*100//2000 = 95, mem (4Gi - 200Mi)*100//4Gi = 95 -> 95
    # c: cpu (8000-100)*100//8000 = 98, mem 97 -> 97   => c
    w = {"NodeResourcesLeastAllocated": 1, "PodTopologySpread": 5}
    assert Scheduler(w, np.random.default_rng(0)).select(spread_pod(), st) == 2


def profile(name, cpu_milli, image_mib=0):
    pod = Pod(name, cpu_milli=cpu_milli, memory_bytes=256 * MiB, labels={"app": name}, cache_key=name)
    return FunctionProfile(name, f"{name}:v1", image_mib * MiB, cpu_milli, 256 * MiB, pod)


def test_function_that_never_fits_is_counted_unschedulable_not_raised():
    setup = ClusterSetup("one", [Node("n0", 4000, 8 * GiB)])
    ok, huge = profile("ok", 1000), profile("huge", 16000)  # 16 cores on a 4-core node: never fits
    wl = Workload("w", [ok, huge], np.array([0.0, 1.0, 2.0]), np.array([2.0, 3.0, 1.0]), np.array([0, 1, 0]))
    perf = simulate(setup, wl, [1] * 7, config=SimConfig(container_start_s=0.5))
    # served: t=0 cold 0.5 + 2 = 2.5; t=2 the container is busy until 2.5 -> cold, 0.5 + 1 = 1.5
    assert (perf.invocations, perf.unschedulable, perf.served) == (3, 1, 2)
    assert perf.mean_s == pytest.approx((2.5 + 1.5) / 2)
    assert perf.cold_starts == 2
    # the same for any weights: feasibility does not depend on them
    assert simulate(setup, wl, [0, 100, 0, 0, 0, 0, 0]).unschedulable == 1


def test_window_where_nothing_fits_is_defined():
    setup = ClusterSetup("one", [Node("n0", 1000, 1 * GiB)])
    wl = Workload("w", [profile("huge", 4000)], np.array([0.0, 1.0]), np.array([1.0, 1.0]), np.zeros(2, int))
    perf = simulate(setup, wl, [1] * 7)
    assert (perf.mean_s, perf.p95_s, perf.served, perf.unschedulable) == (0.0, 0.0, 0, 2)


def test_compare_skips_an_empty_window_and_summarise_counts_it():
    setup = ClusterSetup("one", [Node("n0", 4000, 8 * GiB)])
    empty = Workload("empty", [profile("ok", 1000)], np.array([]), np.array([]), np.array([], int))
    busy = Workload("busy", [profile("ok", 1000)], np.array([0.0, 0.5]), np.array([2.0, 2.0]), np.zeros(2, int))
    rows = compare([SimScenario(setup, empty), SimScenario(setup, busy)], budget=3, seeds=[0, 1])
    skipped = [r for r in rows if r.get("skipped")]
    assert [(r["scenario"], r["seed"], r["improvement_vs_equal_percent"]) for r in skipped] == [
        ("one/empty", 0, None), ("one/empty", 1, None)]
    measured = [r for r in rows if not r.get("skipped")]
    assert {r["scenario"] for r in measured} == {"one/busy"}
    eq = [r for r in measured if r["method"] == "equal"]
    assert all(r["improvement_vs_equal_percent"] == 0.0 for r in eq)
    s = summarise(rows)
    assert s["skipped_rows"] == 2
    assert s["methods"]["equal"]["mean_improvement_vs_equal_percent"] == 0.0
