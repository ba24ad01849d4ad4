"""Bad input to the placement core: never-placeable jobs, non-finite fields, empty traces.

The never-placeable case (issue 21): a job needing 3 GPUs x 20 GiB passes "fewer GPUs than the
cluster and less memory than the largest GPU", but only 2 GPUs have 32 GiB, so no policy can
ever start it. Tiresias's re-evaluation tick used to loop for ever on it.
"""
import math
import re

import numpy as np
import pytest

from placement import pipeline
from placement.core import interference, simulator, traces
from placement.core.policies import POLICIES, make_policy
from placement.core.types import GPUSpec, JobSpec

FLAT = interference.InterferenceModel((np.log(1.5), 0, 0, 0, 0))
MAX_EVENTS = 20_000  # the trace below needs well under 100 events; a loop would pass this


def mixed_cluster() -> list[GPUSpec]:
    """Node 0: two 32 GiB GPUs; node 1: four 16 GiB GPUs."""
    return [GPUSpec(0, 0, "V100", 32768.0), GPUSpec(1, 0, "V100", 32768.0)] + \
        [GPUSpec(i, 1, "V100", 16384.0) for i in range(2, 6)]


def trace_with_impossible_job() -> list[JobSpec]:
    ok = [JobSpec(i, 10.0 * i, 1, 500.0, 40.0, 4000.0, model=f"small{i}") for i in range(4)]
    return ok + [JobSpec(4, 5.0, 3, 1000.0, 60.0, 20480.0, model="big-bert")]


#: Every policy as its class builds it, and Horus as simulations run it (LAS levels with
#: preemption, the pair belief and its bound: :func:`placement.pipeline.simulation_policy`).
NAMES = sorted(POLICIES) + ["horus (simulated)"]


def policy(name: str):
    return pipeline.simulation_policy("horus") if name == "horus (simulated)" else make_policy(name)


def bounded(limit: int = MAX_EVENTS):
    """A progress callback that stops a run past ``limit`` events (a hang guard counted in
    events, not seconds)."""
    seen = {"events": 0}

    def progress(done, total):
        seen["events"] += 8
        if seen["events"] > limit:
            raise AssertionError(f"simulation still running after {limit} events")
    return progress


@pytest.mark.parametrize("name", NAMES)
def test_never_placeable_job_is_named_before_the_run(name):
    with pytest.raises(simulator.NeverPlaceableError, match=r"job 4 \(big-bert\) needs 3 GPUs x 20480 MiB; "
                       r"2 of the cluster's 6 GPUs") as err:
        simulator.simulate(trace_with_impossible_job(), mixed_cluster(), policy(name), FLAT,
                           progress=bounded(), progress_every=8)
    assert err.value.jobs == [(4, "big-bert")]


@pytest.mark.parametrize("name", NAMES)
def test_never_placeable_job_is_named_by_the_run_itself(name, monkeypatch):
    # without the upfront check, the run itself must notice that the job can never start
    # (nothing running, nothing arriving) and stop, naming it, in a bounded number of events
    monkeypatch.setattr(simulator, "never_placeable", lambda jobs, gpus: [])
    with pytest.raises(simulator.NeverPlaceableError, match=re.escape(name.split()[0]) + r": 1 job\(s\) can never be placed.*"
                       r"job 4 \(big-bert\)") as err:
        simulator.simulate(trace_with_impossible_job(), mixed_cluster(), policy(name), FLAT,
                           progress=bounded(), progress_every=8)
    assert err.value.jobs == [(4, "big-bert")]


def test_placeable_variant_runs_under_every_policy():
    # the same trace with the big job at 3 x 16 GiB fits (2 x 32 GiB + 4 x 16 GiB GPUs): the
    # check must not refuse what can run
    jobs = trace_with_impossible_job()[:4] + [JobSpec(4, 5.0, 3, 1000.0, 60.0, 16384.0, model="big-bert")]
    assert simulator.never_placeable(jobs, mixed_cluster()) == []
    for name in NAMES:
        r = simulator.simulate(jobs, mixed_cluster(), policy(name), FLAT, progress=bounded(), progress_every=8)
        assert sorted(o.job_id for o in r.jobs) == [0, 1, 2, 3, 4], name
        assert r.summary()["makespan_s"] >= 1000.0


