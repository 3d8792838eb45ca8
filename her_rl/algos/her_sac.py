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
returns leave the plain return range. Greedy actions (evaluation) are the squashed mean.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, Sequence

import numpy as np
import torch
import torch.nn as nn

from her_rl.algos.hindsight import HindsightLearner
from her_rl.rl.actions import ContinuousAction, NormalPolicyHead
from her_rl.rl.nets import Critic, mlp
from her_rl.rl.updates import frozen
from her_rl.rules import BOOL, CRITIC_THREADS, POSITIVE, Rule, optional, real


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
class HerSAC(HindsightLearner):
    """HER-SAC agent: the base's ``act``, ``remember``, ``learn``, ``train_iteration``, ``state_dict``."""

    NAME = "her_sac"
    CONTINUOUS = True
    TARGETS = {"q1": "q1_target", "q2": "q2_target"}
    STATE = ("actor", "q1", "q2", "q1_target", "q2_target", "actor_optimizer", "critic_optimizer",
             "alpha_optimizer", "log_alpha", "generator", *HindsightLearner.STATE)
    RULES: ClassVar[dict[str, Rule]] = {
        **HindsightLearner.RULES, "actor_lr": POSITIVE, "critic_lr": POSITIVE, "alpha_lr": POSITIVE,
        "alpha_init": POSITIVE, "autotune": BOOL, "target_entropy": optional(real()), "critic_threads": CRITIC_THREADS,
    }

    actor_lr: float = 1e-3
    """Adam learning rate of the policy."""
    critic_lr: float = 1e-3
    """Adam learning rate of the critics."""
    alpha_lr: float = 1e-3
    """Adam learning rate of log(alpha)."""
    alpha_init: float = 1.0
    """Initial entropy temperature."""
    autotune: bool = True
    """Tune alpha towards target_entropy; false: alpha stays alpha_init."""
    target_entropy: float | None = None
    """Entropy the temperature aims at; null: -(action dimensions)."""
    clip_target: bool = False
    """Clip Q targets to [-1/(1-gamma), 0] (the entropy bonus leaves that range)."""
    critic_threads: int = 1
    """2: the twin critics' passes run side by side, a critic per CPU thread (same numbers; faster with a second
    core free; leave threads at 1 with it)."""

    def build(self) -> None:
        self.target_entropy = -float(self.act_dim) if self.target_entropy is None else float(self.target_entropy)
        self.actor = Actor(self.inputs.dim, self.act_dim, self.hidden).to(self.device)
        self.build_critics()
        self.log_alpha = torch.tensor(math.log(self.alpha_init), device=self.device, requires_grad=self.autotune)
        self.actor_optimizer = self.adam(self.actor.parameters(), self.actor_lr)
        self.alpha_optimizer = torch.optim.Adam([self.log_alpha], lr=self.alpha_lr)

    def build_critics(self) -> None:
        """The twin critics, their targets and optimiser (HER-REDQ builds its ensemble here instead)."""
        self.twin_critics(lambda: Critic(self.inputs.dim, self.act_dim, self.hidden), threads=self.critic_threads)

    @property
    def alpha(self) -> float:
        return float(self.log_alpha.detach().exp())

    def policy(self, x: torch.Tensor, explore: bool) -> np.ndarray:
        """Actions in [-1, 1]^A: a sample from the policy, or its squashed mean (greedy)."""
        dist = self.actor(x)
        a = dist.sample(self.generator) if explore else dist.mode()  # the same draw as sample_with_log_prob's
        return a.cpu().numpy().reshape(-1, self.act_dim).astype(np.float32)

    @torch.no_grad()
    def soft_target(self, t: dict[str, torch.Tensor]) -> torch.Tensor:
        """y = r + gamma^m (1 - d) (min(Q1', Q2')(s', a') - alpha log pi(a' | s')), a' drawn from the policy."""
        with self.autocast():
            a_next, logp_next = self.actor(t["x_next"]).sample_with_log_prob(self.generator)
        q_next = torch.min(*self.critics_at(self.q1_target, self.q2_target, x=t["x_next"], a=a_next)).float()
        return self.td_target(t, q_next - self.log_alpha.exp() * logp_next)

    def temperature_loss(self, logp: torch.Tensor) -> torch.Tensor:
        """-mean log_alpha (log pi + target entropy): its gradient raises alpha when entropy < target."""
        return -(self.log_alpha * (logp.detach() + self.target_entropy)).mean()

    def update(self, t: dict[str, torch.Tensor]) -> dict[str, float]:
        """One critic, one actor and (``autotune``) one temperature step on a batch of tensors."""
        qf_loss, q1 = self.critic_step((self.q1, self.q2), self.critic_optimizer, t, self.soft_target(t))
        metrics = {"losses/qf_loss": qf_loss.item() / 2.0, "losses/q_values": q1.mean().item()}
        return {**metrics, **self.actor_step(t)}

    def actor_step(self, t: dict[str, torch.Tensor]) -> dict[str, float]:
        """One actor step against min(Q1, Q2) (the critics frozen), then the temperature's."""
        with frozen(self.q1, self.q2):
            with self.autocast():
                a, logp = self.actor(t["x"]).sample_with_log_prob(self.generator)
            q_pi, dq_da = self.min_q_and_action_gradient(t["x"], a)
            alpha_logp = self.log_alpha.detach().exp() * logp
            actor_loss = (alpha_logp - q_pi).mean()
            # the same gradient as actor_loss's: the critics' part enters through dq_da, found side by side
            self.step(self.actor_optimizer, alpha_logp.mean() - (a * dq_da).sum())
        metrics = {"losses/actor_loss": actor_loss.item(), "losses/entropy": -logp.mean().item()}
        return {**metrics, **self.temperature_step(logp)}

    def min_q_and_action_gradient(self, x: torch.Tensor, a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """min(Q1, Q2)(x, a) per sample, and the gradient of its batch mean with respect to ``a``: each
        critic's backward pass :attr:`side_by_side` (the critics frozen: no weight gradients)."""
        a_in = a.detach().requires_grad_(True)
        qs = [q.float() for q in self.critics_at(self.q1, self.q2, x=x, a=a_in)]
        q_min = torch.min(*qs)
        slopes = torch.autograd.grad(q_min.mean(), qs)  # through the min and the mean only

        def action_gradient(q_and_slope: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
            q, slope = q_and_slope
            return torch.autograd.grad(q, a_in, slope)[0]

        return q_min.detach(), sum(self.side_by_side.map(action_gradient, list(zip(qs, slopes))))

    def temperature_step(self, logp: torch.Tensor) -> dict[str, float]:
        """With ``autotune``, one Adam step of log(alpha) on the actor's log-probabilities."""
        metrics = {}
        if self.autotune:
            alpha_loss = self.temperature_loss(logp)
            self.step(self.alpha_optimizer, alpha_loss, clip=False)
            metrics["losses/alpha_loss"] = alpha_loss.item()
        metrics["losses/alpha"] = self.alpha
        return metrics
