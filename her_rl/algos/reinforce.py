"""REINFORCE (Williams 1992): Monte-Carlo policy gradient on whole episodes.

One ``train_iteration`` resets the ``num_envs`` vectorised envs, runs each until it has ended one
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

from typing import Sequence

import numpy as np
import torch
import torch.nn as nn

from her_rl.agent import IterationResult
from her_rl.algos.rollout import RolloutCollector, explained_variance, make_actor_critic, obs_for_act
from her_rl.registry import ConfigError
from her_rl.rl.losses import EntropyLoss, PGLoss
from her_rl.rl.returns import gae


class Reinforce:
    algo_name = "reinforce"

    def __init__(
        self,
        env: dict,
        seed: int = 0,
        device: str = "cpu",
        inference: bool = False,
        num_envs: int = 4,
        lr: float = 1e-2,
        gamma: float = 0.99,
        baseline: str = "none",
        vf_lr: float = 1e-2,
        normalize_adv: bool = True,
        ent_coef: float = 0.0,
        max_grad_norm: float | None = None,
        hidden: Sequence[int] = (64,),
        activation: str = "tanh",
        normalize_obs: bool = False,
        obs_clip: float = 10.0,
        log_std_init: float = 0.0,
        max_episode_steps: int = 100_000,
    ):
        if baseline not in ("none", "critic"):
            raise ConfigError(f"reinforce: baseline must be 'none' or 'critic', got {baseline!r}")
        if int(num_envs) < 1:
            raise ConfigError(f"reinforce: num_envs must be >= 1, got {num_envs}")
        self.device = torch.device(device)
        self.gamma, self.normalize_adv, self.ent_coef = float(gamma), normalize_adv, float(ent_coef)
        self.max_grad_norm, self.max_episode_steps = max_grad_norm, int(max_episode_steps)
        self.envs, self.obs_proc, self.policy, critic = make_actor_critic(
            self.algo_name, env, num_envs, seed, normalize_obs, obs_clip, hidden, activation, log_std_init,
            inference=inference, value_heads=1 if baseline == "critic" else None)
        self.policy = self.policy.to(self.device)
        self.optimizer = torch.optim.Adam(self.policy.parameters(), lr=float(lr))
        self.critic = None
        if critic is not None:
            self.critic = critic.to(self.device)
            self.vf_optimizer = torch.optim.Adam(self.critic.parameters(), lr=float(vf_lr))
        self.pg_loss, self.entropy_loss = PGLoss(), EntropyLoss()
        self.gen = torch.Generator(device=self.device).manual_seed(int(seed))
        self.collector = None if inference else RolloutCollector(self.envs, self.obs_proc, self.policy, seed, self.device)
        self.global_step = 0
        self.iteration = 0

    @torch.no_grad()
    def act(self, obs, explore: bool = False) -> np.ndarray:
        x = obs_for_act(self.obs_proc, obs, self.device)
        a = self.policy.sample(x, self.gen)[0] if explore else self.policy.greedy(x)
        return self.policy.to_env(a)

    def train_iteration(self) -> IterationResult:
        ro = self.collector.collect(
            lambda x: self.policy.sample(x, self.gen), self.critic, one_episode_each=True,
            max_steps=self.max_episode_steps,
        )
        term, dones = ro.gae_flags()
        # lambda = 1: A_t = sum_k gamma^k r_{t+k} (+ gamma^.. V(final) if truncated) - V(s_t)
        adv, returns = gae(ro.rewards, ro.values[:-1, :, 0], ro.values[1:, :, 0], term, dones, self.gamma, 1.0)
        idx = torch.nonzero(ro.valid.reshape(-1)).squeeze(-1)
        D = ro.obs.shape[-1]
        obs = ro.obs[:-1].reshape(-1, D)[idx]
        actions = ro.actions.reshape(-1, *ro.actions.shape[2:])[idx]
        a = adv.reshape(-1)[idx]
        if self.normalize_adv and len(a) > 1:
            a = (a - a.mean()) / (a.std() + 1e-8)
        logp, entropy = self.policy.evaluate(obs, actions)
        pg_loss = self.pg_loss(logp, a)
        ent_loss = self.entropy_loss(entropy)
        loss = pg_loss + self.ent_coef * ent_loss
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.max_grad_norm:
            nn.utils.clip_grad_norm_(self.policy.parameters(), self.max_grad_norm)
        self.optimizer.step()
        metrics = {"losses/policy_loss": pg_loss.item(), "losses/entropy": -ent_loss.item(),
                   "charts/learning_rate": self.optimizer.param_groups[0]["lr"]}
        if self.critic is not None:
            ret = returns.reshape(-1)[idx]
            v_loss = 0.5 * ((self.critic(obs).squeeze(-1) - ret) ** 2).mean()
            self.vf_optimizer.zero_grad(set_to_none=True)
            v_loss.backward()
            self.vf_optimizer.step()
            metrics["losses/value_loss"] = v_loss.item()
            metrics["losses/explained_variance"] = explained_variance(ro.values[:-1, :, 0].reshape(-1)[idx], ret)
        self.global_step += ro.env_steps
        self.iteration += 1
        return IterationResult(env_steps=ro.env_steps, metrics=metrics, episode_returns=ro.episode_returns,
                               episode_lengths=ro.episode_lengths, episode_successes=ro.episode_successes)

    def state_dict(self) -> dict:
        state = {"policy": self.policy.state_dict(), "optimizer": self.optimizer.state_dict(),
                 "obs_rms": self.obs_proc.state_dict(), "gen": self.gen.get_state(),
                 "global_step": self.global_step, "iteration": self.iteration}
        if self.critic is not None:
            state["critic"] = self.critic.state_dict()
            state["vf_optimizer"] = self.vf_optimizer.state_dict()
        return state

    def load_state_dict(self, state: dict) -> None:
        self.policy.load_state_dict(state["policy"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.obs_proc.load_state_dict(state["obs_rms"])
        self.gen.set_state(state["gen"])
        if self.critic is not None:
            self.critic.load_state_dict(state["critic"])
            self.vf_optimizer.load_state_dict(state["vf_optimizer"])
        self.global_step, self.iteration = int(state["global_step"]), int(state["iteration"])
