"""The placement part of ``make demo``: several policies on a real Gavel Philly VC trace."""
from __future__ import annotations

from .experiment import run_simulations

DEMO_PARAMS = {"trace": "gavel:2869ce", "policies": ["fifo", "sjf", "gandiva", "horus", "horus+"],
               "cluster": "", "seed": 0, "limit": 0}


def comparison_table(result: dict) -> str:
    """Plain-text table of makespan, mean JCT, mean queueing delay (hours) and mean GPU
    utilisation (%) per policy."""
    lines = [f"{'policy':10s} {'makespan h':>11s} {'mean JCT h':>11s} {'mean wait h':>12s} {'GPU util %':>11s}"]
    for name, p in result["policies"].items():
        s = p["summary"]
        lines.append(f"{name:10s} {s['makespan_s'] / 3600:11.1f} {s['mean_jct_s'] / 3600:11.1f} "
                     f"{s['mean_queueing_delay_s'] / 3600:12.1f} {s['mean_gpu_util_pct']:11.1f}")
    return "\n".join(lines)


def run_placement_demo(*, owner, stdout) -> None:
    """Run the demo simulation as an experiment row owned by ``owner`` and print the table."""
    from webapp.models import Experiment
    from webapp.states import State

    exp = Experiment.objects.create(owner=owner, kind="simulation", parameters=DEMO_PARAMS,
                                    name="demo: policies on Gavel VC 2869ce")
    result = run_simulations(DEMO_PARAMS)
    exp.transition_to(State.RUNNING)
    exp.result, exp.progress = result, 100
    exp.transition_to(State.SUCCEEDED)
    exp.save()
    stdout.write(f"Placement: {result['jobs']} jobs of Gavel VC 2869ce on {result['gpus']} V100s\n")
    stdout.write(comparison_table(result) + "\n")
    stdout.write(f"See /placement/experiments/{exp.pk}/ for the figures.\n")
