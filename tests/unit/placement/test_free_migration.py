"""A migration that costs nothing (``migration_cost_s=0``) must not make the simulator ask the
policy again at the same instant for ever: with LAS preemption on a mixed cluster, a zero-cost
RESUME event at ``now`` re-ran the same preempt / place / migrate round without end (found by
a review; the case below hung, memory climbing)."""
from __future__ import annotations

import numpy as np

from placement.core import interference, policies, simulator
from placement.core.types import JobSpec, mixed_cluster


def _trace(rng: np.random.Generator, n: int) -> list[JobSpec]:
    jobs, t = [], 0.0
    for i in range(n):
        t += float(rng.exponential(rng.choice([5, 60, 300])))
        g = int(rng.choice([1, 1, 1, 2, 4]))
        model = str(rng.choice(["resnet", "bert", "lstm", "vgg"]))
        util = float(rng.choice([20, 40, 60, 80, 95]))
        mem = float(rng.choice([2000, 4000, 8000, 11000]))
        dur = float(rng.choice([30, 600, 3600, 20000])) * float(rng.uniform(0.5, 2))
        est = None if rng.random() < 0.3 else dur * float(rng.uniform(0.3, 3))
        arrival = float(round(t / 60) * 60) if rng.random() < 0.5 else t  # many arrive together
        jobs.append(JobSpec(i, arrival, g, dur, util, mem, model, int(rng.choice([32, 64])), est))
    return jobs


class _TooManyEvents(Exception):
    pass


def test_free_migrations_with_las_preemption_end():
    rng = np.random.default_rng(75)
    jobs = _trace(rng, int(rng.integers(20, 120)))
    gpus = mixed_cluster([("V100", 16384), ("K80", 12288), ("P100", 16384), ("V100", 16384)], 4)
    world = interference.InterferenceModel((0.1, 0.3, 0.3, 0.2, 0.5))

    def guard(done, total):  # every 100,000 events (a finished run needs a few hundred), and at the end
        if done < total:
            raise _TooManyEvents(f"{done} of {total} jobs done after 100,000 events")

    res = simulator.simulate(jobs, gpus, policies.Horus(las_thresholds=(600.0, 6000.0)), world, seed=75,
                             migration_cost_s=0.0, tick_s=600.0, progress=guard, progress_every=100_000)
    assert sorted(o.job_id for o in res.jobs) == [j.job_id for j in jobs]
    assert sum(o.migrations for o in res.jobs) > 0 and sum(o.preemptions for o in res.jobs) > 0
    assert all(o.finish >= o.arrival + o.duration - 1e-6 for o in res.jobs)
