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
from her_rl.algos.ppo import PPO_RULES, PPOLearner
from her_rl.algos.rollout import Rollout
from her_rl.errors import ConfigError
from her_rl.rl.returns import gae
from her_rl.rl.rnd import RND
from her_rl.rules import BOOL, COUNT, HIDDEN, NON_NEGATIVE, POSITIVE, UNIT_OPEN_CLOSED, integer


@dataclass(eq=False)
class RNDPPO(PPOLearner):
    NAME = "rnd_ppo"
    VALUE_HEADS = 2  # column 0: extrinsic, column 1: intrinsic
    RULES = {
        **PPO_RULES, "gamma_ext": UNIT_OPEN_CLOSED, "gamma_int": UNIT_OPEN_CLOSED, "ext_coef": NON_NEGATIVE,
        "int_coef": NON_NEGATIVE, "rnd_lr": POSITIVE, "rnd_hidden": HIDDEN, "rnd_embed_dim": COUNT,
        "predictor_fraction": UNIT_OPEN_CLOSED, "rnd_init_steps": integer(0), "rnd_whiten": BOOL,
        "int_norm_decay": UNIT_OPEN_CLOSED,
    }

    gamma_ext: float = 0.999
    gamma_int: float = 0.99
    ext_coef: float = 2.0
    int_coef: float = 1.0
    rnd_lr: float = 1e-4
    rnd_hidden: Sequence[int] = (256, 256)
    rnd_embed_dim: int = 128
    predictor_fraction: float = 0.25
    rnd_init_steps: int = 50
    rnd_whiten: bool = True
    int_norm_decay: float = 1.0

    @classmethod
    def check_config(cls, values: dict[str, Any]) -> None:
        super().check_config(values)
        if "gamma" in values:
            raise ConfigError("rnd_ppo has gamma_ext and gamma_int instead of gamma")

    def build(self) -> None:
        super().build()
        self.rnd = RND(self.obs_proc.dim, self.rnd_hidden, self.rnd_embed_dim, lr=self.rnd_lr, gamma_int=self.gamma_int,
                       memory_capacity=0, device=self.device, seed=int(self.seed), whiten_inputs=self.rnd_whiten,
                       ret_norm_decay=self.int_norm_decay)
        self._pending_steps = 0
        # Input statistics from a uniformly random policy; without whitening nothing reads them,
        # so the steps would be spent for nothing.
        if self.rnd_init_steps > 0 and self.rnd_whiten and self.collector is not None:
            ro = self.collector.collect(self._random_actions, None, self.rnd_init_steps, self.VALUE_HEADS)
            self.rnd.update_obs_stats(ro.obs_raw[1:][ro.valid])
            self._pending_steps = ro.env_steps

    def _random_actions(self, obs: torch.Tensor):
        n = obs.shape[0]
        if self.policy.discrete:
            a = torch.randint(self.policy.net[-1].out_features, (n,), generator=self.gen, device=self.device)
        else:
            dim = self.policy.log_std.shape[0]
            a = torch.rand(n, dim, generator=self.gen, device=self.device) * 2 - 1
        return a, torch.zeros(n, device=self.device)

    def _advantages(self, ro: Rollout):
        next_raw = ro.obs_raw[1:]  # [T, N, D] true next observation of every step
        valid = ro.valid
        self.rnd.update_obs_stats(next_raw[valid])
        r_raw = self.rnd.intrinsic_reward(next_raw.reshape(-1, next_raw.shape[-1])).reshape(valid.shape)
        r_raw = r_raw * valid
        r_int = self.rnd.normalize_rewards(r_raw)
        term, dones = ro.gae_flags()
        adv_ext, ret_ext = gae(ro.rewards, ro.values[:-1, :, 0], ro.values[1:, :, 0], term, dones,
                               self.gamma_ext, self.gae_lambda)
        never = torch.zeros_like(ro.terminated)
        adv_int, ret_int = gae(r_int, ro.values[:-1, :, 1], ro.values[1:, :, 1], never, never,
                               self.gamma_int, self.gae_lambda)
        adv = self.ext_coef * adv_ext + self.int_coef * adv_int
        n_valid = max(int(valid.sum()), 1)
        metrics = {"charts/intrinsic_reward": float(r_int[valid].sum()) / n_valid,
                   "charts/intrinsic_reward_raw": float(r_raw[valid].sum()) / n_valid}
        return adv, torch.stack([ret_ext, ret_int], dim=-1), metrics

    def _extra_update(self, ro: Rollout, index: torch.Tensor) -> dict:
        x = Rollout.take(ro.obs_raw[1:], index)  # the true next observations of the real transitions
        losses = []
        for _ in range(self.epochs):
            perm = torch.randperm(x.shape[0], generator=self.gen, device=self.device)
            for start in range(0, x.shape[0], self.minibatch_size):
                loss = self.rnd.predictor_loss(x[perm[start:start + self.minibatch_size]], self.predictor_fraction)
                self.rnd.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                self.rnd.optimizer.step()
                losses.append(loss.item())
        return {"losses/predictor_loss": sum(losses) / max(len(losses), 1)}

    def train_iteration(self) -> IterationResult:
        result = super().train_iteration()
        result.env_steps += self._pending_steps  # the random-policy steps taken at construction
        self.global_step += self._pending_steps
        self._pending_steps = 0
        return result

    def state_dict(self) -> dict:
        state = super().state_dict()
        state["rnd"] = self.rnd.state_dict()
        state["rnd_optimizer"] = self.rnd.optimizer.state_dict()
        state["rnd_rng"] = self.rnd.rng.bit_generator.state
        state["pending_steps"] = self._pending_steps
        return state

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.rnd.load_state_dict(state["rnd"])
        self.rnd.optimizer.load_state_dict(state["rnd_optimizer"])
        self.rnd.rng.bit_generator.state = state["rnd_rng"]
        self._pending_steps = int(state["pending_steps"])

