"""gymnasium environment (check_env, reward on hand-computed cases) and the exported YAML."""
import numpy as np
import pytest
import yaml
from gymnasium.utils.env_checker import check_env

from rlweights.core.baselines import BASELINES, best_of
from rlweights.core.env import WeightLearningEnv, action_to_weights, weights_to_action
from rlweights.core.export import kube_scheduler_config_yaml, volcano_nodeorder_arguments, volcano_scheduler_conf_yaml
from rlweights.core.scheduler import SchedulingError


class Quadratic:
    """Metric 10 + sum((w - target)^2) / 1000: an analytic scenario whose values are easy by hand."""

    def __init__(self, target, name="quad"):
        self.target, self.name = np.asarray(target, float), name

    def evaluate(self, w):
        return 10.0 + float(np.sum((np.asarray(w, float) - self.target) ** 2)) / 1000.0


def test_check_env():
    check_env(WeightLearningEnv([Quadratic([1] * 7), Quadratic([50] * 7)], steps=5))


def test_reward_hand_computed():
    env = WeightLearningEnv([Quadratic([1] * 7)], steps=3)
    obs, info = env.reset(seed=0)
    # reference: equal weights 100 -> 10 + 7 * 99^2 / 1000 = 78.607
    assert info["reference"] == pytest.approx(78.607)
    assert obs.tolist()[:7] == [1.0] * 7
    obs, r, term, trunc, info = env.step(np.full(7, -1.0, np.float32))  # weights 1 -> metric 10
    assert info["weights"] == [1] * 7
    assert r == pytest.approx(100 * (78.607 - 10) / 78.607)  # 87.2785...
    assert obs[7] == pytest.approx((78.607 - 10) / 78.607) and not trunc
    _, r, _, trunc, _ = env.step(np.ones(7, np.float32))  # weights 100 again -> 0 %
    assert r == pytest.approx(0.0) and not trunc
    # weights 51 -> 10 + 7 * 50^2 / 1000 = 27.5 -> 100 * (78.607 - 27.5) / 78.607
    _, r, _, trunc, info = env.step(np.zeros(7, np.float32))
    assert info["weights"] == [51] * 7
    assert r == pytest.approx(100 * (78.607 - 27.5) / 78.607) and trunc
    assert info["best"] == pytest.approx(10.0)


def test_best_so_far_reward_hand_computed():
    env = WeightLearningEnv([Quadratic([1] * 7)], steps=3, reward="best")
    env.reset(seed=0)  # reference 78.607
    _, r1, *_ = env.step(np.zeros(7, np.float32))  # 27.5: best 78.607 -> 27.5
    _, r2, *_ = env.step(np.ones(7, np.float32))  # 78.607: no new best -> 0
    _, r3, *_ = env.step(np.full(7, -1.0, np.float32))  # 10: best 27.5 -> 10
    assert r1 == pytest.approx(100 * (78.607 - 27.5) / 78.607)
    assert r2 == 0.0
    assert r3 == pytest.approx(100 * 17.5 / 78.607)
    assert r1 + r2 + r3 == pytest.approx(100 * (78.607 - 10) / 78.607)  # sum = final best improvement
    with pytest.raises(ValueError):
        WeightLearningEnv([Quadratic([1] * 7)], reward="other")


def test_action_mapping_and_range_validation():
    assert action_to_weights(np.array([-1, 1, 0, -2, 2, 0.5, -0.5]), 1, 100).tolist() == [1, 100, 51, 1, 100, 75, 26]
    assert action_to_weights(weights_to_action(np.array([1, 7, 100, 33, 2, 99, 50])), 1, 100).tolist() == [1, 7, 100, 33, 2, 99, 50]
    with pytest.raises(SchedulingError):
        WeightLearningEnv([Quadratic([1] * 7)], w_min=5, w_max=5)
    with pytest.raises(ValueError):
        WeightLearningEnv([], steps=3)


@pytest.mark.parametrize("name", sorted(BASELINES))
def test_baselines_respect_budget_and_range(name):
    hist = BASELINES[name](Quadratic([20] * 7), 8, np.random.default_rng(0), 1, 100)
    assert len(hist) in (1, 8)
    if name == "kube-default":  # a fixed reference: kube's own weights, MostAllocated off (0)
        assert [list(w) for w, _ in hist] == [[1, 0, 1, 1, 2, 3, 2]]
    else:
        assert all(1 <= x <= 100 for w, _ in hist for x in w)
    assert best_of(hist)[1] == min(m for _, m in hist)


def test_hill_climbing_improves_on_quadratic():
    hist = BASELINES["hill-climbing"](Quadratic([20] * 7), 40, np.random.default_rng(0), 1, 100)
    assert best_of(hist)[1] < hist[0][1]


def test_cma_es_beats_random_search_at_the_same_budget_on_a_quadratic():
    # optimum inside the box, and on its corner (the bound itself: boundary handling matters)
    for q in (Quadratic([20, 80, 20, 80, 20, 80, 20]), Quadratic([1] * 7)):
        for seed in range(5):
            cma = BASELINES["cma-es"](q, 150, np.random.default_rng(seed), 1, 100)
            rnd = BASELINES["random-search"](q, 150, np.random.default_rng(seed), 1, 100)
            assert len(cma) == 150 and best_of(cma)[1] < best_of(rnd)[1]
    q = Quadratic([20, 80, 20, 80, 20, 80, 20])
    # partial last generation: the budget is exact; same seed, same history
    a = BASELINES["cma-es"](q, 10, np.random.default_rng(3), 1, 100)
    assert len(a) == 10 and a == BASELINES["cma-es"](q, 10, np.random.default_rng(3), 1, 100)


