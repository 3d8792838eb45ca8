"""CrossQ with Hindsight Experience Replay: SAC without target networks, its critics batch-renormalised.

Bhatt et al., ICLR 2024, "CrossQ: Batch Normalization in Deep Reinforcement Learning for Greater Sample
Efficiency and Simplicity": HER-SAC (her_rl/algos/her_sac.py: the squashed Gaussian actor and the
entropy temperature, on the cycle every hindsight learner shares, her_rl/algos/hindsight.py) with

    critics: twin RenormCritics (her_rl/rl/batch_renorm.py: batch renormalisation of the input and of
             every hidden layer) and no target copies. The current and next state-actions go through
             each critic in ONE forward pass, [(s, g, a); (s', g, a')] with a' ~ pi(. | s', g), so the
             normalisation statistics cover both halves (what makes the bootstrap from the online
             critics stable):
                 y    = r + gamma^m (1 - terminated) (min(Q1, Q2)(s', g, a') - alpha log pi(a' | s', g)),
                        held constant (no gradient through the second half)
                 loss = mean (Q1(s, g, a) - y)^2 + mean (Q2(s, g, a) - y)^2
    actor:   every ``policy_delay``-th update (the paper's 3), loss = mean (alpha log pi - min(Q1, Q2)),
             the critics in inference mode (their running statistics);
    Adam:    beta1 = ``adam_beta1`` (the paper's 0.5) for actor and critics.

The bootstrap (not the entropy bonus) is bounded to the returns the env's reward range allows
(``clip_target``, as HER-REDQ does: sparse goal rewards). Departures from the paper: the critics are
``hidden`` wide like every hindsight learner's (the paper's are 2 x 2048, sb3-contrib's 2 x 1024), a
CPU-sized default; ``renorm_warmup`` counts gradient steps, as the paper's 100,000 warm-up steps do at
one update per env step. ``polyak`` and ``tau`` have nothing to move.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import ClassVar, Iterator

import torch
import torch.nn.functional as F

from her_rl.algos.her_sac import SoftActorCritic
from her_rl.algos.hindsight import HindsightLearner
from her_rl.algos.parallel_update import ParallelUpdate
from her_rl.rl.batch_renorm import RenormCritic
from her_rl.rules import CRITIC_THREADS, UNIT_OPEN_CLOSED, integer, real, setting


@dataclass(eq=False)
class HerCrossQ(SoftActorCritic):
    """HER-CrossQ agent: HER-SAC's actor and temperature, batch-renormalised critics, no targets."""

    NAME = "her_crossq"
    TARGETS: ClassVar[dict[str, str]] = {}
    STATE = ("actor", "q1", "q2", "actor_optimizer", "critic_optimizer", "alpha_optimizer", "log_alpha", "generator",
             *HindsightLearner.STATE)

    hidden: tuple[int, ...] = setting((256, 256),
                                      doc="Hidden layers (ReLU) of the actor and of both critics (the paper: a 256 x "
                                          "256 actor, 2048 x 2048 critics).")
    critic_threads: int = setting(1, CRITIC_THREADS,
                                  "2: the twin critics' passes run side by side, a critic per CPU thread (same "
                                  "numbers; faster with a second core free; leave threads at 1 with it).")
    policy_delay: int = setting(3, integer(1, 1000), "Critic updates per actor (and temperature) update.")
    adam_beta1: float = setting(0.5, real(0, 1, hi_open=True),
                                "Adam's first-moment decay for every optimiser (the paper's 0.5; Adam's default is "
                                "0.9).")
    renorm_momentum: float = setting(0.01, UNIT_OPEN_CLOSED,
                                     "How far the critics' running mean and variance move towards each batch's.")
    renorm_warmup: int = setting(100_000, integer(0),
                                 "Gradient steps of plain batch normalisation before the renormalisation corrections "
                                 "start.")
    clip_target: bool = setting(True,
                                doc="Bound the bootstrap to the returns the env's reward range allows (before the "
                                    "entropy bonus).")

    def build_critics(self) -> None:
        self.twin_critics(lambda: RenormCritic(self.inputs.dim, self.act_dim, self.hidden, self.renorm_momentum,
                                               self.renorm_warmup), self.critic_lr, targets=False)
        self.parallel = ParallelUpdate(self) if self.critic_threads == 2 else None

    def adam(self, params, lr: float) -> torch.optim.Adam:
        return torch.optim.Adam(params, lr=lr, betas=(self.adam_beta1, 0.999), fused=self.device.type == "cpu")

    def update(self, t: dict[str, torch.Tensor]) -> dict[str, float]:
        """One joint critic step; every ``policy_delay``-th update also an actor and temperature step."""
        if self.parallel is not None:  # critic_threads 2: her_rl/algos/parallel_update.py
            return self.parallel.crossq_update(t)
        batch = len(t["x"])
        x, a, entropy = self.joint_batch(t)
        with self.autocast():  # one pass of each critic over both halves: its batch statistics cover both
            q1, q2 = self.q1(x, a).float(), self.q2(x, a).float()
        with torch.no_grad():
            y = self.td_target(t, torch.min(q1[batch:], q2[batch:]), entropy=entropy)
        qf_loss = F.mse_loss(q1[:batch], y) + F.mse_loss(q2[:batch], y)
        self.step(self.critic_optimizer, qf_loss)
        metrics = {"losses/qf_loss": qf_loss.item() / 2.0, "losses/q_values": q1[:batch].mean().item()}
        if self.updates % self.policy_delay == 0:
            with self.critics_acting():
                metrics.update(self.actor_step(t))
        return metrics

    @torch.no_grad()
    def joint_batch(self, t: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """What one pass of a critic reads, [(s, g, a); (s', g, a')] with a' ~ pi(. | s', g), and the entropy
        term alpha log pi(a' | s', g) of the target."""
        with self.autocast():
            a_next, logp_next = self.actor(t["x_next"]).sample_with_log_prob(self.generator)
        x = torch.cat([t["x"], t["x_next"]])
        a = torch.cat([t["action"], a_next.to(t["action"].dtype)])
        return x, a, self.log_alpha.exp() * logp_next.float()

    @contextmanager
    def critics_acting(self) -> Iterator[None]:
        """The critics in inference mode (their running statistics): the actor climbs them as they act."""
        self.q1.eval(), self.q2.eval()
        try:
            yield
        finally:
            self.q1.train(), self.q2.train()
