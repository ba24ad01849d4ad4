"""The serverless lab model (rlweights.core.serverless): finish times worked out by hand for
processor sharing, a link shared by two pulls, keep-alive expiry, concurrency-limit queueing,
memory-bandwidth pressure and the slowdown metric; a property test of work conservation."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlweights.core.cluster import MEMBW_LABEL, SPEED_LABEL, ClusterSetup, NodePerf, node_performance
from rlweights.core.scheduler import Node, Pod
from rlweights.core.serverless import ServerlessConfig, run, simulate
from rlweights.core.workload import FunctionProfile, Workload

MiB = 2**20
GiB = 2**30
LEAST_ONLY = [1, 0, 0, 0, 0, 0, 0]


def fn(name, *, usage_milli=1000, request_milli=100, image_mib=0.0, membw=0.0, image=None):
    image = image or f"{name}:v1"
    pod = Pod(name, cpu_milli=request_milli, memory_bytes=128 * MiB, images=(image,), labels={"app": name},
              cache_key=name)
    return FunctionProfile(name, image, int(image_mib * MiB), request_milli, 128 * MiB, pod,
                           cpu_usage_milli=usage_milli, membw_gbs_per_cpu=membw)


def workload(functions, arrivals, durations, funcs=None):
    funcs = np.zeros(len(arrivals), int) if funcs is None else np.asarray(funcs)
    return Workload("w", functions, np.asarray(arrivals, float), np.asarray(durations, float), funcs)


def one_node(cores=1, labels=None, **kw):
    return ClusterSetup("one", [Node("n0", int(cores * 1000), 8 * GiB, labels=dict(labels or {}))], **kw)


def cfg(**kw):
    base = {"container_start_s": 0.0, "keep_alive_s": 600.0, "link_bandwidth_bytes_s": 100 * MiB}
    return ServerlessConfig(**{**base, **kw})


def test_processor_sharing_of_two_invocations_on_one_core():
    # 1 CPU, no background. A (1 s of work) arrives at 0, B (2 s) at 0.5; each uses one CPU.
    # 0 .. 0.5: A alone at rate 1 -> 0.5 left.  From 0.5 both at rate 1/2:
    # A finishes after 0.5 / (1/2) = 1.0 -> t = 1.5; B has done 0.5 by then, 1.5 left at rate 1 -> t = 3.0.
    r = run(one_node(1), workload([fn("f")], [0.0, 0.5], [1.0, 2.0]), LEAST_ONLY, config=cfg())
    assert r.start_s.tolist() == [0.0, 0.5]
    assert r.finish_s.tolist() == pytest.approx([1.5, 3.0])
    perf = r.performance
    assert perf.mean_s == pytest.approx((1.5 + 2.5) / 2)
    assert perf.mean_slowdown == pytest.approx((1.5 / 1.0 + 2.5 / 2.0) / 2)  # latency / isolated duration
    assert perf.cold_starts == 2  # concurrency 1: B needs its own container


def test_node_speed_scales_every_rate():
    # the same two invocations on a node of speed 0.5 (label): every phase takes twice as long:
    # 0 .. 1: A alone at 0.5 -> 0.5 left; then both at 0.25: A done at 1 + 2 = 3; B did 0.5, 1.5 left at 0.5 -> 6
    setup = one_node(1, labels={SPEED_LABEL: "0.5"})
    r = run(setup, workload([fn("f")], [0.0, 1.0], [1.0, 2.0]), LEAST_ONLY, config=cfg())
    assert r.finish_s.tolist() == pytest.approx([3.0, 6.0])


def test_background_and_multi_cpu_invocations_share_by_demand():
    # 4 CPUs, background busy on 3, one invocation using 2 CPUs: demand 5 > 4 -> rate 4/5 -> 1 s of work in 1.25 s
    setup = one_node(4, background_usage=[3.0])
    perf = simulate(setup, workload([fn("f", usage_milli=2000)], [0.0], [1.0]), LEAST_ONLY, config=cfg())
    assert perf.mean_s == pytest.approx(1.25)


def test_memory_bandwidth_pressure_slows_everyone_on_the_node():
    # 4 CPUs with 2 GB/s peak bandwidth (label); two one-CPU invocations drawing 2 GB/s per CPU:
    # CPU share phi = 1, demand 4 GB/s > 2 -> factor 1/2: 1 s of work takes 2 s for both
    setup = one_node(4, labels={MEMBW_LABEL: "2"})
    r = run(setup, workload([fn("f", membw=2.0)], [0.0, 0.0], [1.0, 1.0]), LEAST_ONLY, config=cfg())
    assert r.finish_s.tolist() == pytest.approx([2.0, 2.0])
    # with the background's bandwidth (2 CPUs x 1 GB/s) the demand is 6 GB/s -> factor 1/3
    setup = one_node(4, labels={MEMBW_LABEL: "2"}, background_usage=[2.0])
    r = run(setup, workload([fn("f", membw=2.0)], [0.0, 0.0], [1.0, 1.0]), LEAST_ONLY, config=cfg())
    assert r.finish_s.tolist() == pytest.approx([3.0, 3.0])


def test_two_pulls_share_one_link():
    # one node, link 100 MiB/s; f pulls 100 MiB and g 200 MiB, both from t = 0: 50 MiB/s each;
    # f's pull ends at 2 s; g has 100 MiB left, alone at 100 MiB/s -> 3 s. Ready 0.5 s later;
    # 1 s of work each on 4 CPUs (no contention): f finishes 3.5, g 4.5
    setup = one_node(4)
    wl = workload([fn("f", image_mib=100), fn("g", image_mib=200)], [0.0, 0.0], [1.0, 1.0], [0, 1])
    r = run(setup, wl, LEAST_ONLY, config=cfg(container_start_s=0.5))
    assert r.finish_s.tolist() == pytest.approx([3.5, 4.5])
    assert (r.pulls, r.placed) == (2, 2)


@pytest.mark.parametrize("second_arrival, expect_node_same, pulls", [
    # at 5 s the first pull (1000 MiB at 100 MiB/s, 0 .. 10 s) is still running: the image is not
    # local anywhere yet, so ImageLocality scores 0 on both nodes and LeastAllocated picks the
    # other node, which pulls again
    (5.0, False, 2),
    # at 11 s the pull has finished: ImageLocality sees it on the first node,
    # 100 * (1000 MiB * 1/2 nodes - 23 MiB) // 977 MiB = 48, times weight 100, beats LeastAllocated
    (11.0, True, 1),
])
def test_an_image_is_local_only_when_its_pull_finishes(second_arrival, expect_node_same, pulls):
    nodes = [Node("a", 4000, 8 * GiB), Node("b", 4000, 8 * GiB)]
    wl = workload([fn("f", image_mib=1000)], [0.0, second_arrival], [100.0, 1.0])
    r = run(ClusterSetup("two", nodes), wl, [1, 0, 0, 100, 0, 0, 0], config=cfg(container_start_s=0.5))
    assert bool(r.node[0] == r.node[1]) is expect_node_same
    assert r.pulls == pulls
    # the first is ready at 10.5 and runs 100 s alone
    assert r.finish_s[0] == pytest.approx(110.5)


@pytest.mark.parametrize("third, warm", [(20.0, False), (16.0, True), (16.001, False)])
def test_keep_alive_expiry(third, warm):
    # keep-alive 10 s, start 0.5 s, no image. t=0: cold, ready 0.5, runs to 1.5, idle from 1.5
    # (expires 11.5). t=5: warm, 5 .. 6, idle from 6, expires at 16. The third invocation finds
    # the container at exactly 16 (idle not *longer* than the keep-alive), not after it.
    wl = workload([fn("f")], [0.0, 5.0, third], [1.0, 1.0, 1.0])
    r = run(one_node(4), wl, LEAST_ONLY, config=cfg(keep_alive_s=10.0, container_start_s=0.5))
    lat = (r.finish_s - wl.arrival_s).tolist()
    assert lat == pytest.approx([1.5, 1.0, 1.0 if warm else 1.5])
    assert (r.placed, r.expired) == ((1, 0) if warm else (2, 1))


def test_concurrency_limit_queues_the_third_invocation():
    # concurrency 2, at most 1 container: three invocations at t=0 (1 s each, one CPU, 4 CPUs):
    # the container is ready at 0.5; two run together (no contention) until 1.5; the third waits
    # in the queue for a free slot and runs 1.5 .. 2.5
    wl = workload([fn("f")], [0.0, 0.0, 0.0], [1.0, 1.0, 1.0])
    r = run(one_node(4), wl, LEAST_ONLY, config=cfg(concurrency=2, max_scale=1, container_start_s=0.5))
    assert r.start_s.tolist() == pytest.approx([0.5, 0.5, 1.5])
    assert r.finish_s.tolist() == pytest.approx([1.5, 1.5, 2.5])
    assert r.placed == 1
    # without the scale limit the third gets a second container (queue 3 > 1 container x 2 slots)
    r = run(one_node(4), wl, LEAST_ONLY, config=cfg(concurrency=2, container_start_s=0.5))
    assert r.finish_s.tolist() == pytest.approx([1.5, 1.5, 1.5]) and r.placed == 2


def test_a_queued_invocation_takes_the_first_free_slot_and_the_surplus_pod_is_cancelled():
    # one node whose memory fits one pod (128 MiB each, 200 MiB node): the second invocation's
    # container cannot be placed (the first container is busy, nothing to evict); when the first
    # finishes at 1.5 the queued one runs there (1.5 .. 2.5) and the pending pod is cancelled
    setup = ClusterSetup("tiny", [Node("n0", 4000, 200 * MiB)])
    wl = workload([fn("f")], [0.0, 0.2], [1.0, 1.0])
    r = run(setup, wl, LEAST_ONLY, config=cfg(container_start_s=0.5))
    assert r.finish_s.tolist() == pytest.approx([1.5, 2.5]) and r.placed == 1


def test_idle_containers_are_evicted_for_a_pending_pod():
    # memory for one pod: f's container goes idle at 1.5; g arrives at 3: f's idle container is
    # evicted (LRU) to place g's, which is ready at 3.5 and done at 4.5
    setup = ClusterSetup("tiny", [Node("n0", 4000, 200 * MiB)])
    wl = workload([fn("f"), fn("g")], [0.0, 3.0], [1.0, 1.0], [0, 1])
    r = run(setup, wl, LEAST_ONLY, config=cfg(container_start_s=0.5))
    assert r.finish_s.tolist() == pytest.approx([1.5, 4.5])
    assert (r.placed, r.evicted) == (2, 1)


def test_slowdown_metric_by_hand():
    # 2 s of work after a 0.5-s cold start: latency 2.5, slowdown 1.25; then a 0.5-ms invocation on
    # the warm container: latency 0.0005 s over the 1-ms floor -> 0.5
    wl = workload([fn("f")], [0.0, 10.0], [2.0, 0.0005])
    perf = simulate(one_node(4), wl, LEAST_ONLY, config=cfg(container_start_s=0.5))
    assert perf.mean_slowdown == pytest.approx((1.25 + 0.5) / 2)
    assert perf.metric("slowdown") == perf.mean_slowdown
    assert perf.mean_s == pytest.approx((2.5 + 0.0005) / 2)


def test_unschedulable_function_is_counted_and_left_out():
    setup = one_node(4)
    wl = workload([fn("ok"), fn("huge", request_milli=16000)], [0.0, 1.0], [1.0, 1.0], [0, 1])
    perf = simulate(setup, wl, LEAST_ONLY, config=cfg())
    assert (perf.invocations, perf.unschedulable, perf.served) == (2, 1, 1)
    assert perf.mean_s == pytest.approx(1.0)
    empty = simulate(setup, workload([fn("huge", request_milli=16000)], [0.0], [1.0]), LEAST_ONLY, config=cfg())
    assert (empty.mean_s, empty.served) == (0.0, 0)


def test_pai_node_performance_and_labels():
    p100 = Node("p", 64000, 512 * GiB, labels={"alibabacloud.com/gpu-card-model": "P100"})
    t4 = Node("t", 96000, 512 * GiB, labels={"alibabacloud.com/gpu-card-model": "T4"})
    other = Node("o", 40000, 256 * GiB)
    # 2 sockets x 4 channels x 2400 MT/s x 8 B and 2 x 6 x 2666 MT/s x 8 B
    assert node_performance(p100) == NodePerf(0.9, 153.6, node_performance(p100).cpu, node_performance(p100).basis)
    assert node_performance(t4).membw_gbs == pytest.approx(255.936) and node_performance(t4).speed == 1.0
    assert node_performance(other).membw_gbs == pytest.approx(255.936 * 40 / 96)
    with pytest.raises(ValueError, match=SPEED_LABEL):
        node_performance(Node("x", 1000, GiB, labels={SPEED_LABEL: "fast"}))


@pytest.mark.parametrize("kw", [{"concurrency": 0}, {"max_scale": 0}, {"keep_alive_s": -1},
                                {"link_bandwidth_bytes_s": 0}, {"concurrency": 1.5}])
def test_bad_configuration_is_refused(kw):
    with pytest.raises(ValueError):
        ServerlessConfig(**kw)


@settings(max_examples=60, deadline=None)
@given(cores=st.integers(1, 6), speed=st.sampled_from([0.5, 1.0, 1.5]), background=st.integers(0, 4),
       jobs=st.lists(st.tuples(st.floats(0, 20, allow_nan=False), st.floats(0.01, 10, allow_nan=False)),
                     min_size=1, max_size=25))
def test_work_conservation(cores, speed, background, jobs):
    """Every invocation starts on arrival (one container of unlimited concurrency, no image, no
    start time), so with ``n(t)`` invocations running the node delivers ``s * n * min(1, C / (b +
    n))`` CPU-seconds of function work per second. Integrated over the finish times the
    simulation reports, that must equal the total work of the invocations; and nobody runs faster
    than one full CPU of the node."""
    arr = np.array([a for a, _ in jobs])
    work = np.array([w for _, w in jobs])
    setup = one_node(cores, labels={SPEED_LABEL: str(speed)}, background_usage=[float(background)])
    r = run(setup, workload([fn("f")], arr, work), LEAST_ONLY, config=cfg(concurrency=10_000))
    order = np.argsort(arr, kind="stable")
    start, finish = r.start_s, r.finish_s
    assert np.allclose(start, arr[order])  # the workload sorts by arrival
    w_sorted = work[order]
    times = np.unique(np.concatenate([start, finish]))
    delivered = 0.0
    for t0, t1 in zip(times[:-1], times[1:]):
        n = int(np.sum((start <= t0) & (finish > t0)))
        if n:
            delivered += speed * n * min(1.0, cores / (background + n)) * (t1 - t0)
    assert delivered == pytest.approx(float(work.sum()), rel=1e-6)
    assert np.all(finish - start >= w_sorted / speed - 1e-9)


def test_other_real_node_tables_by_name():
    from rlweights.core.cluster import cluster_setups, load_node_table

    # data/tiresias-sim/n32g4.csv: 1 switch x 32 nodes, 4 GPUs, 40 CPUs, 256 GB each
    m = load_node_table("tiresias-n32g4")
    assert len(m) == 32 and {(x.cpu_cores, x.memory_gib, x.gpus) for x in m} == {(40, 256, 4)}
    # n160g8.csv: 5 switches x 32 nodes of 128 CPUs
    assert len(load_node_table("tiresias-n160g8")) == 160
    s = cluster_setups(3, 1, n_nodes=(4, 4), table="tiresias-n32g4")[0]
    assert [n.cpu_milli for n in s.nodes] == [40000] * 4
    # unknown CPU: reference speed, reference bandwidth per CPU
    assert [p.speed for p in s.node_perf()] == [1.0] * 4
    with pytest.raises(ValueError, match="unknown node table"):
        load_node_table("nope")
