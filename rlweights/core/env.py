"""gymnasium environment: one episode is one weight-optimisation experiment on one
(cluster setup, workload) pair, with a fixed number of steps.

- **Action**: ``Box(-1, 1, (7,))``, mapped to integer weights in ``[w_min, w_max]`` (default
  1..100, the range kube-scheduler accepts for score plugin weights) by
  ``w = w_min + round((a + 1) / 2 * (w_max - w_min))`` (:func:`action_to_weights`), one weight per
  plugin of :data:`rlweights.core.scheduler.SCORE_PLUGIN_NAMES`.
- **Step**: the scenario runs its workload window with those weights and measures the
  performance metric ``L`` (mean or p95 end-to-end latency in seconds, or mean slowdown; lower
  is better), by default with the serverless model (:mod:`rlweights.core.serverless`).
- **Reward**: percentage improvement over the episode's reference ``L_ref`` (the metric with
  equal weights, measured at reset): ``r = 100 * (L_ref - L) / L_ref`` (``reward="step"``,
  default). With ``reward="best"`` it is the improvement of the best metric so far,
  ``r = 100 * (L_best_before - L_best_after) / L_ref`` (>= 0), whose episode sum is the
  experiment's final improvement: it rewards exploring, as a best-of-budget experiment does.
- **Observation** (limited domain information; no cluster size, node names or workload identity):
  ``[w / w_max (7 values in (0, 1]), clip((L_ref - L) / L_ref, -1, 1), clip((L_ref - L_best) /
  L_ref, -1, 1), t / steps]`` where ``L_best`` is the best metric so far in the episode. The
  history comes from stacking frames with stable-baselines3's ``VecFrameStack``.

Equal weights are scale-invariant (the argmax of a weighted sum does not change when all weights
are multiplied), so the reference is ``[w_max] * 7``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Protocol, Sequence

import gymnasium as gym
import numpy as np

from .scheduler import SCORE_PLUGIN_NAMES, SchedulingError
from .serverless import ServerlessConfig
from .simulator import SimConfig

N_PLUGINS = len(SCORE_PLUGIN_NAMES)

#: The workload models by name: ``"serverless"`` (:mod:`rlweights.core.serverless`, the default)
#: and ``"snapshot"`` (:mod:`rlweights.core.simulator`, the first model, kept for comparison).
SIM_MODELS = {"serverless": ServerlessConfig, "snapshot": SimConfig}
DEFAULT_MODEL = "serverless"


def sim_config(model: str = DEFAULT_MODEL, **kw) -> ServerlessConfig | SimConfig:
    """The configuration of the model named ``model`` (:data:`SIM_MODELS`) with the given
    constants (e.g. ``keep_alive_s``; one left out or ``None`` takes the model's default).
    Raises ``ValueError`` for an unknown model, a constant the model does not have, or a bad
    value."""
    if model not in SIM_MODELS:
        raise ValueError(f"unknown model {model!r}; use one of {', '.join(SIM_MODELS)}")
    cls = SIM_MODELS[model]
    kw = {k: v for k, v in kw.items() if v is not None}
    unknown = set(kw) - set(cls.__dataclass_fields__) - {"model"}
    if unknown:
        raise ValueError(f"model {model!r} has no parameter(s) {', '.join(sorted(unknown))}")
    return cls(**kw)


class Scenario(Protocol):
    """Something that measures a weight vector: ``evaluate(weights) -> metric`` (lower is
    better, > 0)."""

    name: str

    def evaluate(self, weights: np.ndarray) -> float: ...


@dataclass
class SimScenario:
    """A (cluster setup, workload) pair measured by the model that ``config`` configures
    (``config.simulate``): by default the serverless model (:mod:`rlweights.core.serverless`);
    a :class:`~rlweights.core.simulator.SimConfig` selects the snapshot model. ``metric`` is
    ``"mean"`` or ``"p95"`` latency or mean ``"slowdown"``. Results are cached per weight vector
    (the simulation is deterministic)."""

    setup: object
    workload: object
    metric: str = "mean"
    seed: int = 0
    config: ServerlessConfig | SimConfig = field(default_factory=ServerlessConfig)
    _cache: dict = field(default_factory=dict, repr=False)

    @property
    def name(self) -> str:
        return f"{self.setup.name}/{self.workload.name}"

    def evaluate(self, weights: np.ndarray) -> float:
        key = tuple(int(x) for x in weights)
        if key not in self._cache:
            self._cache[key] = self.config.simulate(self.setup, self.workload, np.asarray(key), self.seed).metric(self.metric)
        return self._cache[key]


def action_to_weights(action: np.ndarray, w_min: int = 1, w_max: int = 100) -> np.ndarray:
    """Map an action in ``[-1, 1]^7`` (clipped) to integer weights in ``[w_min, w_max]``."""
    a = np.clip(np.asarray(action, dtype=float), -1.0, 1.0)
    return (w_min + np.round((a + 1.0) / 2.0 * (w_max - w_min))).astype(np.int64)


def weights_to_action(weights: np.ndarray, w_min: int = 1, w_max: int = 100) -> np.ndarray:
    """Inverse of :func:`action_to_weights` (float32)."""
    w = np.asarray(weights, dtype=float)
    return (2.0 * (w - w_min) / max(w_max - w_min, 1) - 1.0).astype(np.float32)


class WeightLearningEnv(gym.Env):
    """See the module docstring. ``scenarios``: the (setup, workload) pairs episodes are drawn
    from (uniformly, with the env's seeded generator); ``steps``: experiment length.

    Raises :class:`rlweights.core.scheduler.SchedulingError` for an invalid weight range and
    ``ValueError`` for no scenarios or ``steps < 1``.
    """

    metadata = {"render_modes": []}

    def __init__(self, scenarios: Sequence[Scenario], steps: int = 10, w_min: int = 1, w_max: int = 100,
                 reward: str = "step") -> None:
        if reward not in ("step", "best"):
            raise ValueError("reward must be 'step' or 'best'")
        self.reward_mode = reward
        if not scenarios:
            raise ValueError("need at least one scenario")
        if steps < 1:
            raise ValueError("steps must be >= 1")
        if not (isinstance(w_min, int) and isinstance(w_max, int) and 0 <= w_min < w_max):
            raise SchedulingError(f"weight range must be integers 0 <= w_min < w_max, got {w_min}..{w_max}")
        self.scenarios = list(scenarios)
        self.steps, self.w_min, self.w_max = steps, w_min, w_max
        self.action_space = gym.spaces.Box(-1.0, 1.0, (N_PLUGINS,), np.float32)
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (N_PLUGINS + 3,), np.float32)
        self.reference_weights = np.full(N_PLUGINS, w_max, np.int64)
        self.scenario: Scenario = self.scenarios[0]
        self._t = 0
        self._ref = self._best = 1.0

    def _obs(self, weights: np.ndarray, metric: float) -> np.ndarray:
        change = np.clip((self._ref - metric) / self._ref, -1, 1)
        best = np.clip((self._ref - self._best) / self._ref, -1, 1)
        return np.concatenate([weights / self.w_max, [change, best, self._t / self.steps]]).astype(np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        if options and "scenario" in options:
            self.scenario = self.scenarios[int(options["scenario"])]
        else:
            self.scenario = self.scenarios[int(self.np_random.integers(len(self.scenarios)))]
        self._t = 0
        self._ref = float(self.scenario.evaluate(self.reference_weights))
        if not self._ref > 0:
            raise ValueError(f"scenario {self.scenario.name}: reference metric must be > 0, got {self._ref}")
        self._best = self._ref
        return self._obs(self.reference_weights, self._ref), {"scenario": self.scenario.name, "reference": self._ref}

    def step(self, action):
        weights = action_to_weights(action, self.w_min, self.w_max)
        metric = float(self.scenario.evaluate(weights))
        self._t += 1
        if self.reward_mode == "step":
            reward = 100.0 * (self._ref - metric) / self._ref
        else:
            reward = 100.0 * max(self._best - metric, 0.0) / self._ref
        self._best = min(self._best, metric)
        truncated = self._t >= self.steps
        info = {"weights": weights.tolist(), "metric": metric, "reference": self._ref, "best": self._best}
        return self._obs(weights, metric), float(reward), False, truncated, info


def run_experiment(scenario: Scenario, propose: Callable[[int, list], np.ndarray], budget: int) -> list[tuple[list[int], float]]:
    """Generic optimisation experiment: ``budget`` times ask ``propose(step, history)`` for a
    weight vector and measure it; returns the history ``[(weights, metric), ...]``."""
    hist: list[tuple[list[int], float]] = []
    for t in range(budget):
        w = np.asarray(propose(t, hist), dtype=np.int64)
        hist.append((w.tolist(), float(scenario.evaluate(w))))
    return hist
