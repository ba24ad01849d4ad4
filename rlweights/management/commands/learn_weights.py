"""``manage.py learn_weights``: train PPO scoring weights (or evaluate a saved policy) and
compare with the baselines on unseen setups and workloads, with a progress bar and ``--json``."""
from __future__ import annotations

import json
from dataclasses import asdict

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm


class Command(BaseCommand):
    help = ("Learn kube-scheduler score plugin weights with PPO (Learning to Score) and compare with equal weights, "
            "kube-scheduler defaults, random search, Optuna TPE and hill climbing on unseen setups and workloads.")

    def add_arguments(self, parser):
        from rlweights.pipeline import LearnParams

        d = LearnParams()
        parser.add_argument("--mode", choices=["train", "evaluate"], default="train")
        parser.add_argument("--timesteps", type=int, default=d.timesteps, help="PPO environment steps")
        parser.add_argument("--budget", type=int, default=d.budget, help="weight vectors measured per experiment")
        parser.add_argument("--train-setups", type=int, default=d.train_setups)
        parser.add_argument("--train-workloads", type=int, default=d.train_workloads)
        parser.add_argument("--test-setups", type=int, default=d.test_setups)
        parser.add_argument("--test-workloads", type=int, default=d.test_workloads)
        parser.add_argument("--window", type=float, default=d.window_s, help="workload window [s]")
        parser.add_argument("--metric", choices=["mean", "p95"], default=d.metric)
        parser.add_argument("--seed", type=int, default=d.seed)
        parser.add_argument("--eval-seeds", default=",".join(map(str, d.eval_seeds)))
        parser.add_argument("--reward", choices=["step", "best"], default=d.reward, help="reward of the environment")
        parser.add_argument("--azure-sample", action="store_true", help="evaluate on the real Azure 2021 sample")
        parser.add_argument("--azure-speedup", type=float, default=d.azure_speedup,
                            help="replay the Azure sample this many times faster")
        parser.add_argument("--policy", default="", help="policy to evaluate (path without .zip); default: shipped")
        parser.add_argument("--save", default="", help="save the trained policy here (path without .zip)")
        parser.add_argument("--record", action="store_true",
                            help="also store the run as a succeeded weight-learning experiment (for the dashboard)")
        parser.add_argument("--owner", default="", help="username owning the recorded experiment")
        parser.add_argument("--json", action="store_true", help="print a JSON summary instead of text")

    def handle(self, *args, **o):
        from rlweights import pipeline

        try:
            seeds = [int(x) for x in str(o["eval_seeds"]).split(",") if x.strip()]
        except ValueError:
            raise CommandError("--eval-seeds must be comma-separated integers") from None
        p = pipeline.LearnParams(
            mode=o["mode"], timesteps=o["timesteps"], budget=o["budget"], train_setups=o["train_setups"],
            train_workloads=o["train_workloads"], test_setups=o["test_setups"], test_workloads=o["test_workloads"],
            window_s=o["window"], metric=o["metric"], seed=o["seed"], eval_seeds=seeds, azure_sample=o["azure_sample"],
            azure_speedup=o["azure_speedup"], policy=o["policy"], reward=o["reward"])
        try:
            p.validate()
        except ValueError as err:
            raise CommandError(str(err)) from None
        user = self._owner(o["owner"]) if o["record"] else None
        bar = tqdm(total=100, unit="%", disable=None)

        def progress(pct, msg):
            bar.n = int(pct)
            bar.set_description(msg[:40])
            bar.refresh()

        try:
            result = pipeline.run(asdict(p), report=progress, save_to=o["save"] or None)
        except FileNotFoundError as err:
            raise CommandError(f"policy not found: {err}") from None
        finally:
            bar.close()
        if o["record"]:
            self._record(result, p, user)
        s = result["summary"]
        if o["json"]:
            out = {k: result[k] for k in ("mode", "learned_weights", "train_wall_s", "env_steps_per_s", "wall_s", "test_scenarios")}
            out["summary"] = s
            self.stdout.write(json.dumps(out))
            return
        for m, v in sorted(s["methods"].items(), key=lambda kv: -kv[1]["mean_improvement_vs_equal_percent"]):
            self.stdout.write(f"{m:14s} {v['mean_improvement_vs_equal_percent']:+7.2f}% ± {v['std']:.2f} vs equal weights")
        if "best_baseline" in s:
            self.stdout.write(f"PPO vs best baseline ({s['best_baseline']}): {s['ppo_vs_best_baseline_percent']:+.2f}%")
        self.stdout.write("learned weights: " + json.dumps(result["learned_weights"]))
        self.stdout.write(result["kube_scheduler_configuration"])

    @staticmethod
    def _owner(owner):
        """The user owning the recorded experiment; checked before any learning starts."""
        User = get_user_model()
        if owner:
            user = User.objects.filter(username=owner).first()
            if user is None:
                raise CommandError(f"no user named {owner!r} (create it, or use the demo operator: --owner operator after `make demo`)")
        else:
            user = User.objects.filter(is_superuser=True).first()
            if user is None:
                raise CommandError("--record needs --owner USERNAME or a superuser")
        return user

    def _record(self, result, p, user):
        from webapp.models import Experiment
        from webapp.states import State

        from rlweights.services import weight_learning_store

        exp = Experiment.objects.create(owner=user, kind="weight-learning", name="learn_weights",
                                        parameters=asdict(p))
        exp.transition_to(State.RUNNING)
        exp.transition_to(State.SUCCEEDED)
        exp.result, exp.progress = result, 100
        exp.save()
        weight_learning_store(experiment=exp, result=result)
        self.stderr.write(f"recorded as experiment {exp.pk}; see /rlweights/experiments/{exp.pk}/")
