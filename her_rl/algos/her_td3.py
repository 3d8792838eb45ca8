"""TD3 with Hindsight Experience Replay on any goal-conditioned env with a Box action space.

Fujimoto et al. 2018, "Addressing Function Approximation Error in Actor-Critic Methods": HER-DDPG
(her_rl/algos/her_ddpg.py: its deterministic actor, exploration and actor loss, on the cycle every
hindsight learner shares, her_rl/algos/hindsight.py) with TD3's three changes:

    twin critics:     y = r + gamma^m (1 - terminated) min(Q1', Q2')(s_m, g, a'), clipped to [-1/(1-gamma), 0]
                      (m = 1 unless ``n_step``); loss = mean (Q1 - y)^2 + mean (Q2 - y)^2
    target smoothing: a' = clip(pi'(s_m, g) + clip(target_noise * N(0, 1), -noise_clip, noise_clip), -1, 1)
    delayed actor:    the actor steps on every ``policy_delay``-th update only, on -Q1 (+ action_l2 * pi^2)

Departures from the paper: the targets (actor's and both critics') move once per cycle by the
Polyak step every hindsight learner takes (decay ``polyak`` after ``updates_per_cycle`` updates),
not by tau = 0.005 after each actor step; exploration is HER-DDPG's (``random_eps`` uniform actions
plus ``noise_eps`` Gaussian noise, not N(0, 0.1) alone), and so is the L2 penalty on the actor's
actions (``action_l2``); three hidden layers of 256, as HER-DDPG's, not 400 and 300.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from her_rl.algos.her_ddpg import HerDDPG
from her_rl.algos.hindsight import HindsightLearner
from her_rl.algos.parallel_update import ParallelUpdate
from her_rl.rl.nets import Critic
from her_rl.rules import CRITIC_THREADS, NON_NEGATIVE, integer, setting


@dataclass(eq=False)
class HerTD3(HerDDPG):
    """HER-TD3 agent: HER-DDPG's acting and exploration, TD3's critics and update."""

    NAME = "her_td3"
    TARGETS = {"actor": "actor_target", "q1": "q1_target", "q2": "q2_target"}
    STATE = ("actor", "actor_target", "q1", "q2", "q1_target", "q2_target", "actor_optimizer", "critic_optimizer",
             "exploration", "generator", *HindsightLearner.STATE)

    target_noise: float = setting(0.2, NON_NEGATIVE,
                                  "Std of the Gaussian noise on the target actor's action (target policy smoothing), "
                                  "in [-1, 1] units.")
    noise_clip: float = setting(0.5, NON_NEGATIVE, "That noise is clipped to [-noise_clip, noise_clip].")
    policy_delay: int = setting(2, integer(1, 1000),
                                "The actor steps on every policy_delay-th update only (the critics on every one).")
    critic_threads: int = setting(1, CRITIC_THREADS,
                                  "2: the twin critics' passes run side by side, a critic per CPU thread (same "
                                  "numbers; faster with a second core free; leave threads at 1 with it).")

    def build(self) -> None:
        self.build_actor()
        self.twin_critics(lambda: Critic(*self.dims), self.critic_lr)
        self.parallel = ParallelUpdate(self) if self.critic_threads == 2 else None

    def smoothed_target_action(self, x_next: torch.Tensor) -> torch.Tensor:
        """a' = clip(pi'(s') + clip(target_noise * N(0, 1), -noise_clip, noise_clip), -1, 1)."""
        with self.autocast():
            a_next = self.actor_target(x_next).float()
        noise = torch.randn(a_next.shape, generator=self.generator, device=self.device) * self.target_noise
        return (a_next + noise.clamp(-self.noise_clip, self.noise_clip)).clamp(-1.0, 1.0)

    @torch.no_grad()
    def target(self, t: dict[str, torch.Tensor]) -> torch.Tensor:
        """y = r + gamma^m (1 - d) min(Q1', Q2')(s', a'), a' :meth:`smoothed_target_action`."""
        a_next = self.smoothed_target_action(t["x_next"])
        with self.autocast():
            q_next = torch.min(self.q1_target(t["x_next"], a_next), self.q2_target(t["x_next"], a_next)).float()
        return self.td_target(t, q_next)

    def update(self, t: dict[str, torch.Tensor]) -> dict[str, float]:
        """One step of both critics; on every ``policy_delay``-th update (counted by ``updates``) an actor step."""
        if self.parallel is not None:  # critic_threads 2: her_rl/algos/parallel_update.py
            return self.parallel.td3_update(t)
        y = self.target(t)
        metrics = self.fit_twin_critics(t, y)  # mean (Q1 - y)^2 + mean (Q2 - y)^2, one step
        if self.updates % self.policy_delay == 0:  # the actor climbs Q1 alone
            metrics["losses/actor_loss"] = self.actor_step(t, self.q1)
        return metrics
