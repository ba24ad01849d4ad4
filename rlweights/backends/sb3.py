"""stable-baselines3 PPO for the weight-learning environment (frame-stacked with
``VecFrameStack``), saving/loading the policy with its seeds and hyperparameters, and running a
trained policy as an optimisation experiment on a scenario.

PPO: Schulman et al., 2017; SB3: Raffin et al., JMLR 2021. The setup follows "Learning to
Score" (Asenov et al., arXiv 2603.10545): an episode is an optimisation experiment, the action
is the weight vector, the reward the percentage improvement, the observation stacks recent
weights and normalised performance changes.
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from rlweights.core.env import Scenario, WeightLearningEnv
from rlweights.core.scheduler import SCORE_PLUGIN_NAMES


@dataclass
class PPOConfig:
    """Training hyperparameters (stored next to the policy). ``steps``: environment steps per
    episode (the step budget minus the reference measurement at reset); ``n_stack``: frames
    stacked by ``VecFrameStack``; the rest are SB3 ``PPO`` arguments."""

    total_timesteps: int = 20_000
    steps: int = 9
    n_envs: int = 4
    n_stack: int = 4
    w_min: int = 1
    w_max: int = 100
    seed: int = 0
    learning_rate: float = 3e-4
    n_steps: int = 72
    batch_size: int = 96
    n_epochs: int = 10
    gamma: float = 0.9
    gae_lambda: float = 0.95
    ent_coef: float = 0.0
    clip_range: float = 0.2
    net_arch: list[int] = field(default_factory=lambda: [64, 64])
    reward: str = "step"

    def validate(self) -> None:
        """Raise ``ValueError`` for values PPO cannot run with."""
        if self.total_timesteps < 1 or self.steps < 1 or self.n_envs < 1 or self.n_stack < 1:
            raise ValueError("total_timesteps, steps, n_envs and n_stack must be >= 1")
        if (self.n_steps * self.n_envs) % self.batch_size:
            raise ValueError("n_steps * n_envs must be a multiple of batch_size")
        if not 0 <= self.w_min < self.w_max:
            raise ValueError("need 0 <= w_min < w_max")


def make_vec_env(scenarios: Sequence[Scenario], cfg: PPOConfig, n_envs: int | None = None, seed: int | None = None):
    """``VecFrameStack(DummyVecEnv([Monitor(WeightLearningEnv)] * n_envs), cfg.n_stack)``."""
    from stable_baselines3.common.monitor import Monitor
    from stable_baselines3.common.vec_env import DummyVecEnv, VecFrameStack

    n = n_envs or cfg.n_envs
    venv = DummyVecEnv([lambda: Monitor(WeightLearningEnv(scenarios, cfg.steps, cfg.w_min, cfg.w_max, cfg.reward)) for _ in range(n)])
    venv.seed(cfg.seed if seed is None else seed)
    return VecFrameStack(venv, cfg.n_stack)


def train_ppo(scenarios: Sequence[Scenario], cfg: PPOConfig, progress: Callable[[int, int, list], None] | None = None):
    """Train PPO on episodes drawn from ``scenarios``. Returns ``(model, curve, wall_s)``;
    ``curve`` = ``[{"timesteps", "episode_reward", "best_improvement_percent"}, ...]``, one per
    finished episode (reward summed over the episode, in percent-points). ``progress(done,
    total, curve)`` is called every rollout (it may raise to stop training)."""
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback

    cfg.validate()
    torch.set_num_threads(1)
    venv = make_vec_env(scenarios, cfg)
    curve: list[dict] = []

    class _CB(BaseCallback):
        def _on_step(self) -> bool:
            for info, done in zip(self.locals["infos"], self.locals["dones"]):
                if done and "episode" in info:
                    curve.append({"timesteps": int(self.num_timesteps), "episode_reward": float(info["episode"]["r"]),
                                  "best_improvement_percent": 100.0 * (info["reference"] - info["best"]) / info["reference"]})
            return True

        def _on_rollout_end(self) -> None:
            if progress is not None:
                progress(int(self.num_timesteps), cfg.total_timesteps, curve)

    model = PPO("MlpPolicy", venv, learning_rate=cfg.learning_rate, n_steps=cfg.n_steps, batch_size=cfg.batch_size,
                n_epochs=cfg.n_epochs, gamma=cfg.gamma, gae_lambda=cfg.gae_lambda, ent_coef=cfg.ent_coef,
                clip_range=cfg.clip_range, policy_kwargs={"net_arch": list(cfg.net_arch)}, seed=cfg.seed,
                device="cpu", verbose=0)
    t0 = time.perf_counter()
    model.learn(total_timesteps=cfg.total_timesteps, callback=_CB())
    return model, curve, time.perf_counter() - t0


def save_policy(model, path: str | Path, cfg: PPOConfig, extra: dict | None = None) -> Path:
    """Save ``<path>.zip`` (SB3 format, no replay data) and ``<path>.json`` (hyperparameters,
    seed, plugin order, weight range, library versions and ``extra``). Returns the zip path."""
    import gymnasium
    import stable_baselines3

    path = Path(path).with_suffix("")
    path.parent.mkdir(parents=True, exist_ok=True)
    model.save(str(path) + ".zip")
    meta = {"algorithm": "PPO", "config": asdict(cfg), "plugins": list(SCORE_PLUGIN_NAMES),
            "stable_baselines3": stable_baselines3.__version__, "gymnasium": gymnasium.__version__, **(extra or {})}
    Path(str(path) + ".json").write_text(json.dumps(meta, indent=2, sort_keys=True))
    return Path(str(path) + ".zip")


def load_policy(path: str | Path):
    """Load ``(model, meta)`` saved by :func:`save_policy`; ``path`` with or without ``.zip``.
    Raises ``FileNotFoundError`` naming the path the caller gave when the policy is missing (and
    the companion ``.json`` only when the ``.zip`` exists but its metadata does not), and
    ``ValueError`` (plugin order differs from this code's)."""
    from stable_baselines3 import PPO

    given = Path(path)
    path = given.with_suffix("") if given.suffix == ".zip" else given
    zip_path, json_path = Path(str(path) + ".zip"), Path(str(path) + ".json")
    if not zip_path.is_file():
        raise FileNotFoundError(f"no policy at {str(given)!r}" + (f" (looked for {str(zip_path)!r})" if zip_path != given else ""))
    if not json_path.is_file():
        raise FileNotFoundError(f"policy {str(zip_path)!r} has no metadata file {str(json_path)!r} (save_policy writes both)")
    meta = json.loads(json_path.read_text())
    if meta.get("plugins") != list(SCORE_PLUGIN_NAMES):
        raise ValueError(f"policy {path} was trained for plugins {meta.get('plugins')}, not {list(SCORE_PLUGIN_NAMES)}")
    model = PPO.load(str(path) + ".zip", device="cpu")
    return model, meta


def policy_experiment(model, cfg: PPOConfig | dict, scenario: Scenario, budget: int | None = None, seed: int = 0):
    """Run the trained policy as one optimisation experiment on ``scenario``: the reference
    (equal weights) plus ``budget - 1`` policy steps (deterministic actions, frame-stacked
    observations). Returns ``[(weights, metric), ...]`` including the reference first."""
    if isinstance(cfg, dict):
        known = set(PPOConfig.__dataclass_fields__)
        cfg = PPOConfig(**{k: v for k, v in cfg.items() if k in known})
    steps = (budget - 1) if budget else cfg.steps
    if steps < 1:
        raise ValueError("budget must be >= 2 for a policy experiment")
    run_cfg = PPOConfig(**{**asdict(cfg), "steps": steps})
    venv = make_vec_env([scenario], run_cfg, n_envs=1, seed=seed)
    obs = venv.reset()
    ref_w = [run_cfg.w_max] * len(SCORE_PLUGIN_NAMES)
    hist = [(ref_w, float(scenario.evaluate(np.asarray(ref_w))))]
    for _ in range(steps):
        action, _ = model.predict(obs, deterministic=True)
        obs, _, dones, infos = venv.step(action)
        hist.append((infos[0]["weights"], infos[0]["metric"]))
    venv.close()
    return hist
