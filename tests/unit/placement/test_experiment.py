"""Simulation parameters and the Tiresias trace profiled from graph features alone."""
import re

import pytest

from placement.experiment import SimulationParams, run_simulations


@pytest.mark.parametrize("params, bad", [
    ({"trace": "gavel:zzz"}, "trace"), ({"policies": []}, "policies"), ({"policies": ["horus", "horus"]}, "policies"),
    ({"cluster": "8"}, "cluster"), ({"seed": -1}, "seed"), ({"policies": ["fifo", "astrology"]}, "policies"),
    # bounded to what the engine takes (issue 24: a limit of 10^20 was stored)
    ({"limit": 1_000_001}, "limit"), ({"limit": 10**18}, "limit"), ({"seed": 2**31}, "seed"),
])
def test_bad_parameters_are_named(params, bad):
    s = SimulationParams(data=params)
    assert not s.is_valid() and set(s.errors) == {bad}


def test_largest_limit_and_seed_are_accepted():
    s = SimulationParams(data={"limit": 1_000_000, "seed": 2**31 - 1})
    assert s.is_valid(), s.errors


def test_defaults():
    s = SimulationParams(data={})
    assert s.is_valid() and s.validated_data["policies"] == ["fifo", "gandiva", "horus"]


def test_tiresias60_with_predicted_profiles_on_a_small_cluster():
    res = run_simulations({"trace": "tiresias60", "policies": ["fifo", "horus"], "cluster": "2x4", "seed": 0})
    assert res["jobs"] == 60 and res["gpus"] == 8
    fifo, horus = (res["policies"][p]["summary"] for p in ("fifo", "horus"))
    assert fifo["jobs"] == horus["jobs"] == 60
    # on 8 GPUs the 60 jobs queue; co-location lets Horus start them sooner
    assert horus["mean_queueing_delay_s"] < fifo["mean_queueing_delay_s"]


@pytest.mark.parametrize("trace, cluster, limit, message", [
    # the review's P0: an unbounded shape used to be accepted and exhaust the worker's memory
    ("gavel:2869ce", "100000000x100000000", 0, "cluster '100000000x100000000': at most 10000 nodes"),
    ("gavel:2869ce", "10001x1", 0, "cluster '10001x1': at most 10000 nodes"),
    ("gavel:2869ce", "4x17", 0, "cluster '4x17': at most 16 GPUs per node"),
    ("gavel:2869ce", "10000x16", 0, "cluster '10000x16': 160000 GPUs, at most 100000 in all"),
    ("gavel:2869ce", "0x8", 0, "cluster '0x8': needs at least 1 node and 1 GPU per node"),
    ("gavel:2869ce", "8x0", 0, "cluster '8x0': needs at least 1 node and 1 GPU per node"),
    # first line of msr_seed0/2869ce.trace: a Transformer on 4 GPUs
    ("gavel:2869ce", "1x1", 1, "job 0 (Transformer) needs 4 GPUs but the cluster has 1; "
                               "use at least 4 GPUs in all or leave cluster empty (shaped like the trace)"),
])
def test_impossible_cluster_is_rejected_up_front(trace, cluster, limit, message):
    s = SimulationParams(data={"trace": trace, "cluster": cluster, "limit": limit, "policies": ["fifo"]})
    assert not s.is_valid()
    assert s.errors == {"cluster": [message]}


@pytest.mark.parametrize("trace, cluster, limit", [
    ("gavel:2869ce", "1x4", 1),        # job 0 needs exactly 4 GPUs
    ("gavel:2869ce", "10000x10", 1),   # exactly 100,000 GPUs
    ("philly", "47x8", 0),             # the Philly bench's 376 V100s
    ("philly", "", 0),                 # shaped like the trace
])
def test_cluster_at_the_bounds_is_accepted(trace, cluster, limit):
    s = SimulationParams(data={"trace": trace, "cluster": cluster, "limit": limit, "policies": ["fifo"]})
    assert s.is_valid(), s.errors


@pytest.mark.parametrize("cluster, message", [
    ("0x8", "needs at least 1 node and 1 GPU per node"),
    ("1x1", "job 0 (Transformer) needs 4 GPUs but the cluster has 1"),
])
def test_simulate_command_turns_bad_clusters_into_command_errors(cluster, message):
    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError, match=re.escape(message)):
        call_command("simulate", "--cluster", cluster, "--limit", "1", "--policies", "fifo", "--json")


