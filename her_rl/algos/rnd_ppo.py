"""PPO with Random Network Distillation exploration (Burda et al. 2018, arXiv 1810.12894).

Everything is PPO (:class:`her_rl.algos.ppo.PPOLearner`) except:

* the critic has two heads, ``V_ext`` (episodic, ``gamma_ext``) and ``V_int`` (non-episodic,
  ``gamma_int``), both regressed in the PPO value loss;
* the intrinsic reward of step t is the RND prediction error on its true next observation
  (``obs[t+1]``, the final observation when the episode ended), scaled by the running std of the
  discounted intrinsic return (:meth:`her_rl.rl.rnd.RND.normalize_rewards`);
* the advantage is ``ext_coef * A_ext + int_coef * A_int`` (paper: 2 and 1). ``A_int`` ignores
  episode ends: its GAE recursion runs through them (through the masked NEXT_STEP reset step,
  which carries intrinsic reward 0), as the paper's non-episodic intrinsic return does;
* after the PPO epochs the RND predictor is trained for the same epochs and minibatches on a
  random ``predictor_fraction`` (0.25) of each minibatch of next observations;
* the RND input statistics start from ``rnd_init_steps`` vector steps of a uniformly random
  policy, taken when the agent is built and counted in the first iteration's env steps (none
  when ``rnd_whiten`` is off, since nothing reads them then);
* ``int_norm_decay`` < 1 makes the intrinsic-return std an exponentially weighted one (weight of
  earlier iterations times that factor per iteration) instead of the paper's all-history one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import torch

from her_rl.agent import IterationResult
from her_rl.algos.ppo import PPOLearner
from her_rl.algos.rollout import Rollout
from her_rl.errors import ConfigError
from her_rl.rl.updates import minibatches
from her_rl.rl.rnd import RND
from her_rl.rules import BOOL, COUNT, HIDDEN, NON_NEGATIVE, POSITIVE, UNIT_OPEN_CLOSED, integer, setting


@dataclass(eq=False)
class RNDPPO(PPOLearner):
    NAME = "rnd_ppo"
    VALUE_HEADS = 2  # column 0: extrinsic, column 1: intrinsic

    STATE = (*PPOLearner.STATE, "rnd", "rnd.optimizer", "rnd.rng", "pending_steps")

    # Defaults tuned for MountainCar-v0 (conf/tuned/rnd_ppo_mountaincar.yaml anneals the learning rate,
    # conf/tuned/rnd_ppo_deep_sea.yaml sets several keys for deep sea); PPO keys in rl-zoo's MountainCar layout.
    gamma_ext: float = setting(0.999, UNIT_OPEN_CLOSED, "Discount of the extrinsic return (episodic).")
    gamma_int: float = setting(0.99, UNIT_OPEN_CLOSED, "Discount of the intrinsic return (non-episodic).")
    ext_coef: float = setting(0.1, NON_NEGATIVE,
                              "Advantage = ext_coef * A_ext + int_coef * A_int. The paper's 2 assumes a sparse "
                              "extrinsic reward; MountainCar pays -1 every step, so A_ext is dominated by value-error "
                              "noise of a ~-200 return and at 2 swamps the normalised intrinsic advantage (seed 0: "
                              "first flag after ~170k steps); at 0.1 the flag is found after ~6k steps.")
    int_coef: float = setting(1.0, NON_NEGATIVE, "Weight of the intrinsic advantage.")
    rnd_lr: float = setting(1e-4, POSITIVE,
                            "Adam learning rate of the predictor (paper). MountainCar with 1e-3: the predictor fits "
                            "the 2-D inputs within ~7k steps, the all-history-normalised bonus falls to ~1e-5 and "
                            "seed 0's greedy policy missed the flag in every evaluation from 11k to 205k steps.")
    rnd_hidden: Sequence[int] = setting((64, 64), HIDDEN, "Hidden layers (ReLU) of the target and predictor MLPs.")
    rnd_embed_dim: int = setting(64, COUNT, "Output size of target and predictor.")
    predictor_fraction: float = setting(0.25, UNIT_OPEN_CLOSED, "Share of each minibatch the predictor trains on.")
    rnd_init_steps: int = setting(50, integer(0),
                                  "Random-policy vector steps that initialise the RND input statistics.")
    rnd_whiten: bool = setting(True, BOOL,
                               "Whiten and clip RND inputs with running statistics (paper); see "
                               "conf/tuned/rnd_ppo_deep_sea.yaml.")
    int_norm_decay: float = setting(1.0, UNIT_OPEN_CLOSED,
                                    "Intrinsic-return std over all history (paper); < 1: earlier iterations weigh "
                                    "this much less each iteration (deep sea size 30: 0.9 was slower).")
    num_envs: int = 16
    num_steps: int = setting(16,
                             doc="Steps per env per iteration (16 envs x 16: 256 transitions, rl-zoo's MountainCar "
                                 "PPO layout).")
    epochs: int = setting(4, doc="Passes over each rollout (the predictor trains on the same minibatches).")
    minibatch_size: int = 64
    lr_anneal: bool = False
    clip_anneal: bool = False
    anneal_steps: int | None = None
    gae_lambda: float = setting(0.98, doc="GAE lambda of both value heads.")
    vf_coef: float = setting(0.5, doc="Weight of the value loss (both heads).")
    normalize_obs: bool = setting(True,
                                  doc="Running mean/std whitening of observations (frozen in act / evaluation): "
                                      "MountainCar needs it (no flag in 120k steps without); deep sea is faster with "
                                      "false.")

    @classmethod
    def check_config(cls, values: dict[str, Any]) -> None:
        super().check_config(values)
        if "gamma" in values:
            raise ConfigError("rnd_ppo has gamma_ext and gamma_int instead of gamma")

    def rollout_steps(self, horizon: int | None) -> tuple[int, str]:
        init = self.rnd_init_steps if self.rnd_whiten else 0  # the random-policy rollout build collects first
        return (init, "rnd_init_steps") if init > self.num_steps else (self.num_steps, "num_steps")

    def build(self) -> None:
        super().build()
        self.rnd = RND(self.obs_proc.dim, self.rnd_hidden, self.rnd_embed_dim, lr=self.rnd_lr, gamma_int=self.gamma_int,
                       memory_capacity=0, device=self.device, seed=int(self.seed), whiten_inputs=self.rnd_whiten,
                       ret_norm_decay=self.int_norm_decay)
        self.pending_steps = 0  # the random-policy steps below, reported with the first iteration's
        # Input statistics from a uniformly random policy; without whitening nothing reads them,
        # so the steps would be spent for nothing.
        if self.rnd_init_steps > 0 and self.rnd_whiten and self.collector is not None:
            ro = self.collector.collect(self._random_actions, None, self.rnd_init_steps, self.VALUE_HEADS)
            self.rnd.update_obs_stats(ro.obs_raw[1:][ro.valid])
            self.pending_steps = ro.env_steps

    def _random_actions(self, obs: torch.Tensor):
        n = obs.shape[0]
        if self.actor.discrete:
            a = torch.randint(self.actor.net[-1].out_features, (n,), generator=self.generator, device=self.device)
        else:
            dim = self.actor.log_std.shape[0]
            a = torch.rand(n, dim, generator=self.generator, device=self.device) * 2 - 1
        return a, torch.zeros(n, device=self.device)

    def _advantages(self, ro: Rollout):
        next_raw = ro.obs_raw[1:]  # [T, N, D] true next observation of every step
        valid = ro.valid
        self.rnd.update_obs_stats(next_raw[valid])
        r_raw = self.rnd.intrinsic_reward(next_raw.reshape(-1, next_raw.shape[-1])).reshape(valid.shape)
        r_raw = r_raw * valid
        r_int = self.rnd.normalize_rewards(r_raw)
        adv_ext, ret_ext = ro.gae(self.gamma_ext, self.gae_lambda)
        adv_int, ret_int = ro.gae(self.gamma_int, self.gae_lambda, head=1, rewards=r_int, episodic=False)
        adv = self.ext_coef * adv_ext + self.int_coef * adv_int
        n_valid = max(int(valid.sum()), 1)
        metrics = {"charts/intrinsic_reward": float(r_int[valid].sum()) / n_valid,
                   "charts/intrinsic_reward_raw": float(r_raw[valid].sum()) / n_valid}
        return adv, torch.stack([ret_ext, ret_int], dim=-1), metrics

    def _extra_update(self, ro: Rollout, index: torch.Tensor) -> dict:
        x = Rollout.take(ro.obs_raw[1:], index)  # the true next observations of the real transitions
        losses = []
        for _ in range(self.epochs):
            for mb in minibatches(x.shape[0], self.minibatch_size, self.generator):
                loss = self.rnd.predictor_loss(x[mb], self.predictor_fraction)
                self.step(self.rnd.optimizer, loss, clip=False)
                losses.append(loss.item())
        return {"losses/predictor_loss": sum(losses) / max(len(losses), 1)}

    def train_iteration(self, max_env_steps: int | None = None) -> IterationResult:
        result = super().train_iteration()
        result.env_steps += self.pending_steps  # the random-policy steps taken at construction
        self.global_step += self.pending_steps
        self.pending_steps = 0
        return result

