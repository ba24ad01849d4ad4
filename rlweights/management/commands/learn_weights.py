"""``manage.py learn_weights``: train PPO scoring weights (or evaluate a saved policy) and
compare with the baselines on unseen setups and workloads, with a progress bar and ``--json``.

The evaluation pairs may use an operator's inputs (:mod:`rlweights.inputs`): a registered
cluster (``--cluster-id``) or a node table file (``--node-table``: PAI machine-spec CSV or
Kubernetes Node YAML), and an arrival trace in the Azure Functions 2021 shape (``--workload
PATH`` or ``--workload-csv TEXT``). They are checked before anything runs; an error names the
option."""
from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm


class Command(BaseCommand):
    help = ("Learn kube-scheduler score plugin weights with PPO (Learning to Score) and compare with equal weights, "
            "kube-scheduler defaults, random search, Optuna TPE and hill climbing on unseen setups and workloads.")

    def add_arguments(self, parser):
        from rlweights import inputs
        from rlweights.core.env import SIM_MODELS
        from rlweights.core.simulator import METRICS
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
        parser.add_argument("--metric", choices=list(METRICS), default=d.metric,
                            help="mean or p95 latency, or mean slowdown (latency / isolated duration)")
        parser.add_argument("--model", choices=list(SIM_MODELS), default=d.model,
                            help="workload model (default serverless; snapshot: the first, simpler one)")
        parser.add_argument("--keep-alive", type=float, default=None, help="container keep-alive [s] (default: the model's)")
        parser.add_argument("--concurrency", type=int, default=None,
                            help="invocations per container (serverless model; default 1)")
        parser.add_argument("--seed", type=int, default=d.seed)
        parser.add_argument("--eval-seeds", default=",".join(map(str, d.eval_seeds)))
        parser.add_argument("--reward", choices=["step", "best"], default=d.reward, help="reward of the environment")
        parser.add_argument("--azure-sample", action="store_true", help="evaluate on the real Azure 2021 sample")
        parser.add_argument("--azure-speedup", type=float, default=d.azure_speedup,
                            help="replay the Azure sample this many times faster")
        parser.add_argument("--cluster-id", type=int, default=None, help="evaluate on this registered cluster's nodes")
        parser.add_argument("--node-table", default="", metavar="PATH",
                            help="evaluate on this node table: PAI machine-spec CSV (machine,gpu_type,cap_cpu,cap_mem,cap_gpu) "
                                 f"or Kubernetes Node YAML; at most {inputs.MAX_NODE_ROWS} nodes")
        parser.add_argument("--node-table-format", choices=list(inputs.NODE_TABLE_FORMATS), default="auto",
                            help="auto: by extension (.csv pai, .yaml/.yml k8s), else by content")
        parser.add_argument("--node-table-name", default="", help="name of the node table (default: the file name)")
        wl = parser.add_mutually_exclusive_group()
        wl.add_argument("--workload", default="", metavar="PATH",
                        help="evaluate on this arrival trace (CSV, header app,func,end_timestamp,duration), replayed; "
                             f"at most {inputs.MAX_TRACE_ROWS} invocations")
        wl.add_argument("--workload-csv", default="", metavar="TEXT", help="the same trace given inline as CSV text")
        parser.add_argument("--workload-name", default="", help="name of the workload (default: the file name, or 'workload')")
        parser.add_argument("--workload-speedup", type=float, default=d.workload_speedup,
                            help="replay the workload this many times faster")
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
        options = self._input_options(o)
        node_table, node_name, node_fmt = self._node_table(o)
        workload, workload_name = self._workload(o)
        p = pipeline.LearnParams(
            mode=o["mode"], timesteps=o["timesteps"], budget=o["budget"], train_setups=o["train_setups"],
            train_workloads=o["train_workloads"], test_setups=o["test_setups"], test_workloads=o["test_workloads"],
            window_s=o["window"], metric=o["metric"], seed=o["seed"], eval_seeds=seeds, azure_sample=o["azure_sample"],
            azure_speedup=o["azure_speedup"], policy=o["policy"], reward=o["reward"], node_table=node_table,
            node_table_format=node_fmt, node_table_name=node_name, workload=workload, workload_name=workload_name,
            workload_speedup=o["workload_speedup"], model=o["model"], keep_alive_s=o["keep_alive"],
            concurrency=o["concurrency"])
        if o["cluster_id"] is not None:
            from rlweights.selectors import cluster_nodes
            from webapp.models import Cluster

            try:
                p.cluster = cluster_nodes(cluster_id=o["cluster_id"])
            except Cluster.DoesNotExist:
                raise CommandError(f"--cluster-id: no cluster {o['cluster_id']}") from None
            if not p.cluster["nodes"]:
                raise CommandError(f"--cluster-id: cluster {p.cluster['name']} has no nodes")
        try:
            pipeline.check_inputs(p)
        except pipeline.InputError as err:
            raise CommandError(f"{options.get(err.field, err.field)}: {err.message}") from None
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
            out = {k: result[k] for k in ("mode", "inputs", "learned_weights", "train_wall_s", "env_steps_per_s", "wall_s",
                                          "test_scenarios")}
            out["summary"] = s
            self.stdout.write(json.dumps(out))
            return
        for what in ("node_table", "workload"):
            d = result["inputs"][what]
            self.stdout.write(f"{what.replace('_', ' ')}: {d['name']} ({d['source']}, {d['rows']} rows, sha256 {d['sha256'][:16]}...)")
        for m, v in sorted(s["methods"].items(), key=lambda kv: -kv[1]["mean_improvement_vs_equal_percent"]):
            self.stdout.write(f"{m:14s} {v['mean_improvement_vs_equal_percent']:+7.2f}% ± {v['std']:.2f} vs equal weights")
        if "best_baseline" in s:
            self.stdout.write(f"PPO vs best baseline ({s['best_baseline']}): {s['ppo_vs_best_baseline_percent']:+.2f}%")
        self.stdout.write("learned weights: " + json.dumps(result["learned_weights"]))
        self.stdout.write(result["kube_scheduler_configuration"])

    @staticmethod
    def _input_options(o) -> dict[str, str]:
        """The command-line option of each input parameter, for error messages."""
        return {"cluster_id": "--cluster-id", "node_table": "--node-table", "node_table_format": "--node-table-format",
                "node_table_name": "--node-table-name", "workload": "--workload-csv" if o["workload_csv"] else "--workload",
                "workload_name": "--workload-name", "workload_speedup": "--workload-speedup"}

    @staticmethod
    def _default_name(path: str, fallback: str) -> str:
        from rlweights.inputs import NAME_RE

        stem = Path(path).stem[:48]
        return stem if NAME_RE.match(stem) else fallback

    def _node_table(self, o) -> tuple[str, str, str]:
        """``(text, name, format)`` of ``--node-table`` ("" when not given)."""
        from rlweights import inputs

        if not o["node_table"]:
            return "", o["node_table_name"], o["node_table_format"]
        try:
            text = inputs.read_input_file(o["node_table"], field="node_table")
        except inputs.InputError as err:
            raise CommandError(f"--node-table: {err.message}") from None
        fmt = o["node_table_format"]
        if fmt == "auto":
            fmt = {".csv": "pai", ".yaml": "k8s", ".yml": "k8s"}.get(Path(o["node_table"]).suffix.lower(), "auto")
        return text, o["node_table_name"] or self._default_name(o["node_table"], "node-table"), fmt

    def _workload(self, o) -> tuple[str, str]:
        """``(text, name)`` of ``--workload`` or ``--workload-csv`` ("" when neither is given)."""
        from rlweights import inputs

        if o["workload_csv"]:
            return o["workload_csv"], o["workload_name"]
        if not o["workload"]:
            return "", o["workload_name"]
        try:
            text = inputs.read_input_file(o["workload"], field="workload")
        except inputs.InputError as err:
            raise CommandError(f"--workload: {err.message}") from None
        return text, o["workload_name"] or self._default_name(o["workload"], "workload")

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

        from rlweights.pipeline import public_params

        parameters = public_params(p)  # inline content as its sha256 (the result's inputs name it)
        cluster = parameters.pop("cluster", None)
        if cluster is not None:
            parameters["cluster_id"] = cluster.get("id")
        exp = Experiment.objects.create(owner=user, kind="weight-learning", name="learn_weights", parameters=parameters)
        exp.transition_to(State.RUNNING)
        exp.transition_to(State.SUCCEEDED)
        exp.result, exp.progress = result, 100
        exp.save()
        weight_learning_store(experiment=exp, result=result)
        self.stderr.write(f"recorded as experiment {exp.pk}; see /rlweights/experiments/{exp.pk}/")
