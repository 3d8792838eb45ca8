"""DDPG with Hindsight Experience Replay on any goal-conditioned env with a Box action space.

Reads top to bottom, following the HER paper (Andrychowicz et al. 2017) with the settings of its
follow-up (Plappert et al. 2018, openai/baselines ``her``): a deterministic actor pi(s, g) -> [-1, 1]^A
(tanh output, rescaled to the env's bounds only when stepping), a critic Q(s, g, a), target copies
of both, on the hindsight cycle (her_rl/algos/hindsight.py): collect ``episodes_per_cycle``
lock-step episodes in one batched env, run ``updates_per_cycle`` gradient steps on batches of
``batch_size``, then Polyak-average both target networks (decay ``polyak``).

    critic:  y = r + gamma^m (1 - terminated) * Q'(s_m, g, pi'(s_m, g)), clipped to [-1/(1-gamma), 0]
             (m = 1 unless ``n_step``); loss = mean (Q(s, g, a) - y)^2
    actor:   loss = -mean Q(s, g, pi(s, g)) + action_l2 * mean pi(s, g)^2   (actions before rescaling)
    explore: with probability random_eps a uniform action, else pi + noise_eps * N(0, 1) (or OU noise),
             clipped to [-1, 1]: noise is measured in half-ranges of the action box, as in baselines.

Departures from the paper, all configurable: one process and one batched env instead of 8 MPI
workers: the paper's 8 workers x 2 episodes of a cycle become ``episodes_per_cycle`` = 16 episodes
played in parallel, and each of the 40 updates takes one batch of 256 (not 8 averaged); a
transition is terminal only where the env's own ``compute_terminated`` says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from her_rl.algos.hindsight import HindsightLearner, frozen
from her_rl.rl.nets import Critic, mlp
from her_rl.rl.noise import GaussianNoise, OUNoise, with_random_actions
from her_rl.rules import NON_NEGATIVE, POSITIVE, UNIT, choice, setting

NOISES = ("gaussian", "ou")


def deterministic_actor(in_dim: int, act_dim: int, hidden: Sequence[int]) -> nn.Module:
    """pi(x) in [-1, 1]^A: a ReLU MLP ending in tanh."""
    return nn.Sequential(mlp(in_dim, act_dim, hidden, activation="relu"), nn.Tanh())


def policy_loss(actor: nn.Module, critic: nn.Module, x: torch.Tensor, action_l2: float) -> torch.Tensor:
    """-mean Q(x, pi(x)) + action_l2 * mean pi(x)^2: the deterministic policy gradient's loss."""
    pi = actor(x)
    return -critic(x, pi).float().mean() + action_l2 * pi.float().pow(2).mean()


class Exploration:
    """Exploring around a deterministic policy: ``pi + noise`` clipped to [-1, 1], then a share of
    uniformly random actions. Gaussian noise, or Ornstein-Uhlenbeck noise, correlated in time: one
    process per parallel episode, restarted every cycle (:meth:`reset`)."""

    def __init__(self, noise: str, shape: tuple[int, int], sigma: float, seed: int):
        self.process = (OUNoise if noise == "ou" else GaussianNoise)(shape, sigma=sigma, seed=seed)

    def __call__(self, a: np.ndarray, generator: np.random.Generator, noise_eps: float,
                 random_eps: float) -> np.ndarray:
        noise = self.process.sample() if len(a) == self.process.size[0] else \
            noise_eps * generator.standard_normal(a.shape)  # another batch size: plain Gaussian
        return with_random_actions(np.clip(a + noise, -1.0, 1.0), generator, random_eps)

    def reset(self) -> None:
        self.process.reset()

    def state_dict(self) -> dict:
        state = {"rng": self.process.rng.bit_generator.state}
        if isinstance(self.process, OUNoise):
            state["state"] = torch.from_numpy(self.process.state.copy())
        return state

    def load_state_dict(self, state: dict) -> None:
        self.process.rng.bit_generator.state = state["rng"]
        if "state" in state and isinstance(self.process, OUNoise):
            self.process.state = state["state"].numpy().copy()


