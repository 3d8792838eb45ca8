"""SAC with Hindsight Experience Replay on any goal-conditioned env with a Box action space.

Reads top to bottom: a tanh-squashed Gaussian policy pi(a | s, g) over [-1, 1]^A (rescaled to the
env's bounds only when stepping), twin critics Q1, Q2 with Polyak-averaged target copies, a learnable
temperature alpha = exp(log_alpha) tuned towards a target entropy of -|A| (Haarnoja et al. 2018,
"SAC and applications"), on the cycle every hindsight learner shares (her_rl/algos/hindsight.py):

    critic:  y = r + gamma^m (1 - terminated) * (min(Q1', Q2')(s', g, a') - alpha * log pi(a' | s', g)),
             a' ~ pi(. | s', g), s' the state m steps on (m = 1 unless ``n_step``);
             loss = mean (Q1 - y)^2 + mean (Q2 - y)^2
    actor:   loss = mean (alpha * log pi(a | s, g) - min(Q1, Q2)(s, g, a)),  a ~ pi(. | s, g) (reparameterised)
    alpha:   loss = -mean log_alpha * (log pi(a | s, g) + target_entropy): alpha grows while the policy's
             entropy is below the target and shrinks while above.

Target networks move once per cycle, by Polyak averaging with decay ``polyak`` (as the other
hindsight learners do, one key with one meaning across them) rather than by ``tau`` after every
gradient step. Q-target clipping to [-1/(1-gamma), 0] is off by default: the entropy bonus makes soft
returns leave the plain return range. Greedy actions (evaluation) are the squashed mean; collecting,
the actions are samples of pi, a share ``random_eps`` of them uniformly random instead (0 by default).

:class:`SoftActorCritic` is the actor and the temperature that HER-REDQ and HER-CrossQ share with it;
each writes its own critics and update. ``critic_threads``, ``simultaneous`` and ``actor_half`` run the
update over two CPU cores instead (her_rl/algos/parallel_update.py), only when asked for.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import torch
import torch.nn as nn

from her_rl.algos.hindsight import HindsightLearner, frozen
from her_rl.algos.parallel_update import ParallelUpdate, check_actor_half
from her_rl.rl.nets import ContinuousAction, Critic, NormalPolicyHead, mlp
from her_rl.rl.noise import with_random_actions
from her_rl.rules import BOOL, CRITIC_THREADS, POSITIVE, UNIT, choice, optional, real, setting


class Actor(nn.Module):
    """ReLU MLP trunk, then a squashed Gaussian head with state-dependent std."""

    def __init__(self, in_dim: int, act_dim: int, hidden: Sequence[int]):
        super().__init__()
        self.trunk = nn.Sequential(mlp(in_dim, hidden[-1], hidden[:-1], activation="relu"), nn.ReLU())
        self.head = NormalPolicyHead(hidden[-1], act_dim, state_dependent_std=True, squash=True)

    def forward(self, x: torch.Tensor) -> ContinuousAction:
        h = self.trunk(x)
        with torch.autocast(x.device.type, enabled=False):  # the distribution's maths in float32 at any precision
            return self.head(h.float())


@dataclass(eq=False)
class SoftActorCritic(HindsightLearner):
    """The squashed Gaussian actor and the entropy temperature of HER-SAC, HER-REDQ and HER-CrossQ: their
    keys, :meth:`policy`, the actor's step against twin critics ``q1``, ``q2`` and the temperature's step.
    A learner builds its critics in :meth:`build_critics` and writes :meth:`update`."""

    CONTINUOUS = True

    actor_lr: float = setting(1e-3, POSITIVE, "Adam learning rate of the policy.")
    critic_lr: float = setting(1e-3, POSITIVE, "Adam learning rate of the critics.")
    alpha_lr: float = setting(1e-3, POSITIVE, "Adam learning rate of log(alpha).")
    alpha_init: float = setting(1.0, POSITIVE, "Initial entropy temperature.")
    autotune: bool = setting(True, BOOL, "Tune alpha towards target_entropy; false: alpha stays alpha_init.")
    target_entropy: float | None = setting(None, optional(real()),
                                           "Entropy the temperature aims at; null: -(action dimensions).")
    random_eps: float = setting(0.0, UNIT, "Share of uniformly random actions while collecting (HER-DDPG's "
                                "exploration; 0: the policy's own samples only).")

    def build(self) -> None:
        self.target_entropy = -float(self.act_dim) if self.target_entropy is None else float(self.target_entropy)
        self.actor = Actor(self.inputs.dim, self.act_dim, self.hidden).to(self.device)
        self.build_critics()
        self.log_alpha = torch.tensor(math.log(self.alpha_init), device=self.device, requires_grad=self.autotune)
        self.actor_optimizer = self.adam(self.actor.parameters(), self.actor_lr)
        self.alpha_optimizer = torch.optim.Adam([self.log_alpha], lr=self.alpha_lr)

    def build_critics(self) -> None:
        """The critics, their targets (if any) and ``critic_optimizer``."""
        raise NotImplementedError

    @property
    def alpha(self) -> float:
        return float(self.log_alpha.detach().exp())

    def policy(self, x: torch.Tensor, explore: bool) -> np.ndarray:
        """Actions in [-1, 1]^A: a sample from the policy (a share ``random_eps`` of them uniformly random
        instead), or its squashed mean (greedy)."""
        dist = self.actor(x)
        a = dist.sample(self.generator) if explore else dist.mode()  # the same draw as sample_with_log_prob's
        a = a.cpu().numpy().reshape(-1, self.act_dim).astype(np.float32)
        if explore and self.random_eps > 0:  # nothing drawn at 0: runs without it keep their numbers
            a = with_random_actions(a, self.np_generator, self.random_eps)
        return a

    def actor_step(self, t: dict[str, torch.Tensor]) -> dict[str, float]:
        """One actor step on mean(alpha log pi(a | s) - min(Q1, Q2)(s, a)), a ~ pi (reparameterised), the
        critics frozen; then the temperature's."""
        with frozen(self.q1, self.q2):
            with self.autocast():
                a, logp = self.actor(t["x"]).sample_with_log_prob(self.generator)
                q_pi = torch.min(self.q1(t["x"], a).float(), self.q2(t["x"], a).float())
            actor_loss = (self.log_alpha.detach().exp() * logp - q_pi).mean()
            self.step(self.actor_optimizer, actor_loss)
        metrics = {"losses/actor_loss": actor_loss.item(), "losses/entropy": -logp.mean().item()}
        return {**metrics, **self.temperature_step(logp)}

    def temperature_loss(self, logp: torch.Tensor) -> torch.Tensor:
        """-mean log_alpha (log pi + target entropy): its gradient raises alpha when entropy < target."""
        return -(self.log_alpha * (logp.detach() + self.target_entropy)).mean()

    def temperature_step(self, logp: torch.Tensor) -> dict[str, float]:
        """With ``autotune``, one Adam step of log(alpha) on :meth:`temperature_loss`."""
        metrics = {}
        if self.autotune:
            alpha_loss = self.temperature_loss(logp)
            self.step(self.alpha_optimizer, alpha_loss, clip=False)
            metrics["losses/alpha_loss"] = alpha_loss.item()
        metrics["losses/alpha"] = self.alpha
        return metrics


