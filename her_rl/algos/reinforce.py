"""REINFORCE (Williams 1992): Monte-Carlo policy gradient on whole episodes.

One ``train_iteration`` resets the ``num_envs`` vectorised envs (seeded from the run's seed and the
iteration, so a resumed run replays the episodes of the one it continues), runs each until it has ended one
episode (a batch of ``num_envs`` complete episodes, steps after each env's end are masked out),
and takes one gradient step on ``-mean_t(log pi(a_t|s_t) * A_t)``.

``A_t`` is the discounted reward-to-go, computed with the shared GAE routine at ``lambda = 1``,
which is exactly the Monte-Carlo return minus the baseline:

* ``baseline: none`` -- values are 0, so ``A_t = G_t``. A truncated episode cannot be
  bootstrapped without a critic; its return simply stops at the time limit.
* ``baseline: critic`` -- a value net is fitted to the returns, ``A_t = G_t - V(s_t)`` and a
  truncated episode is bootstrapped with ``V(final observation)``.

``normalize_adv`` whitens ``A`` over the batch (the usual variance-reduction trick).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch

from her_rl.agent import IterationResult
from her_rl.algos.onpolicy import OnPolicyLearner, explained_variance, iteration_seed
from her_rl.algos.rollout import Rollout
from her_rl.rl.losses import PGLoss
from her_rl.rl.returns import whiten
from her_rl.rules import BOOL, COUNT, POSITIVE, UNIT_OPEN_CLOSED, choice, setting


@dataclass(eq=False)
class Reinforce(OnPolicyLearner):
    NAME = "reinforce"
    # no "collector": every iteration starts with a seeded reset, so no episode runs on into the next
    STATE = ("actor", "optimizer", "obs_proc", "generator", "global_step", "iteration", "critic", "vf_optimizer")

    num_envs: int = setting(4, doc="Episodes per update, one per parallel env.")
    lr: float = setting(1e-2, doc="Adam learning rate of the policy.")
    max_grad_norm: float | None = None
    hidden: Sequence[int] = setting((64,), doc="Hidden layers of the policy (and critic) MLP.")
    gamma: float = setting(0.99, UNIT_OPEN_CLOSED, "Discount.")
    baseline: str = setting("none", choice("none", "critic"),
                            "none | critic (critic: A = G - V(s), truncated episodes bootstrapped).")
    vf_lr: float = setting(1e-2, POSITIVE, "Critic learning rate (baseline: critic).")
    normalize_adv: bool = setting(True, BOOL, "Whiten returns/advantages over the batch.")
    max_episode_steps: int = setting(100_000, COUNT, "Safety cap on one batch of episodes.")

    def rollout_steps(self, horizon: int | None) -> tuple[int, str | None]:
        if horizon is not None and horizon <= self.max_episode_steps:
            return horizon, None  # one episode each: the env's own cap, which no algo key lowers
        return self.max_episode_steps, "max_episode_steps"

    def has_critic(self) -> bool:
        return self.baseline == "critic"

    def build(self) -> None:
        self.optimizer = torch.optim.Adam(self.actor.parameters(), lr=self.lr)
        self.vf_optimizer = None if self.critic is None else torch.optim.Adam(self.critic.parameters(), lr=self.vf_lr)
        self.pg_loss = PGLoss()

    def train_iteration(self, max_env_steps: int | None = None) -> IterationResult:
        ro = self.collector.collect(self.sample, self.critic, one_episode_each=True, max_steps=self.max_episode_steps,
                                    reset_seed=iteration_seed(self.seed, self.iteration))
        # lambda = 1: A_t = sum_k gamma^k r_{t+k} (+ gamma^.. V(final) if truncated) - V(s_t)
        adv, returns = ro.gae(self.gamma, 1.0)
        idx = ro.valid_index()
        obs = Rollout.take(ro.obs[:-1], idx)
        a = Rollout.take(adv, idx)
        a = whiten(a) if self.normalize_adv else a
        logp, entropy = self.actor.evaluate(obs, Rollout.take(ro.actions, idx))
        pg_loss = self.pg_loss(logp, a)
        ent_loss = self.entropy_loss(entropy)
        self.step(self.optimizer, pg_loss + self.ent_coef * ent_loss)
        metrics = {"losses/policy_loss": pg_loss.item(), "losses/entropy": -ent_loss.item(),
                   "charts/learning_rate": self.optimizer.param_groups[0]["lr"]}
        if self.critic is not None:
            ret = Rollout.take(returns, idx)
            v_loss = 0.5 * ((self.critic(obs).squeeze(-1) - ret) ** 2).mean()
            self.step(self.vf_optimizer, v_loss, clip=False)
            metrics["losses/value_loss"] = v_loss.item()
            metrics["losses/explained_variance"] = explained_variance(Rollout.take(ro.values[:-1, :, 0], idx), ret)
        return self.finish(ro, metrics)
