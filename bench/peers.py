"""The Stable-Baselines3 side of the benchmarks: each peer built with the settings its benchmark
page lists, trained to a budget with greedy evaluations at fixed points (:class:`Protocol`), and
read back as a :class:`PeerRun`: the curve of (env step, wall seconds, value), the same points
:meth:`bench.OursRun.curve` gives for ours, and where training ended.

Stable-Baselines3 is an optional extra (``pip install -e ".[bench]"``): it is imported only when a
peer is built, and :func:`missing` says in one line that it is absent, before a benchmark starts.
Wall seconds count from the start of training (model construction excluded, unless the peer says
otherwise) and include the evaluations.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

Curve = list[tuple[int, float, float]]
INSTALL = 'stable-baselines3 is not installed (a benchmark extra: pip install -e ".[bench]")'
# CartPole as her_rl's env table has it: the PPO peer is evaluated by the runner's own evaluate().
CARTPOLE = {"name": "cartpole", "id": "CartPole-v1", "kwargs": {}, "solved_return": 475}
SB3_LEARNING_STARTS = 1_000  # DQN and SAC: a few dozen complete episodes before the first update


def missing() -> str | None:
    """None when Stable-Baselines3 imports, else the line that says how to install it."""
    try:
        import stable_baselines3  # noqa: F401
    except ImportError:
        return INSTALL
    return None


@dataclass(frozen=True)
class Protocol:
    """When a peer is evaluated and when its training ends."""

    every: int  # env steps between evaluations (per_rollout: rollouts)
    steps: int  # env-step budget (also the length of SB3's schedules)
    target: float | None = None  # end at the first evaluation >= target; None: run the budget
    max_seconds: float | None = None  # wall cap, checked at every env step ...
    cap_at_evals: bool = False  # ... or only at evaluations (a capped run then ends on one)
    per_rollout: bool = False  # on-policy learners: evaluate after every `every`-th rollout


@dataclass
class PeerRun:
    curve: Curve  # every evaluation: (env step, wall s, value), rounded as OursRun.curve
    env_steps: int  # where training ended
    wall_s: float


def train(model: Any, evaluate: Callable[[Any, int], float], protocol: Protocol, name: str,
          started: float | None = None) -> PeerRun:
    """``model.learn`` to the budget, ``evaluate(model, k)`` at the k-th evaluation (k = 1, 2, ...).
    ``started``: the ``time.perf_counter()`` wall seconds count from (default: training's start)."""
    from stable_baselines3.common.callbacks import BaseCallback

    curve: Curve = []
    clock = {"start": started}

    def over_time() -> bool:
        return protocol.max_seconds is not None and time.perf_counter() - clock["start"] >= protocol.max_seconds

    class Evaluations(BaseCallback):
        stop = False
        rollouts = 0

        def _on_training_start(self) -> None:
            if clock["start"] is None:
                clock["start"] = time.perf_counter()

        def _on_step(self) -> bool:
            if not protocol.per_rollout and self.num_timesteps % protocol.every == 0:
                self._evaluate()
            if not protocol.cap_at_evals:
                self.stop = self.stop or over_time()
            return not self.stop

        def _on_rollout_end(self) -> None:
            self.rollouts += 1
            if protocol.per_rollout and self.rollouts % protocol.every == 0:
                self._evaluate()

        def _evaluate(self) -> None:
            value = evaluate(self.model, len(curve) + 1)
            elapsed = time.perf_counter() - clock["start"]
            curve.append((int(self.num_timesteps), round(elapsed, 2), round(float(value), 3)))
            print(f"[sb3] {name}: {self.num_timesteps:,} steps, {elapsed:.1f} s, eval {value:.2f}",
                  file=sys.stderr, flush=True)
            reached = protocol.target is not None and value >= protocol.target
            self.stop = reached or (protocol.cap_at_evals and over_time())

    model.learn(total_timesteps=protocol.steps, callback=Evaluations())
    return PeerRun(curve, int(model.num_timesteps), time.perf_counter() - clock["start"])


# ---------------------------------------------------------------- evaluation protocols


def success_any_step(model: Any, envs: list, seed: int) -> float:
    """Greedy success rate, one episode on each env (``env.reset(seed=seed + i)``), all stepped in
    lock-step with one batched predict; an episode succeeds at any step with ``is_success``."""
    obs = [env.reset(seed=seed + i)[0] for i, env in enumerate(envs)]
    live = list(range(len(envs)))
    success = np.zeros(len(envs), dtype=bool)
    while live:
        batch = {k: np.stack([obs[i][k] for i in live]) for k in obs[live[0]]}
        actions, _ = model.predict(batch, deterministic=True)
        still = []
        for i, a in zip(live, actions):
            obs[i], _, terminated, truncated, info = envs[i].step(int(a))
            success[i] |= bool(info.get("is_success", False))
            if not (terminated or truncated):
                still.append(i)
        live = still
    return float(success.mean())


def success_last_step(model: Any, envs: Any, seed: int, horizon: int) -> float:
    """Greedy success rate of one batch of lock-step episodes, one per copy of the vector env
    ``envs`` (reset with ``seed``): ``is_success`` of each episode's last step, as the runner counts
    it. A model trained through VecNormalize sees the observations through its statistics."""
    norm = model.get_vec_normalize_env()
    obs, _ = envs.reset(seed=seed)
    for _ in range(horizon):
        seen = norm.normalize_obs(obs) if norm is not None else obs
        obs, _, terminated, truncated, info = envs.step(model.predict(seen, deterministic=True)[0])
        if np.all(terminated | truncated):
            break
    return float(np.mean(info["is_success"]))


class Greedy:
    """An SB3 model as the agent the runner's ``evaluate`` plays (``act(obs, explore=False)``)."""

    def __init__(self, model: Any):
        self.model = model

    def act(self, obs: Any, explore: bool = False) -> Any:
        return self.model.predict(obs, deterministic=not explore)[0]


# ---------------------------------------------------------------- the peers


def dqn_her_bitflip(n: int, seed: int, protocol: Protocol, threads: int = 1, exploration_fraction: float = 0.1,
                    episodes: int = 100) -> PeerRun:
    """DQN + HerReplayBuffer on ``her_rl/BitFlip-v0``: ``future`` with 4 sampled goals, net
    [256, 256], lr 1e-3, batch 256, gamma 0.98, target update every 500 steps, buffer 1e6, SB3's
    defaults otherwise (train_freq 4, epsilon 1 -> 0.05 over ``exploration_fraction`` of the
    budget). Evaluated on ``episodes`` separate env copies (:func:`success_any_step`)."""
    import gymnasium as gym
    import torch
    from stable_baselines3 import DQN, HerReplayBuffer

    import her_rl.envs  # noqa: F401  (registers her_rl/BitFlip-v0)

    torch.set_num_threads(threads)
    # The env truncates itself after n steps; TimeLimit makes that explicit to SB3 (same step).
    env = gym.make("her_rl/BitFlip-v0", n=n, max_episode_steps=n)
    eval_envs = [gym.make("her_rl/BitFlip-v0", n=n, max_episode_steps=n) for _ in range(episodes)]
    model = DQN("MultiInputPolicy", env, replay_buffer_class=HerReplayBuffer,
                replay_buffer_kwargs=dict(n_sampled_goal=4, goal_selection_strategy="future"),
                policy_kwargs=dict(net_arch=[256, 256]), learning_rate=1e-3, batch_size=256, gamma=0.98,
                target_update_interval=500, learning_starts=SB3_LEARNING_STARTS, buffer_size=1_000_000,
                exploration_fraction=exploration_fraction, seed=seed, device="cpu", verbose=0)
    return train(model, lambda m, k: success_any_step(m, eval_envs, 10_000 * (seed + 1) + 1_000 * k), protocol,
                 f"bit-flip n={n} seed {seed}")


def ppo_cartpole(seed: int, protocol: Protocol, episodes: int) -> PeerRun:
    """PPO with rl-zoo's CartPole-v1 settings (8 envs, n_steps 32, batch 256, 20 epochs,
    gae_lambda 0.8, gamma 0.98, lr and clip linearly annealed from 1e-3 and 0.2, ent_coef 0), one
    torch thread, evaluated by the runner's ``evaluate`` on ``episodes`` greedy episodes. Its wall
    seconds count from before its env and model are built."""
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env

    from her_rl.envs import make_vec
    from her_rl.run.evaluation import eval_seed, evaluate

    def linear(v0: float) -> Callable[[float], float]:
        return lambda progress_remaining: progress_remaining * v0

    def greedy_return(model: Any, k: int) -> float:
        return evaluate(Greedy(model), eval_envs, eval_seed(seed, k * protocol.every))["return"]

    torch.set_num_threads(1)
    eval_envs = make_vec(CARTPOLE, episodes, seed=seed)
    started = time.perf_counter()
    model = PPO("MlpPolicy", make_vec_env("CartPole-v1", n_envs=8, seed=seed), n_steps=32, batch_size=256,
                n_epochs=20, gae_lambda=0.8, gamma=0.98, learning_rate=linear(1e-3), clip_range=linear(0.2),
                ent_coef=0.0, seed=seed, device="cpu", verbose=0)
    return train(model, greedy_return, protocol, f"cartpole seed {seed}", started)
