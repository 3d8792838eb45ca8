"""SAC with Hindsight Experience Replay on any goal-conditioned env with a Box action space.

Reads top to bottom: a tanh-squashed Gaussian policy pi(a | s, g) over [-1, 1]^A (rescaled to the
env's bounds only when stepping), twin critics Q1, Q2 with Polyak-averaged target copies, a learnable
temperature alpha = exp(log_alpha) tuned towards a target entropy of -|A| (Haarnoja et al. 2018,
"SAC and applications"), and the same hindsight memory, input normaliser, cycle and termination
handling as HER-DDPG (her_rl/algos/offpolicy.py):

    critic:  y = r + gamma * (1 - terminated) * (min(Q1', Q2')(s', g, a') - alpha * log pi(a' | s', g)),
             a' ~ pi(. | s', g); loss = mean (Q1 - y)^2 + mean (Q2 - y)^2
    actor:   loss = mean (alpha * log pi(a | s, g) - min(Q1, Q2)(s, g, a)),  a ~ pi(. | s, g) (reparameterised)
    alpha:   loss = -mean log_alpha * (log pi(a | s, g) + target_entropy): alpha grows while the policy's
             entropy is below the target and shrinks while above.

Target networks move once per cycle, by Polyak averaging with decay ``polyak`` (as HER-DDPG and
HER-DQN do, one key with one meaning across the three learners) rather than by ``tau`` after every
gradient step. Q-target clipping to [-1/(1-gamma), 0] is off by default: the entropy bonus makes soft
returns leave the plain return range. Greedy actions (evaluation) are the squashed mean.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from her_rl.agent import IterationResult
from her_rl.algos.her_ddpg import Critic, check_common
from her_rl.algos.offpolicy import (GoalInputs, box_action_space, clip_to_return_range, collect_episodes,
                                    continuous_batch, cycle_result, cycle_envs, hindsight_memory,
                                    polyak_update, to_env_actions, updates_for_cycle)
from her_rl.registry import ConfigError
from her_rl.rl.actions import ContinuousAction, NormalPolicyHead
from her_rl.rl.nets import mlp


class Actor(nn.Module):
    """ReLU MLP trunk, then a squashed Gaussian head with state-dependent std."""

    def __init__(self, in_dim: int, act_dim: int, hidden: Sequence[int]):
        super().__init__()
        self.trunk = nn.Sequential(mlp(in_dim, hidden[-1], hidden[:-1], activation="relu"), nn.ReLU())
        self.head = NormalPolicyHead(hidden[-1], act_dim, state_dependent_std=True, squash=True)

    def forward(self, x: torch.Tensor) -> ContinuousAction:
        return self.head(self.trunk(x))


class HerSAC:
    """HER-SAC agent: ``act``, ``remember``, ``learn``, ``train_iteration``, ``state_dict``."""

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
        alpha_lr: float = 1e-3,
        alpha_init: float = 1.0,
        autotune: bool = True,
        target_entropy: float | None = None,
        gamma: float = 0.98,
        batch_size: int = 256,
        buffer_size: int = 1_000_000,
        episodes_per_cycle: int = 16,
        updates_per_cycle: int = 40,
        updates_per_step: float | None = None,
        polyak: float = 0.95,
        clip_target: bool = False,
        normalize: str | bool = "auto",
        norm_clip: float = 5.0,
    ):
        check_common("her_sac", strategy, gamma, batch_size, buffer_size, actor_lr=actor_lr, critic_lr=critic_lr,
                     alpha_lr=alpha_lr, alpha_init=alpha_init, episodes_per_cycle=episodes_per_cycle,
                     updates_per_step=updates_per_step)
        if not 0.0 <= polyak <= 1.0:
            raise ConfigError(f"algo.polyak must lie in [0, 1], got {polyak}")

        self.device = torch.device(device)
        self.gamma, self.batch_size, self.updates_per_cycle, self.polyak = gamma, batch_size, updates_per_cycle, polyak
        self.updates_per_step = updates_per_step
        self.autotune, self.clip_target = autotune, clip_target

        self.envs, self.spec = cycle_envs(env, episodes_per_cycle, seed, "her_sac", inference)
        self.action_space = box_action_space(self.spec, env, "her_sac")
        self.horizon = self.spec.horizon
        self.act_dim = int(np.prod(self.action_space.shape))
        self.target_entropy = -float(self.act_dim) if target_entropy is None else float(target_entropy)
        self.inputs = GoalInputs(self.spec, normalize, norm_clip, self.device)

        self.rng = np.random.default_rng(seed)
        self.generator = torch.Generator(device=self.device).manual_seed(seed)  # policy samples: the agent's own
        self.memory = None if inference else hindsight_memory(self.spec, buffer_size, strategy, k, seed)

        self.actor = Actor(self.inputs.dim, self.act_dim, hidden).to(self.device)
        self.q1, self.q2, self.q1_target, self.q2_target = (Critic(self.inputs.dim, self.act_dim, hidden).to(self.device)
                                                            for _ in range(4))
        for net, target in ((self.q1, self.q1_target), (self.q2, self.q2_target)):
            target.load_state_dict(net.state_dict())
            target.requires_grad_(False)
        self.log_alpha = torch.tensor(math.log(alpha_init), device=self.device, requires_grad=autotune)
        fused = self.device.type == "cpu"
        self.actor_optimizer = torch.optim.Adam(self.actor.parameters(), lr=actor_lr, fused=fused)
        self.critic_optimizer = torch.optim.Adam([*self.q1.parameters(), *self.q2.parameters()], lr=critic_lr,
                                                 fused=fused)
        self.alpha_optimizer = torch.optim.Adam([self.log_alpha], lr=alpha_lr)
        self.updates = 0

    @property
    def alpha(self) -> float:
        return float(self.log_alpha.detach().exp())

    # -- acting ------------------------------------------------------------------------------
    @torch.no_grad()
    def policy(self, observation: dict[str, np.ndarray], goal: np.ndarray | None = None,
               explore: bool = False) -> np.ndarray:
        """Actions in [-1, 1]^A: a sample from the policy, or its squashed mean (greedy)."""
        goal = observation["desired_goal"] if goal is None else goal
        dist = self.actor(self.inputs(observation["observation"], goal))
        a = dist.sample_with_log_prob(self.generator)[0] if explore else dist.mode()
        return a.cpu().numpy().reshape(-1, self.act_dim).astype(np.float32)

    def act(self, observation: dict[str, np.ndarray], goal: np.ndarray | None = None, explore: bool = False) -> np.ndarray:
        """Env actions for a batch of goal-env observations: greedy (the mean) unless ``explore``."""
        a = self.policy(observation, goal, explore)
        return to_env_actions(a, self.action_space).reshape(len(a), *self.action_space.shape)

    # -- memory ------------------------------------------------------------------------------
    def remember(self, episodes: dict[str, np.ndarray]) -> None:
        """Store a batch of episodes (see ``HindsightMemory.remember`` for the keys)."""
        self.memory.remember_episodes(episodes)

    def collect(self) -> dict[str, np.ndarray]:
        """Play one batch of lock-step episodes, sampling from the policy (see ``collect_episodes``)."""
        return collect_episodes(self.envs, self.spec, lambda obs, goal: self.act(obs, goal, explore=True),
                                seed=int(self.rng.integers(2**31)))

    # -- learning ----------------------------------------------------------------------------
    def tensors(self, b: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
        """A sampled batch as network-ready tensors (see ``offpolicy.continuous_batch``)."""
        return continuous_batch(b, self.inputs, self.action_space, self.device)

    @torch.no_grad()
    def soft_target(self, t: dict[str, torch.Tensor]) -> torch.Tensor:
        """y = r + gamma (1 - d) (min(Q1', Q2')(s', a') - alpha log pi(a' | s')), a' drawn from the policy."""
        a_next, logp_next = self.actor(t["x_next"]).sample_with_log_prob(self.generator)
        q_next = torch.min(self.q1_target(t["x_next"], a_next), self.q2_target(t["x_next"], a_next))
        target = t["reward"] + self.gamma * t["not_done"] * (q_next - self.log_alpha.exp() * logp_next)
        return clip_to_return_range(target, self.gamma) if self.clip_target else target

    def temperature_loss(self, logp: torch.Tensor) -> torch.Tensor:
        """-mean log_alpha (log pi + target entropy): its gradient raises alpha when entropy < target."""
        return -(self.log_alpha * (logp.detach() + self.target_entropy)).mean()

    def update(self, t: dict[str, torch.Tensor]) -> dict[str, float]:
        """One critic, one actor and (``autotune``) one temperature step on a batch of tensors."""
        target = self.soft_target(t)
        q1, q2 = self.q1(t["x"], t["action"]), self.q2(t["x"], t["action"])
        qf_loss = F.mse_loss(q1, target) + F.mse_loss(q2, target)
        self.critic_optimizer.zero_grad(set_to_none=True)
        qf_loss.backward()
        self.critic_optimizer.step()

        a, logp = self.actor(t["x"]).sample_with_log_prob(self.generator)
        self.q1.requires_grad_(False)  # the actor step needs dQ/da only, not the critics' weight gradients
        self.q2.requires_grad_(False)
        q_pi = torch.min(self.q1(t["x"], a), self.q2(t["x"], a))
        actor_loss = (self.log_alpha.detach().exp() * logp - q_pi).mean()
        self.actor_optimizer.zero_grad(set_to_none=True)
        actor_loss.backward()
        self.actor_optimizer.step()
        self.q1.requires_grad_(True)
        self.q2.requires_grad_(True)

        metrics = {"losses/qf_loss": qf_loss.item() / 2.0, "losses/actor_loss": actor_loss.item(),
                   "losses/q_values": q1.mean().item(), "losses/entropy": -logp.mean().item()}
        if self.autotune:
            alpha_loss = self.temperature_loss(logp)
            self.alpha_optimizer.zero_grad(set_to_none=True)
            alpha_loss.backward()
            self.alpha_optimizer.step()
            metrics["losses/alpha_loss"] = alpha_loss.item()
        metrics["losses/alpha"] = self.alpha
        self.updates += 1
        return metrics

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
        polyak_update(self.q1, self.q1_target, self.polyak)
        polyak_update(self.q2, self.q2_target, self.polyak)
        return cycle_result(episodes, losses)

    # -- checkpointing -----------------------------------------------------------------------
    _MODULES = ("actor", "q1", "q2", "q1_target", "q2_target", "actor_optimizer", "critic_optimizer",
                "alpha_optimizer", "inputs")

    def state_dict(self) -> dict:
        return {
            **{key: getattr(self, key).state_dict() for key in self._MODULES},
            "log_alpha": self.log_alpha.detach().clone(), "memory": self.memory.state_dict(),
            "rng": self.rng.bit_generator.state, "generator": self.generator.get_state(), "updates": self.updates,
        }

    def load_state_dict(self, state: dict) -> None:
        for key in self._MODULES:
            getattr(self, key).load_state_dict(state[key])
        with torch.no_grad():
            self.log_alpha.copy_(state["log_alpha"])
        if "memory" in state and self.memory is not None:
            self.memory.load_state_dict(state["memory"])
        self.rng.bit_generator.state = state["rng"]
        self.generator.set_state(state["generator"])
        self.updates = int(state["updates"])
