"""Proximal Policy Optimization (Schulman et al. 2017, arXiv 1707.06347), clipped-surrogate variant.

One ``train_iteration`` = ``num_steps`` steps of ``num_envs`` vectorised envs, then ``epochs``
passes of shuffled minibatches over the valid transitions. Advantages are GAE(lambda) with
truncation bootstrapped from V(final observation) (see :mod:`her_rl.algos.rollout`). The learning
rate and clip range can be annealed linearly to 0 over ``anneal_steps`` env steps.

Actor and critic are separate MLPs; the critic has one output per value head so RND-PPO
(:mod:`her_rl.algos.rnd_ppo`) reuses everything here and overrides only how advantages are made
(``_advantages``) and what is trained besides the actor-critic (``_extra_update``).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
import torch.nn as nn

from her_rl.agent import IterationResult
from her_rl.algos.rollout import Rollout, RolloutCollector, explained_variance, make_actor_critic, obs_for_act
from her_rl.registry import ConfigError
from her_rl.rl.losses import ClipLoss, EntropyLoss
from her_rl.rl.returns import gae


class PPO:
    algo_name = "ppo"
    n_value_heads = 1

    def __init__(
        self,
        env: dict,
        seed: int = 0,
        device: str = "cpu",
        inference: bool = False,
        num_envs: int = 8,
        num_steps: int = 32,
        epochs: int = 20,
        minibatch_size: int = 256,
        lr: float = 1e-3,
        lr_anneal: bool = True,
        clip_eps: float = 0.2,
        clip_anneal: bool = True,
        anneal_steps: int | None = 100_000,
        gamma: float = 0.98,
        gae_lambda: float = 0.8,
        ent_coef: float = 0.0,
        vf_coef: float = 1.0,
        max_grad_norm: float | None = 0.5,
        norm_adv: bool = True,
        target_kl: float | None = None,
        hidden: Sequence[int] = (64, 64),
        activation: str = "tanh",
        normalize_obs: bool = False,
        obs_clip: float = 10.0,
        log_std_init: float = 0.0,
    ):
        for name, v in (("num_envs", num_envs), ("num_steps", num_steps), ("epochs", epochs),
                        ("minibatch_size", minibatch_size)):
            if int(v) < 1:
                raise ConfigError(f"{self.algo_name}: {name} must be >= 1, got {v}")
        if (lr_anneal or clip_anneal) and not anneal_steps:
            raise ConfigError(f"{self.algo_name}: annealing needs anneal_steps (env steps until lr/clip reach 0)")
        self.device = torch.device(device)
        self.num_steps, self.epochs, self.minibatch_size = int(num_steps), int(epochs), int(minibatch_size)
        self.lr, self.lr_anneal, self.clip_eps, self.clip_anneal = float(lr), lr_anneal, float(clip_eps), clip_anneal
        self.anneal_steps = anneal_steps
        self.gamma, self.gae_lambda = float(gamma), float(gae_lambda)
        self.ent_coef, self.vf_coef, self.max_grad_norm = float(ent_coef), float(vf_coef), max_grad_norm
        self.norm_adv, self.target_kl = norm_adv, target_kl

        self.envs, self.obs_proc, self.policy, self.critic = make_actor_critic(
            self.algo_name, env, num_envs, seed, normalize_obs, obs_clip, hidden, activation, log_std_init,
            inference=inference, value_heads=self.n_value_heads)
        self.policy, self.critic = self.policy.to(self.device), self.critic.to(self.device)
        self.params = list(self.policy.parameters()) + list(self.critic.parameters())
        self.optimizer = torch.optim.Adam(self.params, lr=self.lr, eps=1e-5, fused=True)
        self.clip_loss, self.entropy_loss = ClipLoss(self.clip_eps), EntropyLoss()
        self.gen = torch.Generator(device=self.device).manual_seed(int(seed))
        self.collector = None if inference else RolloutCollector(self.envs, self.obs_proc, self.policy, seed, self.device)
        self.global_step = 0
        self.iteration = 0

    # -- acting ----------------------------------------------------------------------------
    def _sample(self, obs: torch.Tensor):
        return self.policy.sample(obs, self.gen)

    def _values(self, obs: torch.Tensor) -> torch.Tensor:
        return self.critic(obs)

    @torch.no_grad()
    def act(self, obs, explore: bool = False) -> np.ndarray:
        x = obs_for_act(self.obs_proc, obs, self.device)
        a = self.policy.sample(x, self.gen)[0] if explore else self.policy.greedy(x)
        return self.policy.to_env(a)

    # -- learning --------------------------------------------------------------------------
    def _schedule(self) -> float:
        """Fraction of the initial lr / clip range still in use (linear decay to 0)."""
        if not self.anneal_steps:
            return 1.0
        return max(0.0, 1.0 - self.global_step / float(self.anneal_steps))

    def _advantages(self, ro: Rollout) -> tuple[torch.Tensor, torch.Tensor, dict]:
        """``(advantages [T, N], value targets [T, N, H], extra metrics)``."""
        term, dones = ro.gae_flags()
        adv, ret = gae(ro.rewards, ro.values[:-1, :, 0], ro.values[1:, :, 0], term, dones, self.gamma, self.gae_lambda)
        return adv, ret.unsqueeze(-1), {}

    def _extra_update(self, ro: Rollout, valid_idx: torch.Tensor) -> dict:
        """Hook for what else an iteration trains (RND's predictor); returns metrics."""
        return {}

    def train_iteration(self) -> IterationResult:
        frac = self._schedule()
        lr = self.lr * frac if self.lr_anneal else self.lr
        clip = self.clip_eps * frac if self.clip_anneal else self.clip_eps
        for g in self.optimizer.param_groups:
            g["lr"] = lr
        ro = self.collector.collect(self._sample, self._values, self.num_steps, self.n_value_heads)
        adv, ret, metrics = self._advantages(ro)
        flat_valid = ro.valid.reshape(-1)
        idx = torch.nonzero(flat_valid).squeeze(-1)  # only real transitions enter the losses
        D = ro.obs.shape[-1]
        obs = ro.obs[:-1].reshape(-1, D)[idx]
        actions = ro.actions.reshape(-1, *ro.actions.shape[2:])[idx]
        old_logp = ro.logp.reshape(-1)[idx]
        adv_b = adv.reshape(-1)[idx]
        ret_b = ret.reshape(-1, self.n_value_heads)[idx]
        values_b = ro.values[:-1].reshape(-1, self.n_value_heads)[idx]
        metrics.update(self._update(obs, actions, old_logp, adv_b, ret_b, clip))
        metrics.update(self._extra_update(ro, idx))
        metrics["losses/explained_variance"] = explained_variance(values_b[:, 0], ret_b[:, 0])  # extrinsic head
        metrics["charts/learning_rate"] = lr
        metrics["charts/clip_eps"] = clip
        if ro.episode_returns:  # lets "first time the sparse reward was found" be read off TensorBoard
            metrics["charts/episodic_return_max"] = max(ro.episode_returns)
        self.global_step += ro.env_steps
        self.iteration += 1
        return IterationResult(env_steps=ro.env_steps, metrics=metrics, episode_returns=ro.episode_returns,
                               episode_lengths=ro.episode_lengths, episode_successes=ro.episode_successes)

    def _update(self, obs, actions, old_logp, adv, ret, clip: float) -> dict:
        B = obs.shape[0]
        sums = {"pg": 0.0, "v": 0.0, "ent": 0.0, "kl": 0.0, "cf": 0.0}
        n = 0
        for _ in range(self.epochs):
            perm = torch.randperm(B, generator=self.gen, device=self.device)
            kls = []
            for start in range(0, B, self.minibatch_size):
                mb = perm[start:start + self.minibatch_size]
                logp, entropy = self.policy.evaluate(obs[mb], actions[mb])
                a = adv[mb]
                if self.norm_adv and len(mb) > 1:
                    a = (a - a.mean()) / (a.std() + 1e-8)
                pg_loss = self.clip_loss(logp, old_logp[mb], a, eps=clip)
                v_loss = 0.5 * ((self.critic(obs[mb]) - ret[mb]) ** 2).sum(-1).mean()
                ent_loss = self.entropy_loss(entropy)
                loss = pg_loss + self.vf_coef * v_loss + self.ent_coef * ent_loss
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                if self.max_grad_norm:
                    nn.utils.clip_grad_norm_(self.params, self.max_grad_norm)
                self.optimizer.step()
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

    # -- checkpoints -----------------------------------------------------------------------
    def state_dict(self) -> dict:
        """Networks, optimiser, observation statistics, counters and the sampling RNG.

        The env's own state is not saved: after a resume the training envs start new episodes.
        """
        return {"policy": self.policy.state_dict(), "critic": self.critic.state_dict(),
                "optimizer": self.optimizer.state_dict(), "obs_rms": self.obs_proc.state_dict(),
                "gen": self.gen.get_state(), "global_step": self.global_step, "iteration": self.iteration}

    def load_state_dict(self, state: dict) -> None:
        self.policy.load_state_dict(state["policy"])
        self.critic.load_state_dict(state["critic"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.obs_proc.load_state_dict(state["obs_rms"])
        self.gen.set_state(state["gen"])
        self.global_step, self.iteration = int(state["global_step"]), int(state["iteration"])
