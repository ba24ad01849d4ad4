"""The ``weight-learning`` experiment kind (engine plug, :mod:`webapp.plug`): its parameters
serializer, its runner (which binds the Django-free :func:`rlweights.pipeline.run` to the
database through :func:`webapp.experiments.run_pipeline`), its headline and its registration.

Example parameters (every field optional; see :class:`rlweights.pipeline.LearnParams`)::

    {"mode": "evaluate", "azure_sample": true, "test_setups": 1, "eval_seeds": [0], "seed": 7}
    {"mode": "evaluate", "node_table": "m1,CPU,32,128,0\nm2,T4,64,256,2\n", "node_table_name": "lab",
     "workload": "app,func,end_timestamp,duration\na,f,1.5,0.5\n...", "workload_name": "fn-trace"}

Inline inputs (:mod:`rlweights.inputs`) are parsed and checked here, at submission: a bad one is
a 400 naming the parameter, and nothing is stored.
"""
from __future__ import annotations

from typing import Any

from rest_framework import serializers

from .core.env import DEFAULT_MODEL, SIM_MODELS
from .core.simulator import METRICS
from .core.workload import MAX_TRACE_ROWS
from .inputs import MAX_NODE_ROWS, NODE_TABLE_FORMATS, InputError
from .pipeline import LearnParams, check_inputs

#: Longest inline node table or workload (characters); the JSON body limit (``TANDEM_MAX_JSON_KIB``,
#: 2 MiB by default, webapp/parsers.py) usually bounds it first.
MAX_INLINE_CHARS = 16 * 2**20


class WeightLearningParams(serializers.Serializer):
    """Parameters of a ``weight-learning`` experiment (see
    :class:`rlweights.pipeline.LearnParams`; every field is optional)."""

    mode = serializers.ChoiceField(choices=["train", "evaluate"], default="train")
    train_setups = serializers.IntegerField(min_value=1, max_value=64, default=8)
    train_workloads = serializers.IntegerField(min_value=1, max_value=64, default=8)
    test_setups = serializers.IntegerField(min_value=1, max_value=64, default=3)
    test_workloads = serializers.IntegerField(min_value=1, max_value=64, default=3)
    window_s = serializers.FloatField(min_value=10, max_value=3600, default=120.0)
    metric = serializers.ChoiceField(choices=list(METRICS), default="mean",
                                     help_text="mean or p95 end-to-end latency, or mean slowdown (latency / isolated duration)")
    model = serializers.ChoiceField(choices=list(SIM_MODELS), default=DEFAULT_MODEL,
                                    help_text="workload model: serverless (processor sharing, pulls, keep-alive; default) "
                                              "or snapshot (the first, simpler model)")
    concurrency = serializers.IntegerField(min_value=1, max_value=1000, required=False, allow_null=True, default=None,
                                           help_text="invocations one container serves at a time (serverless model; default 1)")
    budget = serializers.IntegerField(min_value=2, max_value=100, default=10)
    timesteps = serializers.IntegerField(min_value=64, max_value=1_000_000, default=30_000)
    seed = serializers.IntegerField(min_value=0, max_value=2**31 - 1, default=0)
    eval_seeds = serializers.ListField(child=serializers.IntegerField(min_value=0, max_value=2**31 - 1), min_length=1,
                                       max_length=10, default=[0, 1])
    w_min = serializers.IntegerField(min_value=0, max_value=999, default=1)
    w_max = serializers.IntegerField(min_value=1, max_value=1000, default=100)
    n_stack = serializers.IntegerField(min_value=1, max_value=16, default=4)
    keep_alive_s = serializers.FloatField(min_value=0, max_value=86400, required=False, allow_null=True, default=None,
                                          help_text="idle containers are removed after this long (default: the model's, "
                                                    "600 s serverless, 60 s snapshot)")
    # a string that must be empty, not ChoiceField(choices=[""]): its schema would be an empty enum
    policy = serializers.CharField(default="", allow_blank=True, max_length=256,
                                   help_text="must be '': the shipped policy (evaluate mode); paths are not accepted")
    azure_sample = serializers.BooleanField(default=False)
    azure_speedup = serializers.FloatField(min_value=1, max_value=1000, default=10.0)
    reward = serializers.ChoiceField(choices=["step", "best"], default="step")
    cluster_id = serializers.IntegerField(required=False, min_value=1,
                                          help_text="evaluate on this registered cluster's nodes")
    node_table = serializers.CharField(
        default="", allow_blank=True, trim_whitespace=False, max_length=MAX_INLINE_CHARS,
        help_text="evaluate on this node table instead of sampled PAI setups: PAI machine-spec CSV "
                  "(machine,gpu_type,cap_cpu,cap_mem,cap_gpu; cores, GB, GPUs) or Kubernetes v1 Node YAML; "
                  f"at most {MAX_NODE_ROWS} nodes")
    node_table_format = serializers.ChoiceField(choices=list(NODE_TABLE_FORMATS), default="auto",
                                                help_text="auto: YAML when the first line is 'key:' or '---', else CSV")
    node_table_name = serializers.CharField(default="", allow_blank=True, max_length=48,
                                            help_text="names the node table in scenario names and the result")
    workload = serializers.CharField(
        default="", allow_blank=True, trim_whitespace=False, max_length=MAX_INLINE_CHARS,
        help_text="evaluate on this arrival trace instead of generated workloads: CSV with header "
                  f"app,func,end_timestamp,duration (Azure Functions 2021; seconds), replayed; at most {MAX_TRACE_ROWS} rows")
    workload_name = serializers.CharField(default="", allow_blank=True, max_length=48,
                                          help_text="names the workload in scenario names and the result")
    workload_speedup = serializers.FloatField(min_value=0.01, max_value=1000, default=1.0,
                                              help_text="replay the workload this many times faster")

    def validate_policy(self, value):
        if value != "":
            raise serializers.ValidationError(
                f"{value!r} is not accepted: leave policy empty for the shipped policy (a path is never read)")
        return value

    def validate_cluster_id(self, value):
        from webapp.models import Cluster

        c = Cluster.objects.filter(pk=value).first()
        if c is None:
            raise serializers.ValidationError(f"no cluster {value}")
        if not c.nodes.exists():
            raise serializers.ValidationError(f"cluster {c.name} has no nodes")
        return value

    def validate(self, attrs):
        from .selectors import cluster_nodes

        p = LearnParams(**{k: v for k, v in attrs.items() if k != "cluster_id"})
        if attrs.get("cluster_id") is not None:
            p.cluster = cluster_nodes(cluster_id=attrs["cluster_id"])
        try:
            check_inputs(p)
        except InputError as err:
            raise serializers.ValidationError({err.field: [err.message]}) from None
        except ValueError as err:
            raise serializers.ValidationError(str(err)) from None
        return attrs



