"""Proximal Policy Optimization (Schulman et al. 2017, arXiv 1707.06347), clipped-surrogate variant.

One ``train_iteration`` = ``num_steps`` steps of ``num_envs`` vectorised envs, then ``epochs``
passes of shuffled minibatches over the valid transitions. Advantages are GAE(lambda) with
truncation bootstrapped from V(final observation) (see :mod:`her_rl.algos.rollout`). The learning
rate and clip range can be annealed linearly to 0 over ``anneal_steps`` env steps.

Actor and critic are separate MLPs; the critic has one output per value head.
:class:`PPOLearner` is everything but how advantages are made, so RND-PPO
(:mod:`her_rl.algos.rnd_ppo`) shares it with :class:`PPO` and writes only its ``_advantages``
and what it trains besides the actor-critic (``_extra_update``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from her_rl.agent import IterationResult
from her_rl.algos.onpolicy import OnPolicyLearner, explained_variance
from her_rl.algos.rollout import Rollout
from her_rl.errors import ConfigError
from her_rl.rl.losses import ClipLoss
from her_rl.rl.returns import whiten
from her_rl.rl.updates import minibatches
from her_rl.rules import BOOL, COUNT, NON_NEGATIVE, POSITIVE, UNIT, UNIT_OPEN_CLOSED, optional, setting


@dataclass(eq=False)
class PPOLearner(OnPolicyLearner):
    """The clipped-surrogate learner; a subclass makes the advantages and value targets."""

    num_steps: int = setting(32, COUNT, "Steps per env per iteration (8 envs x 32: 256 transitions per update).")
    epochs: int = setting(20, COUNT, "Passes over each rollout.")
    minibatch_size: int = setting(256, COUNT, "Transitions per minibatch.")
    lr_anneal: bool = setting(True, BOOL, "Linear decay of the learning rate to 0 over anneal_steps env steps.")
    clip_eps: float = setting(0.2, POSITIVE, "Clip range of the probability ratio.")
    clip_anneal: bool = setting(True, BOOL, "Linear decay of clip_eps to 0 over anneal_steps env steps.")
    anneal_steps: int | None = setting(100_000, optional(COUNT),
                                       "Horizon of both schedules, needed when either is on (rl-zoo trains CartPole "
                                       "for 1e5 steps).")
    gae_lambda: float = setting(0.8, UNIT, "GAE lambda.")
    vf_coef: float = setting(1.0, NON_NEGATIVE,
                             "Weight of the value loss; ours is 0.5 * MSE, so 1.0 equals SB3's vf_coef 0.5 on plain "
                             "MSE.")
    norm_adv: bool = setting(True, BOOL, "Whiten advantages per minibatch.")
    target_kl: float | None = setting(None, optional(POSITIVE),
                                      "Stop an iteration's epochs early when the mean approximate KL exceeds this.")

    @classmethod
    def check_config(cls, values: dict[str, Any]) -> None:
        super().check_config(values)
        if (values.get("lr_anneal") or values.get("clip_anneal")) and not values.get("anneal_steps"):
            raise ConfigError("algo.anneal_steps=null is not allowed with lr_anneal or clip_anneal: annealing needs "
                              "the env steps until lr/clip reach 0 (an integer >= 1)")

    def rollout_steps(self, horizon: int | None) -> tuple[int, str]:
        return self.num_steps, "num_steps"

    def build(self) -> None:
        self.params = list(self.actor.parameters()) + list(self.critic.parameters())
        self.optimizer = torch.optim.Adam(self.params, lr=self.lr, eps=1e-5, fused=True)
        self.clip_loss = ClipLoss(self.clip_eps)

    def _advantages(self, ro: Rollout) -> tuple[torch.Tensor, torch.Tensor, dict]:
        """``(advantages [T, N], value targets [T, N, H], extra metrics)``."""
        raise NotImplementedError

    def _extra_update(self, ro: Rollout, index: torch.Tensor) -> dict:
        """What else an iteration trains on the rollout's real transitions ``index``; returns metrics."""
        return {}

    def _schedule(self) -> float:
        """Fraction of the initial lr / clip range still in use (linear decay to 0)."""
        if not self.anneal_steps:
            return 1.0
        return max(0.0, 1.0 - self.global_step / float(self.anneal_steps))

    def train_iteration(self, max_env_steps: int | None = None) -> IterationResult:
        frac = self._schedule()
        lr = self.lr * frac if self.lr_anneal else self.lr
        clip = self.clip_eps * frac if self.clip_anneal else self.clip_eps
        for g in self.optimizer.param_groups:
            g["lr"] = lr
        ro = self.collector.collect(self.sample, self.critic, self.num_steps, self.VALUE_HEADS)
        adv, ret, metrics = self._advantages(ro)
        idx = ro.valid_index()
        ret_b = Rollout.take(ret, idx)
        metrics.update(self._update(Rollout.take(ro.obs[:-1], idx), Rollout.take(ro.actions, idx),
                                   Rollout.take(ro.logp, idx), Rollout.take(adv, idx), ret_b, clip))
        metrics.update(self._extra_update(ro, idx))
        values_b = Rollout.take(ro.values[:-1], idx)
        metrics["losses/explained_variance"] = explained_variance(values_b[:, 0], ret_b[:, 0])  # extrinsic head
        metrics["charts/learning_rate"] = lr
        metrics["charts/clip_eps"] = clip
        if ro.episode_returns:  # lets "first time the sparse reward was found" be read off TensorBoard
            metrics["charts/episodic_return_max"] = max(ro.episode_returns)
        return self.finish(ro, metrics)

    def _update(self, obs, actions, old_logp, adv, ret, clip: float) -> dict:
        """``epochs`` passes of minibatches over the batch (fewer when the KL passes ``target_kl``)."""
        B = obs.shape[0]
        sums = {"pg": 0.0, "v": 0.0, "ent": 0.0, "kl": 0.0, "cf": 0.0}
        n = 0
        for _ in range(self.epochs):
            kls = []
            for mb in minibatches(B, self.minibatch_size, self.generator):
                logp, entropy = self.actor.evaluate(obs[mb], actions[mb])
                a = whiten(adv[mb]) if self.norm_adv else adv[mb]
                pg_loss = self.clip_loss(logp, old_logp[mb], a, eps=clip)
                v_loss = 0.5 * ((self.critic(obs[mb]) - ret[mb]) ** 2).sum(-1).mean()
                ent_loss = self.entropy_loss(entropy)
                self.step(self.optimizer, pg_loss + self.vf_coef * v_loss + self.ent_coef * ent_loss)
                with torch.no_grad():
                    log_ratio = logp - old_logp[mb]
                    kl = float(((log_ratio.exp() - 1) - log_ratio).mean())  # the k3 estimator
                kls.append(kl)
                sums["pg"] += pg_loss.item()
                sums["v"] += v_loss.item()
                sums["ent"] -= ent_loss.item()
                sums["kl"] += kl
                sums["cf"] += ClipLoss.clip_fraction(logp, old_logp[mb], clip) if clip > 0 else 0.0
                n += 1
            if self.target_kl is not None and np.mean(kls) > self.target_kl:
                break
        n = max(n, 1)
        return {"losses/policy_loss": sums["pg"] / n, "losses/value_loss": sums["v"] / n,
                "losses/entropy": sums["ent"] / n, "losses/approx_kl": sums["kl"] / n,
                "losses/clipfrac": sums["cf"] / n}


@dataclass(eq=False)
class PPO(PPOLearner):
    """PPO: GAE(``gamma``, ``gae_lambda``) advantages of the one value head."""

    NAME = "ppo"

    gamma: float = setting(0.98, UNIT_OPEN_CLOSED, "Discount.")

    def _advantages(self, ro: Rollout) -> tuple[torch.Tensor, torch.Tensor, dict]:
        adv, ret = ro.gae(self.gamma, self.gae_lambda)
        return adv, ret.unsqueeze(-1), {}