@pytest.mark.parametrize("field", ["arrival", "duration", "util", "memory_mib"])
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_job_fields_are_refused(field, bad):
    kw = dict(job_id=7, arrival=0.0, num_gpus=1, duration=100.0, util=50.0, memory_mib=1000.0)
    kw[field] = bad
    with pytest.raises(ValueError, match=f"job 7: {field} must be a finite number"):
        JobSpec(**kw)


def test_negative_arrival_and_non_numbers_are_refused():
    with pytest.raises(ValueError, match="arrival must be >= 0"):
        JobSpec(0, -1.0, 1, 10.0, 1.0, 1.0)
    with pytest.raises(ValueError, match="duration must be a finite number"):
        JobSpec(0, 0.0, 1, "10", 1.0, 1.0)
    # numpy scalars are numbers
    assert JobSpec(0, np.float32(1.5), 1, np.int64(10), np.float64(1.0), 1).duration == 10


def test_empty_trace_is_refused_with_a_clear_error():
    with pytest.raises(ValueError, match="empty trace: no jobs to simulate"):
        simulator.simulate([], mixed_cluster(), make_policy("horus"), FLAT)
    with pytest.raises(ValueError, match="empty trace"):
        traces.cluster_for_trace([])


def test_empty_philly_file_is_refused(tmp_path):
    p = tmp_path / "philly.csv"
    p.write_text("timestamp,duration,num_gpus,gpu_time,cluster\n")
    with pytest.raises(traces.TraceError, match="empty trace"):
        traces.read_philly(p, [("ResNet-18", 16)], lambda m, b: (10.0, 100.0))


def test_history_estimates_use_only_jobs_ended_before_arrival():
    jobs = [JobSpec(0, 0.0, 1, 100.0, 1, 1), JobSpec(1, 50.0, 1, 300.0, 1, 1), JobSpec(2, 150.0, 1, 10.0, 1, 1),
            JobSpec(3, 400.0, 2, 10.0, 1, 1), JobSpec(4, 1000.0, 1, 10.0, 1, 1)]
    est = {j.job_id: j.estimate for j in traces.history_estimates(jobs, default_s=999.0)}
    # job 0: nothing ended -> default; job 1 (t=50): job 0 ends at 100 -> default; job 2
    # (t=150): job 0 ended -> 100; job 3 (t=400, 2 GPUs): no 2-GPU history, any size: jobs 0
    # and 2 ended (1 ends at 350 too) -> median(100, 10, 300) = 100; job 4: 1-GPU jobs 0, 1, 2
    # and 2-GPU job 3 ended -> 1-GPU median(100, 300, 10) = 100
    assert est == {0: 999.0, 1: 999.0, 2: 100.0, 3: 100.0, 4: 100.0}


def test_sjf_plans_with_the_estimate_unless_oracle_is_asked():
    # two jobs wait for one GPU; the estimate says job 2 is short, the truth says job 1 is
    jobs = [JobSpec(0, 0.0, 1, 10.0, 1, 1, estimate=10.0), JobSpec(1, 1.0, 1, 5.0, 1, 1, estimate=50.0),
            JobSpec(2, 2.0, 1, 40.0, 1, 1, estimate=4.0)]
    from placement.core.types import homogeneous_cluster

    est = simulator.simulate(jobs, homogeneous_cluster(1, 1), make_policy("sjf"), FLAT)
    orc = simulator.simulate(jobs, homogeneous_cluster(1, 1), make_policy("sjf"), FLAT, durations="oracle")
    start = lambda r: {o.job_id: o.start for o in r.jobs}  # noqa: E731
    assert start(est) == {0: 0.0, 2: 10.0, 1: 50.0}
    assert start(orc) == {0: 0.0, 1: 10.0, 2: 15.0}
    assert (est.summary()["durations"], orc.summary()["durations"]) == ("estimate", "oracle")
    with pytest.raises(ValueError, match="durations must be"):
        simulator.simulate(jobs, homogeneous_cluster(1, 1), make_policy("sjf"), FLAT, durations="psychic")
    with pytest.raises(ValueError, match="estimate must be a finite number > 0"):
        JobSpec(0, 0.0, 1, 1.0, 1, 1, estimate=math.nan)
