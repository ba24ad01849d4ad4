"""PPO backend (save/load with its metadata, frame-stacked policy experiment), parameter
validation, the comparison summary and the figure functions."""
import json

import numpy as np
import pytest

from rlweights import figures
from rlweights.compare import summarise
from rlweights.pipeline import SHIPPED_POLICY, LearnParams
from rlweights.backends.sb3 import PPOConfig, load_policy, make_vec_env, policy_experiment, save_policy, train_ppo


class Quadratic:
    name = "quad"

    def __init__(self, target):
        self.target = np.asarray(target, float)

    def evaluate(self, w):
        return 10.0 + float(np.sum((np.asarray(w, float) - self.target) ** 2)) / 1000.0


def test_train_save_load_and_run_policy(tmp_path):
    cfg = PPOConfig(total_timesteps=192, steps=3, n_steps=24, batch_size=32, n_stack=2, seed=3)
    model, curve, wall = train_ppo([Quadratic([10] * 7)], cfg)
    assert curve and curve[0]["timesteps"] > 0 and wall > 0
    zip_path = save_policy(model, tmp_path / "pol", cfg, extra={"note": "x"})
    meta = json.loads((tmp_path / "pol.json").read_text())
    assert meta["config"]["seed"] == 3 and meta["config"]["n_stack"] == 2 and meta["note"] == "x"
    assert zip_path.stat().st_size < 5 * 2**20
    loaded, meta2 = load_policy(tmp_path / "pol")
    hist = policy_experiment(loaded, meta2["config"], Quadratic([10] * 7), budget=5)
    assert len(hist) == 5 and hist[0][0] == [100] * 7
    # frame stacking: observations are n_stack frames of 10 values
    assert make_vec_env([Quadratic([1] * 7)], cfg).observation_space.shape == (20,)


def test_load_policy_rejects_other_plugin_order(tmp_path):
    (tmp_path / "p.json").write_text(json.dumps({"plugins": ["ImageLocality"], "config": {}}))
    (tmp_path / "p.zip").write_bytes(b"PK")  # present, so the metadata check is what fails
    with pytest.raises(ValueError):
        load_policy(tmp_path / "p")


def test_shipped_policy_is_small_and_documented():
    z = SHIPPED_POLICY.with_suffix(".zip")
    assert z.exists(), "data/rlweights/policy.zip is shipped"
    assert z.stat().st_size < 5 * 2**20
    meta = json.loads(SHIPPED_POLICY.with_suffix(".json").read_text())
    assert meta["algorithm"] == "PPO" and "seed" in meta["config"] and "learning_rate" in meta["config"]
    assert len(meta["train_scenarios"]) >= 64


@pytest.mark.parametrize("bad", [{"mode": "x"}, {"budget": 1}, {"metric": "max"}, {"w_min": 10, "w_max": 5},
                                 {"train_setups": 0}, {"eval_seeds": []}, {"timesteps": 10}])
def test_params_validation(bad):
    with pytest.raises(ValueError):
        LearnParams(**bad).validate()


def test_summarise_picks_best_baseline():
    rows = []
    for sc, eq, rs, tpe, ppo in (("a", 100, 90, 95, 80), ("b", 50, 45, 40, 45)):
        for m, v in (("equal", eq), ("random-search", rs), ("tpe", tpe), ("ppo", ppo)):
            rows.append({"scenario": sc, "seed": 0, "method": m, "best_metric": v, "improvement_vs_equal_percent": 100 * (eq - v) / eq})
    s = summarise(rows)
    # random search: (10 + 10) / 2 = 10 %; tpe: (5 + 20) / 2 = 12.5 % -> best baseline tpe
    assert s["best_baseline"] == "tpe"
    # ppo vs tpe: a 100*(95-80)/95 = 15.789..., b 100*(40-45)/40 = -12.5 -> mean 1.6447...
    assert s["ppo_vs_best_baseline_percent"] == pytest.approx((1500 / 95 - 12.5) / 2)
    assert s["ppo_vs_equal_percent"] == pytest.approx((20 + 10) / 2)


def test_figures_are_pure_and_complete():
    pts = [{"timesteps": 10 * i, "episode_reward": float(i), "best_improvement_percent": 1.0} for i in range(1, 30)]
    fig = figures.learning_curve_figure(pts, window=5)
    assert len(fig.data) == 2 and list(fig.data[1].y)[0] == pytest.approx(3.0)  # mean of 1..5
    steps = [{"step": i, "weights": {"ImageLocality": i, "NodeAffinity": 1}, "metric_s": 5.0 - i} for i in range(3)]
    assert len(figures.weights_per_step_figure(steps).data) == 3
    summ = {"methods": {"equal": {"mean_improvement_vs_equal_percent": 0.0, "std": 0.0},
                        "ppo": {"mean_improvement_vs_equal_percent": 4.0, "std": 1.0}}}
    assert list(figures.baseline_comparison_figure(summ).data[0].x) == ["equal", "ppo"]
    assert figures.learning_curve_figure([]).data[0].x == ()


def test_missing_policy_error_names_the_path_given(tmp_path):
    with pytest.raises(FileNotFoundError) as err:
        load_policy(tmp_path / "nope.zip")
    assert str(tmp_path / "nope.zip") in str(err.value) and ".json" not in str(err.value)
    (tmp_path / "half.zip").write_bytes(b"PK")  # the zip exists, its metadata does not
    with pytest.raises(FileNotFoundError) as err:
        load_policy(tmp_path / "half")
    assert f"has no metadata file '{tmp_path / 'half.json'}'" in str(err.value)