@dataclass(eq=False)
class HerDDPG(HindsightLearner):
    """HER-DDPG agent: the base's ``act``, ``remember``, ``learn``, ``train_iteration``, ``state_dict``."""

    NAME = "her_ddpg"
    CONTINUOUS = True
    TARGETS = {"actor": "actor_target", "critic": "critic_target"}
    LEGACY_KEYS = {"noise": "exploration"}  # what earlier versions saved the exploration as
    STATE = ("actor", "actor_target", "critic", "critic_target", "actor_optimizer", "critic_optimizer", "exploration",
             *HindsightLearner.STATE)

    actor_lr: float = setting(1e-3, POSITIVE, "Adam learning rate of the actor.")
    critic_lr: float = setting(1e-3, POSITIVE, "Adam learning rate of the critic(s).")
    random_eps: float = setting(0.3, UNIT, "Share of uniformly random actions while collecting.")
    noise: str = setting("gaussian", choice(*NOISES),
                         "gaussian | ou (Ornstein-Uhlenbeck, theta 0.15, dt 0.01, restarted each cycle).")
    noise_eps: float = setting(0.2, NON_NEGATIVE, "Noise std (OU: sigma) in half-ranges of the action box.")
    action_l2: float = setting(1.0, NON_NEGATIVE, "L2 penalty on the actor's actions (in [-1, 1], before rescaling).")

    def build(self) -> None:
        self.build_actor()
        self.critic = Critic(*self.dims).to(self.device)
        self.critic_target = Critic(*self.dims).to(self.device)
        self.critic_optimizer = self.adam(self.critic.parameters(), self.critic_lr)

    def build_actor(self) -> None:
        """The actor, its target copy and optimiser, and the exploration around it (HER-TD3's too)."""
        self.exploration = Exploration(self.noise, (self.cycle_episodes, self.act_dim), self.noise_eps,
                                       self.seed + 1)
        self.dims = (self.inputs.dim, self.act_dim, self.hidden)
        self.actor = deterministic_actor(*self.dims).to(self.device)
        self.actor_target = deterministic_actor(*self.dims).to(self.device)
        self.actor_optimizer = self.adam(self.actor.parameters(), self.actor_lr)

    def policy(self, x: torch.Tensor, explore: bool) -> np.ndarray:
        """Actions in [-1, 1]^A: the actor's, or with exploration noise and random actions."""
        a = self.actor(x).cpu().numpy().reshape(-1, self.act_dim)
        if explore:
            a = self.exploration(a, self.np_generator, self.noise_eps, self.random_eps)
        return a.astype(np.float32)

    def collect(self, max_env_steps: int | None = None) -> dict[str, np.ndarray]:
        self.exploration.reset()
        return super().collect(max_env_steps)

    def update(self, t: dict[str, torch.Tensor]) -> dict[str, float]:
        """One critic and one actor step on a batch of tensors (see :meth:`tensors`)."""
        with torch.no_grad(), self.autocast():
            q_next = self.critic_target(t["x_next"], self.actor_target(t["x_next"])).float()
        y = self.td_target(t, q_next)
        with self.autocast():
            q = self.critic(t["x"], t["action"]).float()
        critic_loss = F.mse_loss(q, y)
        self.step(self.critic_optimizer, critic_loss)
        actor_loss = self.actor_step(t, self.critic)
        return {"losses/qf_loss": critic_loss.item(), "losses/actor_loss": actor_loss,
                "losses/q_values": q.mean().item()}

    def actor_step(self, t: dict[str, torch.Tensor], critic: nn.Module) -> float:
        """One actor step on :func:`policy_loss` against ``critic`` (frozen: only dQ/da is needed); its loss."""
        with frozen(critic):
            with self.autocast():
                actor_loss = policy_loss(self.actor, critic, t["x"], self.action_l2)
            self.step(self.actor_optimizer, actor_loss)
        return actor_loss.item()

    def cycle_metrics(self) -> dict[str, float]:
        return {"charts/random_eps": self.random_eps}