def test_a_cancelling_reporter_stops_the_simulation_before_it_finishes():
    """The runner must consult the reporter from inside a simulation, not only between policies:
    with one policy, a reporter that raises on its second call stops the run before any
    per-job outcomes are produced (before the fix: report(0), whole run, outcomes, report(100))."""
    from webapp.experiments import ExperimentCancelled

    calls, stored = [], []

    def report(pct, msg):
        calls.append((pct, msg))
        if len(calls) == 2:
            raise ExperimentCancelled("cancelled")

    with pytest.raises(ExperimentCancelled):
        run_simulations({"trace": "gavel:2869ce", "policies": ["fifo"], "cluster": "", "seed": 0, "limit": 0},
                        report, lambda policy, jobs: stored.append(policy), report_every_s=0.0)
    assert stored == []
    assert calls[0] == (0.0, "simulating fifo (1/1)")
    assert calls[1][1].startswith("simulating fifo (1/1): ") and calls[1][0] < 100.0


def test_pipeline_records_each_policy_and_resumes_from_finished_ones(monkeypatch):
    from placement import pipeline
    from placement.core import simulator
    from webapp.plug import Collect

    params = {"trace": "gavel:51b7ef", "policies": ["fifo", "horus"], "cluster": "1x8", "seed": 0, "limit": 0}
    rec = Collect()
    first = pipeline.run(params, record=rec)
    assert [r["policy"] for r in rec.rows["policies"]] == ["fifo", "horus"]
    calls = []
    real = simulator.simulate
    monkeypatch.setattr(simulator, "simulate", lambda *a, **k: calls.append(a[2].name) or real(*a, **k))
    # an interrupted run had finished fifo only: the rerun simulates horus alone
    rec2 = Collect()
    again = pipeline.run(params, record=rec2, resume={"policies": rec.rows["policies"][:1]})
    assert calls == ["horus"]
    assert again["policies"] == first["policies"]
    assert [r["policy"] for r in rec2.rows["policies"]] == ["horus"]
    # rows of other parameters are not reused
    calls.clear()
    pipeline.run({**params, "seed": 1}, resume={"policies": rec.rows["policies"]})
    assert calls == ["fifo", "horus"]


def test_headline_is_horus_against_the_strongest_other_policy():
    from types import SimpleNamespace

    from placement.experiment import simulation_headline

    def pol(jct, world=None):
        return {"summary": {"mean_jct_s": jct, **({"world": world} if world else {})}}

    exp = SimpleNamespace(parameters={"trace": "gavel:2869ce"}, result={"policies": {
        "fifo": pol(7200.0), "random": pol(5400.0), "sjf": pol(6000.0),
        "horus": pol(3600.0, {"measured_share": 0.25, "measured_1gpu_share": 0.5})}})
    h = simulation_headline(exp)
    assert (h.baseline_name, h.ours, h.baseline) == ("random", "1.0 h", "1.5 h")
    assert h.ratio == pytest.approx(3600 / 5400) and h.verdict == "better"
    assert "75% of co-located time from measured pairs" in h.note
    assert simulation_headline(SimpleNamespace(parameters={}, result={"policies": {"fifo": pol(1.0)}})) is None


@pytest.mark.parametrize("args, message", [
    (["--policies", "fifo,bogus"], '--policies: "bogus" is not a policy; known: fifo, sjf, tiresias, gandiva'),
    (["--cluster", "abc"], "--cluster: cluster must be NxG (nodes x GPUs per node, e.g. 16x8)"),
    (["--seed", "-1", "--limit", "-2"], "--seed: Ensure this value is greater than or equal to 0.; --limit:"),
    (["--policies", ",,"], '--policies: "" is not a policy; known: fifo, sjf, tiresias, gandiva, horus, horus+, random$'),
])
def test_simulate_command_names_the_option_and_what_it_accepts(args, message):
    from django.core.management import CommandError, call_command

    pattern = re.escape(message[:-1]) + "$" if message.endswith("$") else re.escape(message)
    with pytest.raises(CommandError, match=pattern):
        call_command("simulate", *args, "--json")


def test_the_api_serializer_lists_the_known_policies():
    s = SimulationParams(data={"policies": ["horus", "nope"]})
    assert not s.is_valid()
    assert s.errors["policies"][1] == ['"nope" is not a policy; known: fifo, sjf, tiresias, gandiva, horus, horus+, random']


def test_the_api_serializer_refuses_a_comma_string_with_the_list_form():
    s = SimulationParams(data={"policies": "fifo,horus"})
    assert not s.is_valid()
    assert s.errors["policies"] == ['policies must be a JSON list of names, e.g. ["fifo", "horus"], not str '
                                    '(the simulate command takes a comma string; the API takes a list)']
