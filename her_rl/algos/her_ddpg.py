"""DDPG with Hindsight Experience Replay on any goal-conditioned env with a Box action space.

Reads top to bottom, following the HER paper (Andrychowicz et al. 2017) with the settings of its
follow-up (Plappert et al. 2018, openai/baselines ``her``): a deterministic actor pi(s, g) -> [-1, 1]^A
(tanh output, rescaled to the env's bounds only when stepping), a critic Q(s, g, a), target copies
of both, and a HindsightMemory that relabels goals at sample time (her_rl/rl/her.py). One cycle
(her_rl/algos/offpolicy.py): collect ``episodes_per_cycle`` lock-step episodes in one batched env,
run ``updates_per_cycle`` gradient steps on batches of ``batch_size``, then Polyak-average both target
networks (decay ``polyak``).

    critic:  y = r + gamma * (1 - terminated) * Q'(s', g, pi'(s', g)), clipped to [-1/(1-gamma), 0]
             loss = mean (Q(s, g, a) - y)^2
    actor:   loss = -mean Q(s, g, pi(s, g)) + action_l2 * mean pi(s, g)^2   (actions before rescaling)
    explore: with probability random_eps a uniform action, else pi + noise_eps * N(0, 1) (or OU noise),
             clipped to [-1, 1]: noise is measured in half-ranges of the action box, as in baselines.

Departures from the paper, all configurable: one process and one batched env instead of 8 MPI
workers: the paper's 8 workers x 2 episodes of a cycle become ``episodes_per_cycle`` = 16 episodes
played in parallel, and each of the 40 updates takes one batch of 256 (not 8 averaged); a
transition is terminal only where the env's own ``compute_terminated`` says so.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from her_rl.agent import IterationResult
from her_rl.algos.offpolicy import (GoalInputs, box_action_space, clip_to_return_range, collect_episodes,
                                    continuous_batch, cycle_result, cycle_envs, hindsight_memory,
                                    polyak_update, to_env_actions, updates_for_cycle)
from her_rl.registry import ConfigError
from her_rl.rl.her import STRATEGIES
from her_rl.rl.nets import mlp
from her_rl.rl.noise import GaussianNoise, OUNoise

NOISES = ("gaussian", "ou")


class Critic(nn.Module):
    """Q(x, a): one MLP over the normalised (observation, goal) input and the action in [-1, 1]."""

    def __init__(self, in_dim: int, act_dim: int, hidden: Sequence[int]):
        super().__init__()
        self.net = mlp(in_dim + act_dim, 1, hidden, activation="relu")

    def forward(self, x: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([x, a], dim=1)).squeeze(1)


def check_common(algo: str, strategy: str, gamma: float, batch_size: int, buffer_size: int,
                 updates_per_step: float | None = None, **positive: float) -> None:
    """Value checks the continuous learners share (the schema checks the CLI path first)."""
    if strategy not in STRATEGIES:
        raise ConfigError(f"unknown HER strategy '{strategy}'; valid choices: {', '.join(STRATEGIES)}")
    if updates_per_step is not None:
        positive["updates_per_step"] = updates_per_step
    for key, value in {"batch_size": batch_size, "buffer_size": buffer_size, **positive}.items():
        if not value > 0:
            raise ConfigError(f"algo.{key} must be > 0, got {value}")
    if batch_size > buffer_size:
        raise ConfigError(f"algo.batch_size ({batch_size}) is larger than algo.buffer_size ({buffer_size})")
    if not 0.0 < gamma <= 1.0:
        raise ConfigError(f"algo.gamma must lie in (0, 1], got {gamma}")


class HerDDPG:
    """HER-DDPG agent: ``act``, ``remember``, ``learn``, ``train_iteration``, ``state_dict``."""

    def __init__(
        self,
        env: dict[str, Any],
        seed: int = 0,
        device: str = "cpu",
        inference: bool = False,
        strategy: str = "future",
        k: int = 4,
        hidden: Sequence[int] = (256, 256, 256),
        actor_lr: float = 1e-3,
        critic_lr: float = 1e-3,
        gamma: float = 0.98,
        batch_size: int = 256,
        buffer_size: int = 1_000_000,
        episodes_per_cycle: int = 16,
        updates_per_cycle: int = 40,
        updates_per_step: float | None = None,
        polyak: float = 0.95,
        random_eps: float = 0.3,
        noise: str = "gaussian",
        noise_eps: float = 0.2,
        action_l2: float = 1.0,
        clip_target: bool = True,
        normalize: str | bool = "auto",
        norm_clip: float = 5.0,
    ):
        check_common("her_ddpg", strategy, gamma, batch_size, buffer_size, actor_lr=actor_lr, critic_lr=critic_lr,
                     episodes_per_cycle=episodes_per_cycle, updates_per_step=updates_per_step)
        if noise not in NOISES:
            raise ConfigError(f"algo.noise must be one of {', '.join(NOISES)}, got {noise!r}")
        if not 0.0 <= random_eps <= 1.0 or not 0.0 <= polyak <= 1.0 or noise_eps < 0 or action_l2 < 0:
            raise ConfigError("algo.random_eps and algo.polyak must lie in [0, 1], algo.noise_eps and "
                              "algo.action_l2 must be >= 0")

        self.device = torch.device(device)
        self.gamma, self.batch_size, self.updates_per_cycle, self.polyak = gamma, batch_size, updates_per_cycle, polyak
        self.updates_per_step = updates_per_step
        self.random_eps, self.noise_eps, self.action_l2, self.clip_target = random_eps, noise_eps, action_l2, clip_target

        self.envs, self.spec = cycle_envs(env, episodes_per_cycle, seed, "her_ddpg", inference)
        self.action_space = box_action_space(self.spec, env, "her_ddpg")
        self.horizon = self.spec.horizon
        self.act_dim = int(np.prod(self.action_space.shape))
        self.inputs = GoalInputs(self.spec, normalize, norm_clip, self.device)

        self.rng = np.random.default_rng(seed)
        # OU noise is correlated in time: one process per parallel episode, restarted every cycle
        noise_cls = OUNoise if noise == "ou" else GaussianNoise
        self.noise = noise_cls((episodes_per_cycle, self.act_dim), sigma=noise_eps, seed=seed + 1)
        self.memory = None if inference else hindsight_memory(self.spec, buffer_size, strategy, k, seed)

        self.actor = nn.Sequential(mlp(self.inputs.dim, self.act_dim, hidden, activation="relu"), nn.Tanh()).to(self.device)
        self.actor_target = nn.Sequential(mlp(self.inputs.dim, self.act_dim, hidden, activation="relu"), nn.Tanh()).to(self.device)
        self.critic = Critic(self.inputs.dim, self.act_dim, hidden).to(self.device)
        self.critic_target = Critic(self.inputs.dim, self.act_dim, hidden).to(self.device)
        for net, target in ((self.actor, self.actor_target), (self.critic, self.critic_target)):
            target.load_state_dict(net.state_dict())
            target.requires_grad_(False)
        fused = self.device.type == "cpu"
        self.actor_optimizer = torch.optim.Adam(self.actor.parameters(), lr=actor_lr, fused=fused)
        self.critic_optimizer = torch.optim.Adam(self.critic.parameters(), lr=critic_lr, fused=fused)
        self.updates = 0

    # -- acting ------------------------------------------------------------------------------
    @torch.no_grad()
    def policy(self, observation: dict[str, np.ndarray], goal: np.ndarray | None = None,
               explore: bool = False) -> np.ndarray:
        """Actions in [-1, 1]^A: the actor's, or with exploration noise and random actions."""
        goal = observation["desired_goal"] if goal is None else goal
        a = self.actor(self.inputs(observation["observation"], goal)).cpu().numpy().reshape(-1, self.act_dim)
        if explore:
            noise = self.noise.sample() if len(a) == self.noise.size[0] else \
                self.noise_eps * self.rng.standard_normal(a.shape)  # another batch size: plain Gaussian
            a = np.clip(a + noise, -1.0, 1.0)
            random = self.rng.random(len(a)) < self.random_eps
            a[random] = self.rng.uniform(-1.0, 1.0, size=(int(random.sum()), self.act_dim))
        return a.astype(np.float32)

    def act(self, observation: dict[str, np.ndarray], goal: np.ndarray | None = None, explore: bool = False) -> np.ndarray:
        """Env actions for a batch of goal-env observations: greedy (the actor's) unless ``explore``."""
        a = self.policy(observation, goal, explore)
        return to_env_actions(a, self.action_space).reshape(len(a), *self.action_space.shape)

    # -- memory ------------------------------------------------------------------------------
    def remember(self, episodes: dict[str, np.ndarray]) -> None:
        """Store a batch of episodes (see ``HindsightMemory.remember`` for the keys)."""
        self.memory.remember_episodes(episodes)

    def collect(self) -> dict[str, np.ndarray]:
        """Play one batch of lock-step episodes with exploration (see ``collect_episodes``)."""
        self.noise.reset()
        return collect_episodes(self.envs, self.spec, lambda obs, goal: self.act(obs, goal, explore=True),
                                seed=int(self.rng.integers(2**31)))

    # -- learning ----------------------------------------------------------------------------
    def tensors(self, b: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
        """A sampled batch as network-ready tensors (see ``offpolicy.continuous_batch``)."""
        return continuous_batch(b, self.inputs, self.action_space, self.device)

    def update(self, t: dict[str, torch.Tensor]) -> dict[str, float]:
        """One critic and one actor step on a batch of tensors (see :meth:`tensors`)."""
        with torch.no_grad():
            q_next = self.critic_target(t["x_next"], self.actor_target(t["x_next"]))
            target = t["reward"] + self.gamma * t["not_done"] * q_next
            if self.clip_target:
                target = clip_to_return_range(target, self.gamma)
        q = self.critic(t["x"], t["action"])
        critic_loss = F.mse_loss(q, target)
        self.critic_optimizer.zero_grad(set_to_none=True)
        critic_loss.backward()
        self.critic_optimizer.step()

        pi = self.actor(t["x"])
        self.critic.requires_grad_(False)  # the actor step needs dQ/da only, not the critic's weight gradients
        actor_loss = -self.critic(t["x"], pi).mean() + self.action_l2 * pi.pow(2).mean()
        self.actor_optimizer.zero_grad(set_to_none=True)
        actor_loss.backward()
        self.actor_optimizer.step()
        self.critic.requires_grad_(True)
        self.updates += 1
        return {"losses/qf_loss": critic_loss.item(), "losses/actor_loss": actor_loss.item(),
                "losses/q_values": q.mean().item()}

    def learn(self) -> dict[str, float]:
        """One gradient step on a relabelled batch from the memory."""
        return self.update(self.tensors(self.memory.sample(self.batch_size, self.rng)))

    def train_iteration(self) -> IterationResult:
        """One HER cycle: a batch of episodes, ``updates_per_cycle`` (or ``updates_per_step`` x steps)
        updates, a target-network step."""
        episodes = self.collect()
        self.remember(episodes)
        self.inputs.update(episodes)
        steps = int(episodes["length"].sum())
        losses = [self.learn() for _ in range(updates_for_cycle(self.updates_per_cycle, self.updates_per_step, steps))]
        polyak_update(self.actor, self.actor_target, self.polyak)
        polyak_update(self.critic, self.critic_target, self.polyak)
        return cycle_result(episodes, losses, {"charts/random_eps": self.random_eps})

    # -- checkpointing -----------------------------------------------------------------------
    def state_dict(self) -> dict:
        noise = {"rng": self.noise.rng.bit_generator.state}
        if isinstance(self.noise, OUNoise):
            noise["state"] = torch.from_numpy(self.noise.state.copy())
        return {
            "actor": self.actor.state_dict(), "actor_target": self.actor_target.state_dict(),
            "critic": self.critic.state_dict(), "critic_target": self.critic_target.state_dict(),
            "actor_optimizer": self.actor_optimizer.state_dict(), "critic_optimizer": self.critic_optimizer.state_dict(),
            "memory": self.memory.state_dict(), "inputs": self.inputs.state_dict(), "noise": noise,
            "rng": self.rng.bit_generator.state, "updates": self.updates,
        }

    def load_state_dict(self, state: dict) -> None:
        for key in ("actor", "actor_target", "critic", "critic_target", "actor_optimizer", "critic_optimizer", "inputs"):
            getattr(self, key).load_state_dict(state[key])
        if "memory" in state and self.memory is not None:
            self.memory.load_state_dict(state["memory"])
        self.noise.rng.bit_generator.state = state["noise"]["rng"]
        if "state" in state["noise"] and isinstance(self.noise, OUNoise):
            self.noise.state = state["noise"]["state"].numpy().copy()
        self.rng.bit_generator.state = state["rng"]
        self.updates = int(state["updates"])
