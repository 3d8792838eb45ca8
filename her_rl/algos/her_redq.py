"""REDQ with Hindsight Experience Replay: many updates per env step, kept stable by an ensemble.

Chen et al. 2021, "Randomized Ensembled Double Q-Learning": HER-SAC (her_rl/algos/her_sac.py: its
squashed Gaussian actor and entropy temperature, on the cycle every hindsight learner shares,
her_rl/algos/hindsight.py) with an ensemble of ``ensemble`` critics instead of two:

    target:  y = r + gamma^m (1 - terminated) (min over a random subset of ``subset`` target critics
             of Q'_i(s_m, g, a') - alpha log pi(a' | s_m, g)),  a' drawn from the policy
    critics: every critic steps towards the same y (sum of their mean squared errors)
    actor:   loss = mean (alpha log pi(a | s, g) - mean_i Q_i(s, g, a))

and the two changes Hiraoka 2023 ("Efficient Sparse-Reward Goal-Conditioned RL with a High Replay
Ratio and Regularization") found to make a high replay ratio work on sparse goal tasks:
``layer_norm`` in every critic, and the bootstrapped Q bounded to the range a reward of -1 or 0 per
step allows, [-1/(1-gamma), 0] (``clip_target``). The replay ratio is ``updates_per_step`` (the
REDQ paper uses 20, on a GPU); the defaults keep the shared cycle's 40 updates per 16 episodes,
since ten critics cost about five times HER-SAC's update on a CPU.

Departure: the targets move by the shared Polyak step once per cycle (decay ``polyak``), as in every
hindsight learner, not after each update.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from her_rl.algos.her_sac import SoftActorCritic
from her_rl.algos.hindsight import HindsightLearner, frozen
from her_rl.errors import ConfigError
from her_rl.rl.nets import EnsembleCritic
from her_rl.rules import BOOL, integer, setting


@dataclass(eq=False)
class HerREDQ(SoftActorCritic):
    """HER-REDQ agent: HER-SAC's actor and temperature, an ensemble of layer-normalised critics."""

    NAME = "her_redq"
    TARGETS = {"critics": "critics_target"}
    STATE = ("actor", "critics", "critics_target", "actor_optimizer", "critic_optimizer", "alpha_optimizer",
             "log_alpha", "generator", *HindsightLearner.STATE)

    ensemble: int = setting(10, integer(2, 100), "Critics in the ensemble, all trained towards the same target.")
    subset: int = setting(2, integer(1, 100),
                          "Target critics whose minimum makes the target, drawn afresh for every update.")
    layer_norm: bool = setting(True, BOOL, "LayerNorm after each hidden layer of every critic.")
    clip_target: bool = setting(True,
                                doc="Bound the bootstrapped Q to [-1/(1-gamma), 0], the range a -1/0 reward allows "
                                    "(before the entropy bonus).")

    @classmethod
    def check_config(cls, values: dict[str, Any]) -> None:
        super().check_config(values)
        ensemble, subset = values.get("ensemble", 10), values.get("subset", 2)
        if subset > ensemble:
            raise ConfigError(f"algo.subset={subset} is not allowed: it is larger than algo.ensemble ({ensemble})")

    def build_critics(self) -> None:
        self.critics, self.critics_target = (EnsembleCritic(
            self.ensemble, self.inputs.dim, self.act_dim, self.hidden, self.layer_norm).to(self.device) for _ in range(2))
        self.critic_optimizer = self.adam(self.critics.parameters(), self.critic_lr)

    @torch.no_grad()
    def soft_target(self, t: dict[str, torch.Tensor]) -> torch.Tensor:
        subset = torch.randperm(self.ensemble, generator=self.generator, device=self.device)[: self.subset]
        with self.autocast():
            a_next, logp_next = self.actor(t["x_next"]).sample_with_log_prob(self.generator)
            q_next = self.critics_target(t["x_next"], a_next, members=subset).float().min(0).values
        return self.td_target(t, q_next, entropy=self.log_alpha.exp() * logp_next)

    def update(self, t: dict[str, torch.Tensor]) -> dict[str, float]:
        """One step of every critic, one actor and (``autotune``) one temperature step."""
        y = self.soft_target(t)
        with self.autocast():
            qs = self.critics(t["x"], t["action"]).float()
        qf_loss = (qs - y).pow(2).mean(1).sum()  # every member towards the same target
        self.step(self.critic_optimizer, qf_loss)
        with frozen(self.critics):
            with self.autocast():
                a, logp = self.actor(t["x"]).sample_with_log_prob(self.generator)
                q_pi = self.critics(t["x"], a).float().mean(0)
            actor_loss = (self.log_alpha.detach().exp() * logp - q_pi).mean()
            self.step(self.actor_optimizer, actor_loss)
        metrics = {"losses/qf_loss": qf_loss.item() / self.ensemble, "losses/actor_loss": actor_loss.item(),
                   "losses/q_values": qs.mean().item(), "losses/entropy": -logp.mean().item()}
        return {**metrics, **self.temperature_step(logp)}