@dataclass(eq=False)
class HerSAC(SoftActorCritic):
    """HER-SAC agent: twin critics with target copies, and the update of the module's docstring."""

    NAME = "her_sac"
    TARGETS = {"q1": "q1_target", "q2": "q2_target"}
    STATE = ("actor", "q1", "q2", "q1_target", "q2_target", "actor_optimizer", "critic_optimizer",
             "alpha_optimizer", "log_alpha", "generator", *HindsightLearner.STATE)

    clip_target: bool = setting(False, doc="Clip Q targets to [-1/(1-gamma), 0] (the entropy bonus leaves that range).")
    critic_threads: int = setting(1, CRITIC_THREADS,
                                  "2: the twin critics' passes run side by side, a critic per CPU thread (same "
                                  "numbers; faster with a second core free; leave threads at 1 with it). With "
                                  "simultaneous, the critics' half and the actor's half do.")
    simultaneous: bool = setting(False, BOOL,
                                 "All of an update's gradients from the parameters before it (the actor climbs the "
                                 "critics before their step), which lets critic_threads 2 run the critics' and the "
                                 "actor's halves side by side.")
    actor_half: str = setting("thread", choice("thread", "process"),
                              "With simultaneous and critic_threads 2, where the actor's half runs: thread (a second "
                              "thread of this process) or process (a forked copy of it sharing the weights, where the "
                              "halves do not slow each other; Linux only). The same numbers either way.")

    @classmethod
    def check_config(cls, values: dict[str, Any]) -> None:
        super().check_config(values)
        check_actor_half(values)

    def build_critics(self) -> None:
        self.twin_critics(lambda: Critic(self.inputs.dim, self.act_dim, self.hidden), self.critic_lr)
        self.parallel = ParallelUpdate(self, self.simultaneous, self.actor_half) \
            if self.critic_threads == 2 or self.simultaneous else None

    @torch.no_grad()
    def soft_target(self, t: dict[str, torch.Tensor]) -> torch.Tensor:
        """y = r + gamma^m (1 - d) (min(Q1', Q2')(s', a') - alpha log pi(a' | s')), a' drawn from the policy."""
        with self.autocast():
            a_next, logp_next = self.actor(t["x_next"]).sample_with_log_prob(self.generator)
            q_next = torch.min(self.q1_target(t["x_next"], a_next), self.q2_target(t["x_next"], a_next)).float()
        return self.td_target(t, q_next - self.log_alpha.exp() * logp_next)

    def update(self, t: dict[str, torch.Tensor]) -> dict[str, float]:
        """One critic, one actor and (``autotune``) one temperature step on a batch of tensors."""
        if self.parallel is not None:  # critic_threads 2 or simultaneous: her_rl/algos/parallel_update.py
            return self.parallel.sac_update(t)
        y = self.soft_target(t)
        metrics = self.fit_twin_critics(t, y)  # mean (Q1 - y)^2 + mean (Q2 - y)^2, one step
        return {**metrics, **self.actor_step(t)}
