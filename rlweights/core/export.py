"""Export a learned weight vector as kube-scheduler and Volcano configuration.

**KubeSchedulerConfiguration** (``kubescheduler.config.k8s.io/v1``; schema:
pkg/scheduler/apis/config/v1 and the docs page "Scheduler Configuration"): one profile whose
``plugins.score`` disables every default score plugin (``name: '*'``) and enables the seven
modelled ones with their weights. In v1 LeastAllocated and MostAllocated are the two scoring
strategies of the one plugin ``NodeResourcesFit``, so their pair of weights ``(wL, wM)`` is
written as:

- ``wM == 0``: ``NodeResourcesFit`` weight ``wL``, ``scoringStrategy.type: LeastAllocated``;
- ``wL == 0``: weight ``wM``, ``MostAllocated``;
- both > 0: weight ``W = wL + wM`` with ``RequestedToCapacityRatio`` and the two-point shape
  :func:`rlweights.core.scheduler.fit_shape` (``utilization 0 -> 10 * wL / W``,
  ``utilization 100 -> 10 * wM / W``, rounded to kube's integer shape scores 0..10). The model
  (:class:`rlweights.core.scheduler.Scheduler`) scores such a pair with kube's own
  RequestedToCapacityRatio arithmetic for that shape, so the exported configuration means what
  the model measured (tests/unit/rlweights/test_export_fidelity.py).

Every exported weight is in ``1..100`` (:data:`rlweights.core.scheduler.MAX_PLUGIN_WEIGHT`):
``wL + wM`` can reach 200 with learned weights of 1..100, and the export API takes weights up
to 1000, so the profile's weights are brought into range together by
:func:`rlweights.core.scheduler.kube_profile_weights` (unchanged when all are <= 100; an exact
uniform rescale when a common divisor allows it, which keeps every node choice; otherwise a
rounded rescale, and the model then scores those rounded weights, so the exported
configuration still chooses the node the model chose).

Weights of 0 leave a plugin out (kube-scheduler needs positive weights). ``InterPodAffinity``
is not modelled, so the export disables it with the other defaults.

**Volcano** ``nodeorder`` plugin (volcano-sh/volcano pkg/scheduler/plugins/nodeorder): its
arguments ``leastrequested.weight``, ``mostrequested.weight``, ``balancedresource.weight``,
``imagelocality.weight``, ``podtopologyspread.weight``, ``tainttoleration.weight``,
``nodeaffinity.weight`` inside a ``volcano-scheduler.conf`` tier, brought into ``0..100`` the
same way (:func:`rlweights.core.scheduler.in_range_weights` over the seven weights; 0 = off).
Volcano sums ``leastrequested`` and ``mostrequested`` as two plugins, which is not the
model's ``RequestedToCapacityRatio`` when both weigh > 0: only the kube-scheduler export is held
to the model's node choice.
"""
from __future__ import annotations

import yaml

from .scheduler import (MAX_CUSTOM_PRIORITY_SCORE, MAX_PLUGIN_WEIGHT, SCORE_PLUGIN_NAMES, fit_shape, in_range_weights,
                        kube_profile_weights, weights_vector)

API_VERSION = "kubescheduler.config.k8s.io/v1"
__all__ = ["MAX_CUSTOM_PRIORITY_SCORE", "MAX_PLUGIN_WEIGHT", "kube_scheduler_config", "kube_scheduler_config_yaml",
           "volcano_nodeorder_arguments", "volcano_scheduler_conf_yaml"]

VOLCANO_ARGS = {
    "NodeResourcesLeastAllocated": "leastrequested.weight",
    "NodeResourcesMostAllocated": "mostrequested.weight",
    "NodeResourcesBalancedAllocation": "balancedresource.weight",
    "ImageLocality": "imagelocality.weight",
    "PodTopologySpread": "podtopologyspread.weight",
    "TaintToleration": "tainttoleration.weight",
    "NodeAffinity": "nodeaffinity.weight",
}


def kube_scheduler_config(weights, scheduler_name: str = "tandem-learned") -> dict:
    """The ``KubeSchedulerConfiguration`` as a dict (see module docstring). ``weights`` as for
    :func:`rlweights.core.scheduler.weights_vector` (raises ``SchedulingError`` if invalid)."""
    w = dict(zip(SCORE_PLUGIN_NAMES, (int(x) for x in weights_vector(weights))))
    wl, wm = w["NodeResourcesLeastAllocated"], w["NodeResourcesMostAllocated"]
    profile_weights = kube_profile_weights(weights)
    enabled = []
    plugin_config = []
    resources = [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]
    if wl or wm:
        enabled.append({"name": "NodeResourcesFit", "weight": profile_weights["NodeResourcesFit"]})
        if wm == 0:
            strategy = {"type": "LeastAllocated", "resources": resources}
        elif wl == 0:
            strategy = {"type": "MostAllocated", "resources": resources}
        else:
            strategy = {
                "type": "RequestedToCapacityRatio", "resources": resources,
                "requestedToCapacityRatio": {"shape": [
                    {"utilization": u, "score": sc} for u, sc in fit_shape(wl, wm)]},
            }
        plugin_config.append({"name": "NodeResourcesFit", "args": {"scoringStrategy": strategy}})
    for name in SCORE_PLUGIN_NAMES[2:]:
        if w[name] > 0:
            enabled.append({"name": name, "weight": profile_weights[name]})
    profile = {
        "schedulerName": scheduler_name,
        "plugins": {"score": {"disabled": [{"name": "*"}], "enabled": enabled}},
    }
    if plugin_config:
        profile["pluginConfig"] = plugin_config
    return {"apiVersion": API_VERSION, "kind": "KubeSchedulerConfiguration", "profiles": [profile]}


def kube_scheduler_config_yaml(weights, scheduler_name: str = "tandem-learned") -> str:
    """:func:`kube_scheduler_config` as YAML (PyYAML, keys in schema order)."""
    return yaml.safe_dump(kube_scheduler_config(weights, scheduler_name), sort_keys=False)


def volcano_nodeorder_arguments(weights) -> dict[str, int]:
    """The ``nodeorder`` plugin arguments ``{"leastrequested.weight": ..., ...}``, each in
    ``0..100`` (:func:`rlweights.core.scheduler.in_range_weights` over the seven weights)."""
    w = in_range_weights(weights_vector(weights), MAX_PLUGIN_WEIGHT)
    return {VOLCANO_ARGS[n]: int(x) for n, x in zip(SCORE_PLUGIN_NAMES, w)}


def volcano_scheduler_conf_yaml(weights) -> str:
    """A ``volcano-scheduler.conf`` with the default actions and tiers, ``nodeorder`` weighted."""
    conf = {
        "actions": "enqueue, allocate, backfill",
        "tiers": [
            {"plugins": [{"name": "priority"}, {"name": "gang"}, {"name": "conformance"}]},
            {"plugins": [{"name": "drf"}, {"name": "predicates"}, {"name": "proportion"},
                         {"name": "nodeorder", "arguments": volcano_nodeorder_arguments(weights)}]},
        ],
    }
    return yaml.safe_dump(conf, sort_keys=False)