def weight_learning_run(experiment, reporter) -> dict[str, Any]:
    """Runner of the ``weight-learning`` experiment kind: train PPO (or evaluate a saved
    policy) and compare it with the baselines on unseen setups and workloads
    (:func:`rlweights.pipeline.run`). Comparison rows are recorded per unseen scenario as they
    are measured, so a redelivered evaluate run resumes; a rerun recomputes the rest with the
    same seeds and replaces this experiment's learning-curve and weight-step rows atomically.
    Returns the summary stored as ``experiment.result``."""
    from webapp.experiments import run_pipeline

    from . import pipeline
    from .selectors import cluster_nodes
    from .services import weight_learning_store

    ser = WeightLearningParams(data=experiment.parameters)
    ser.is_valid(raise_exception=True)
    params = dict(ser.validated_data)
    cluster_id = params.pop("cluster_id", None)
    if cluster_id is not None:
        params["cluster"] = cluster_nodes(cluster_id=cluster_id)
    # a train run trains again (its policy is not kept), so its rows replace an interrupted run's;
    # an evaluate run resumes the unseen pairs it measured (rlweights.pipeline)
    result = run_pipeline(experiment, reporter, pipeline.run, params=params,
                          restart_tables=("curve", "comparison") if params["mode"] == "train" else ())
    weight_learning_store(experiment=experiment, result=result)
    return result


def weight_learning_headline(experiment):
    """``Headline`` of a succeeded weight learning: PPO's mean change of the latency metric
    against equal weights (percent, negative = lower latency) beside the best same-budget
    baseline's; ``ratio`` = PPO's latency / the best baseline's (mean over pairs), lower is
    better. ``None`` without PPO."""
    from webapp.experiments import Headline

    s = (experiment.result or {}).get("summary") or {}
    methods = s.get("methods") or {}
    best = s.get("best_baseline")
    if "ppo" not in methods or not best:
        return None
    ppo = methods["ppo"]["mean_improvement_vs_equal_percent"]
    base = methods[best]["mean_improvement_vs_equal_percent"]
    budget = ((experiment.result or {}).get("params") or {}).get("budget", "?")
    metric = ((experiment.result or {}).get("params") or {}).get("metric", "mean")
    what = "mean-slowdown" if metric == "slowdown" else f"{metric}-latency"
    # shown as the change of the latency (negative = faster than equal weights), so that the
    # figures read in the ratio's direction, lower is better (a new user read "+3.2 % vs +4.4 %,
    # ratio 1.013, lower is better" as backwards)
    return Headline(engine="rlweights", metric=f"{what} change vs equal weights (PPO)", ours=f"{-ppo:+.1f} %",
                    baseline_name=f"{best} (budget {budget})", baseline=f"{-base:+.1f} %",
                    ratio=1.0 - s["ppo_vs_best_baseline_percent"] / 100.0, better="lower",
                    note=f"ratio: PPO's latency / {best}'s, on unseen setups and workloads; paper: +33 % vs fixed, +12 % vs best")


def register() -> None:
    """Register the ``weight-learning`` kind and the rlweights demo step (``apps.py`` calls it)."""
    from django.urls import reverse

    from webapp.demo import register_demo_step
    from webapp.experiments import ExperimentKind, register_experiment_kind

    from .demo import run_demo

    register_experiment_kind(ExperimentKind(
        kind="weight-learning", run=weight_learning_run, parameters_serializer=WeightLearningParams, queue="cpu",
        headline=weight_learning_headline, page=lambda e: reverse("rlweights:experiment", args=[e.pk])))
    register_demo_step("rlweights", run_demo, order=40)
