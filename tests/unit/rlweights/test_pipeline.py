"""The rlweights pipeline (engine plug): ``run()`` in evaluate mode against metrics simulated
directly from the core, what it records, and resuming from recorded comparison rows."""
import numpy as np
import pytest

from rlweights import pipeline
from rlweights.core.cluster import cluster_setups
from rlweights.core.serverless import ServerlessConfig, simulate
from rlweights.core.simulator import SimConfig
from rlweights.core.simulator import simulate as simulate_snapshot
from rlweights.core.workload import workloads
from webapp.plug import Collect

PARAMS = {"mode": "evaluate", "test_setups": 1, "test_workloads": 2, "window_s": 20.0, "budget": 3,
          "eval_seeds": [0], "seed": 3}


@pytest.fixture(scope="module")
def evaluated():
    collect = Collect()
    progress = []
    result = pipeline.run(PARAMS, report=lambda pct, msg: progress.append(pct), record=collect)
    return result, collect.rows, progress


def test_evaluate_rows_equal_metrics_simulated_from_the_core(evaluated):
    result, _, _ = evaluated
    # the unseen set, rebuilt from the core with the seeds the pipeline documents (1000 * seed + 101 / 102)
    # and the serverless model's pair shape: 8-16 PAI nodes, 16-43x the sample's rates
    setups = cluster_setups(3101, 1, n_nodes=(8, 16), prefix="unseen")
    wls = workloads(3102, 2, length_s=20.0, rate_scale=(16.0, 43.0), prefix="unseen")
    by_name = {f"{s.name}/{w.name}": (s, w) for s in setups for w in wls}
    assert result["test_scenarios"] == list(by_name)
    rows = [r for r in result["rows"] if not r.get("skipped")]
    assert {r["method"] for r in rows} >= {"equal", "ppo", "random-search", "tpe"}
    for name, (s, w) in by_name.items():
        mine = {r["method"]: r for r in rows if r["scenario"] == name}
        eq = simulate(s, w, np.array(mine["equal"]["best_weights"]), 0, ServerlessConfig(keep_alive_s=600.0)).metric("mean")
        assert mine["equal"]["best_metric"] == pytest.approx(eq, rel=1e-12)
        for r in mine.values():
            m = simulate(s, w, np.array(r["best_weights"]), 0, ServerlessConfig(keep_alive_s=600.0)).metric("mean")
            assert r["best_metric"] == pytest.approx(m, rel=1e-12)
            assert r["improvement_vs_equal_percent"] == pytest.approx(100.0 * (eq - m) / eq, rel=1e-9)


def test_evaluate_records_one_comparison_row_per_scenario_and_reports_progress(evaluated):
    result, recorded, progress = evaluated
    assert "curve" not in recorded  # nothing trained
    comp = recorded["comparison"]
    assert [c["scenario"] for c in comp] == result["test_scenarios"]
    assert [r for c in comp for r in c["rows"]] == result["rows"]
    assert progress == sorted(progress) and progress[-1] == pytest.approx(99.0)
    assert result["train_wall_s"] == 0.0 and result["policy_train_wall_s"] > 0  # the shipped policy's own
    assert set(result["learned_weights"]) == set(result["plugins"])


def test_resume_reuses_rows_with_the_same_key_and_remeasures_the_rest(evaluated):
    result, recorded, _ = evaluated
    first, second = recorded["comparison"]
    marked = dict(first, rows=[dict(r, best_metric=-1.0) for r in first["rows"]])  # impossible value: not re-measured
    stale = dict(second, key={**second["key"], "budget": 99})  # other parameters: must be measured again
    collect = Collect()
    again = pipeline.run(PARAMS, record=collect, resume={"comparison": [marked, stale]})
    assert [r["best_metric"] for r in again["rows"] if r["scenario"] == first["scenario"]] == [-1.0] * len(first["rows"])
    assert [r for r in again["rows"] if r["scenario"] == second["scenario"]] == second["rows"]
    assert [c["scenario"] for c in collect.rows["comparison"]] == [second["scenario"]]


def test_the_snapshot_model_is_available_by_name():
    """``model="snapshot"``: the first model, with its own pair shape (3-6 nodes, 6-16x) and its
    60-s keep-alive, equal to the core's snapshot simulation."""
    params = {**PARAMS, "model": "snapshot", "test_workloads": 1}
    result = pipeline.run(params)
    s = cluster_setups(3101, 1, prefix="unseen")[0]
    w = workloads(3102, 1, length_s=20.0, prefix="unseen")[0]
    assert result["test_scenarios"] == [f"{s.name}/{w.name}"]
    assert result["params"]["model"] == "snapshot"
    for r in result["rows"]:
        m = simulate_snapshot(s, w, np.array(r["best_weights"]), 0, SimConfig(keep_alive_s=60.0)).metric("mean")
        assert r["best_metric"] == pytest.approx(m, rel=1e-12)


@pytest.mark.parametrize("bad, field", [({"model": "other"}, "model"), ({"metric": "median"}, "metric"),
                                        ({"model": "snapshot", "concurrency": 2}, "concurrency"),
                                        ({"concurrency": 0}, "concurrency"), ({"keep_alive_s": -1.0}, "keep_alive_s"),
                                        # evaluate mode trains nothing, but -1 steps is still refused (new-user try)
                                        ({"mode": "evaluate", "timesteps": -1}, "timesteps")])
def test_model_parameters_are_checked(bad, field):
    with pytest.raises(ValueError, match=field):
        pipeline.run({**PARAMS, **bad})


def test_bad_parameters_are_refused_before_any_work():
    with pytest.raises(ValueError, match="budget"):
        pipeline.run({**PARAMS, "budget": 1})
    with pytest.raises(TypeError):
        pipeline.run({**PARAMS, "no_such_field": 1})
    with pytest.raises(FileNotFoundError):
        pipeline.run({**PARAMS, "policy": "/nonexistent/policy"})