KNOWN_V1_SCORE_PLUGINS = {"NodeResourcesFit", "NodeResourcesBalancedAllocation", "ImageLocality", "PodTopologySpread",
                          "TaintToleration", "NodeAffinity", "InterPodAffinity", "VolumeBinding"}


def test_kube_scheduler_configuration_yaml_structure():
    w = [30, 10, 5, 80, 2, 3, 1]
    doc = yaml.safe_load(kube_scheduler_config_yaml(w))
    assert doc["apiVersion"] == "kubescheduler.config.k8s.io/v1"
    assert doc["kind"] == "KubeSchedulerConfiguration"
    (profile,) = doc["profiles"]
    assert profile["schedulerName"] == "tandem-learned"
    score = profile["plugins"]["score"]
    assert score["disabled"] == [{"name": "*"}]
    enabled = {p["name"]: p["weight"] for p in score["enabled"]}
    assert set(enabled) <= KNOWN_V1_SCORE_PLUGINS
    assert enabled == {"NodeResourcesFit": 40, "NodeResourcesBalancedAllocation": 5, "ImageLocality": 80,
                       "PodTopologySpread": 2, "TaintToleration": 3, "NodeAffinity": 1}
    assert all(isinstance(v, int) and v > 0 for v in enabled.values())
    (fit,) = [c for c in profile["pluginConfig"] if c["name"] == "NodeResourcesFit"]
    strat = fit["args"]["scoringStrategy"]
    assert strat["type"] == "RequestedToCapacityRatio"
    # shape: 10 * 30/40 = 7.5 -> 8 at utilisation 0; 10 * 10/40 = 2.5 -> 2 at 100 (round half to even)
    # 10 * 30 / 40 = 7.5 -> 8, 10 * 10 / 40 = 2.5 -> 3 (half up, fit_shape)
    assert strat["requestedToCapacityRatio"]["shape"] == [{"utilization": 0, "score": 8}, {"utilization": 100, "score": 3}]
    assert {r["name"] for r in strat["resources"]} == {"cpu", "memory"}


@pytest.mark.parametrize("w,strategy,fit_weight", [([7, 0, 1, 1, 1, 1, 1], "LeastAllocated", 7), ([0, 9, 1, 1, 1, 1, 1], "MostAllocated", 9)])
def test_single_strategy_export(w, strategy, fit_weight):
    profile = yaml.safe_load(kube_scheduler_config_yaml(w))["profiles"][0]
    assert profile["pluginConfig"][0]["args"]["scoringStrategy"]["type"] == strategy
    assert {p["name"]: p["weight"] for p in profile["plugins"]["score"]["enabled"]}["NodeResourcesFit"] == fit_weight


def test_zero_weight_plugin_left_out_and_bad_weights_rejected():
    enabled = yaml.safe_load(kube_scheduler_config_yaml([1, 0, 1, 0, 1, 1, 1]))["profiles"][0]["plugins"]["score"]["enabled"]
    assert "ImageLocality" not in {p["name"] for p in enabled}
    with pytest.raises(SchedulingError):
        kube_scheduler_config_yaml([1, 2, 3])


def test_volcano_export():
    args = volcano_nodeorder_arguments([30, 10, 5, 80, 2, 3, 1])
    assert args == {"leastrequested.weight": 30, "mostrequested.weight": 10, "balancedresource.weight": 5,
                    "imagelocality.weight": 80, "podtopologyspread.weight": 2, "tainttoleration.weight": 3,
                    "nodeaffinity.weight": 1}
    conf = yaml.safe_load(volcano_scheduler_conf_yaml([30, 10, 5, 80, 2, 3, 1]))
    nodeorder = [p for tier in conf["tiers"] for p in tier["plugins"] if p["name"] == "nodeorder"]
    assert nodeorder[0]["arguments"] == args


def test_check_env_on_the_serverless_model():
    """The environment over real scenarios of the default (serverless) model: a small PAI setup
    and a short generated window; gymnasium's checker and a step whose metric equals the model's."""
    from rlweights.core.cluster import cluster_setups
    from rlweights.core.env import SimScenario
    from rlweights.core.serverless import ServerlessConfig, simulate
    from rlweights.core.workload import workloads

    setup = cluster_setups(7, 1, n_nodes=(3, 3), prefix="chk")[0]
    wl = workloads(8, 1, length_s=10.0, prefix="chk")[0]
    sc = SimScenario(setup, wl)
    assert isinstance(sc.config, ServerlessConfig)
    env = WeightLearningEnv([sc], steps=3)
    check_env(env)
    env.reset(seed=0)
    _, _, _, _, info = env.step(np.zeros(7, np.float32))
    assert info["weights"] == [51] * 7
    assert info["metric"] == simulate(setup, wl, np.full(7, 51), 0).mean_s
