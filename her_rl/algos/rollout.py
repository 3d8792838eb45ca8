"""How the on-policy learners (REINFORCE, PPO, RND-PPO; base: :mod:`her_rl.algos.onpolicy`) collect.

* :class:`RolloutCollector` (through the :class:`ObsProcessor` and :class:`ActorNet` of
  :mod:`her_rl.algos.onpolicy_actor`) steps a vector env and returns a :class:`Rollout`; its ``state_dict``
  holds the episodes in progress (with the env's state where it can be saved: resume continues them).

Truncation and gymnasium 1.x NEXT_STEP autoreset
------------------------------------------------
In NEXT_STEP mode the step on which an episode ends returns that episode's true last
observation; the *following* ``step`` call ignores the action for that sub-env, resets it and
returns the first observation of the next episode with reward 0 and no done flag. The collector
therefore stores every vector step but marks the reset steps ``valid = False``:

* ``obs[t]`` is what the policy saw at step t; ``obs[t+1]`` is always the true next observation
  of step t (the final observation after a done), so ``values[t+1]`` is exactly the value to
  bootstrap a truncated step from -- no extra forward pass, no ``final_obs`` bookkeeping.
* Reset steps get reward 0 and are excluded from every loss, statistic and env-step count (they
  are not transitions of the MDP). Algorithms pass ``terminated | ~valid`` / ``dones | ~valid``
  to GAE so the garbage advantage of a reset step never leaks into a real one (the real step
  before it has ``done = True`` and cuts the recursion anyway).
* Truncated steps bootstrap from V(final observation); terminated ones do not.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import gymnasium as gym
import numpy as np
import torch

from her_rl.algos.onpolicy_actor import ActorNet, ObsProcessor
from her_rl.envs.state import env_state, restore_env_state
from her_rl.errors import ConfigError
from her_rl.rl.memory import space_bytes
from her_rl.rl.returns import gae
from her_rl.rl.success import SuccessRule


@dataclass
class Rollout:
    """``T`` vector steps of ``N`` envs (tensors on the algorithm's device).

    ``obs``/``obs_raw``/``values`` have ``T + 1`` rows: row ``t + 1`` is the true next observation
    of step ``t`` (see the module docstring), row ``T`` the observation to bootstrap from.
    """

    obs: torch.Tensor  # [T+1, N, D] policy input (whitened if enabled)
    obs_raw: torch.Tensor  # [T+1, N, D] flat, not whitened (RND keeps its own statistics)
    actions: torch.Tensor  # [T, N] (discrete) or [T, N, A]
    logp: torch.Tensor  # [T, N]
    values: torch.Tensor  # [T+1, N, H] one column per value head (zeros without a critic)
    rewards: torch.Tensor  # [T, N], 0 on reset steps
    terminated: torch.Tensor  # [T, N] bool
    truncated: torch.Tensor  # [T, N] bool
    valid: torch.Tensor  # [T, N] bool, False on NEXT_STEP reset steps (and after the end in episode mode)
    episode_returns: list[float] = field(default_factory=list)
    episode_lengths: list[int] = field(default_factory=list)
    episode_successes: list[float] = field(default_factory=list)
    episode_any_successes: list[float] = field(default_factory=list)  # reached the goal at any step

    @property
    def dones(self) -> torch.Tensor:
        return self.terminated | self.truncated

    @property
    def env_steps(self) -> int:
        return int(self.valid.sum())

    def gae_flags(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(terminated, dones)`` for :func:`her_rl.rl.returns.gae` with invalid steps cut off."""
        return self.terminated | ~self.valid, self.dones | ~self.valid

    def gae(self, gamma: float, lam: float, head: int = 0, rewards: torch.Tensor | None = None,
            episodic: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
        """``(advantages, returns)`` [T, N] of value head ``head`` (see :func:`her_rl.rl.returns.gae`), of
        the env's rewards or ``rewards``; not ``episodic``: the recursion runs through episode ends
        (RND's intrinsic return)."""
        term, dones = self.gae_flags() if episodic else (torch.zeros_like(self.terminated),) * 2
        return gae(self.rewards if rewards is None else rewards, self.values[:-1, :, head], self.values[1:, :, head],
                   term, dones, gamma, lam)

    def valid_index(self) -> torch.Tensor:
        """Flat indices (``t * N + n``) of the real transitions: only they enter the losses."""
        return torch.nonzero(self.valid.reshape(-1)).squeeze(-1)

    @staticmethod
    def take(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """Rows ``index`` (see :meth:`valid_index`) of a ``[T, N, ...]`` tensor, as ``[B, ...]``."""
        return x.reshape(-1, *x.shape[2:])[index]


def rollout_bytes(copies: int, steps: int, dim: int, action_space: gym.Space, heads: int) -> int:
    """Bytes of a :class:`Rollout` of ``steps`` vector steps of ``copies`` envs with ``dim`` inputs, from
    the sizes alone; twice its tensors, as :meth:`RolloutCollector.collect` holds each step's until it
    stacks them."""
    actions = space_bytes(action_space, 8 if isinstance(action_space, gym.spaces.Discrete) else 4)
    per_step = 2 * 4 * dim + 4 * heads + actions + 4 + 4 + 3  # obs and obs_raw, values, actions, logp, reward, flags
    return 2 * int(copies) * (int(steps) + 1) * per_step


ActFn = Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]
ValueFn = Callable[[torch.Tensor], torch.Tensor]


class RolloutCollector:
    """Steps a NEXT_STEP-autoreset vector env with an actor and records :class:`Rollout` s."""

    def __init__(self, envs: gym.vector.VectorEnv, obs_proc: ObsProcessor, actor: ActorNet, seed: int | None,
                 device: str | torch.device = "cpu"):
        mode = envs.metadata.get("autoreset_mode", gym.vector.AutoresetMode.NEXT_STEP)
        if mode != gym.vector.AutoresetMode.NEXT_STEP:
            raise ConfigError(f"on-policy collection needs NEXT_STEP autoreset vector envs, got {mode}")
        self.envs, self.obs_proc, self.actor, self.device = envs, obs_proc, actor, torch.device(device)
        self.num_envs = envs.num_envs
        self.seed = seed
        self.success = SuccessRule()  # an info key of SUCCESS_KEYS at the episode's last step (set by the learner)
        self.reset(seed)

    def reset(self, seed: int | None = None) -> None:
        obs, _ = self.envs.reset(seed=seed)
        self._obs = self.obs_proc.flat(obs)
        self._prev_done = np.zeros(self.num_envs, dtype=bool)
        self._ep_ret = np.zeros(self.num_envs, dtype=np.float64)
        self._ep_len = np.zeros(self.num_envs, dtype=np.int64)
        self._ep_any = np.zeros(self.num_envs, dtype=bool)

    def _tensor(self, x: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(x).to(self.device)

    _COUNTS = {"prev_done": bool, "ep_ret": np.float64, "ep_len": np.int64}  # per-env counters and their dtypes

    def state_dict(self) -> dict:
        """The episodes in progress: the last observations, what the collector counts of them and
        the vector env's own state (None where it cannot be saved: see :mod:`her_rl.envs.state`)."""
        state = {name: torch.from_numpy(getattr(self, "_" + name).copy()) for name in ("obs", *self._COUNTS, "ep_any")}
        return {**state, "envs": env_state(self.envs)}

    def load_state_dict(self, state: dict) -> bool:
        """Continue the saved episodes; False (they restart) where the env's state was not saved."""
        if state["envs"] is None:
            return False
        obs = state["obs"].numpy()
        if obs.shape != self._obs.shape:
            raise ValueError(f"saved observations of shape {tuple(obs.shape)}, this env gives {self._obs.shape}")
        restore_env_state(self.envs, state["envs"])
        self._obs = obs.astype(np.float32)
        for name, dtype in self._COUNTS.items():
            setattr(self, "_" + name, state[name].numpy().astype(dtype).reshape(self.num_envs))
        if "ep_any" in state:  # checkpoints from before any-step success have none: nothing reached yet
            self._ep_any = state["ep_any"].numpy().astype(bool).reshape(self.num_envs)
        return True

    @torch.no_grad()
    def collect(self, act_fn: ActFn, value_fn: ValueFn | None, num_steps: int | None = None,
                n_heads: int = 1, one_episode_each: bool = False, max_steps: int = 100_000,
                reset_seed: int | None = None) -> Rollout:
        """Collect ``num_steps`` vector steps, or (``one_episode_each``) reset with ``reset_seed``
        and run until every env has ended one episode, marking each env's steps after its episode
        invalid."""
        if one_episode_each:
            self.reset(reset_seed)
            num_steps = max_steps
        finished = np.zeros(self.num_envs, dtype=bool)
        buf: dict[str, list] = {k: [] for k in ("obs", "raw", "act", "logp", "rew", "term", "trunc", "valid")}
        rets, lens, succ, any_succ = [], [], [], []
        for _ in range(num_steps):
            obs_t = self._tensor(self.obs_proc.normalize(self._obs, update=True))
            actions, logp = act_fn(obs_t)
            next_obs, rew, term, trunc, infos = self.envs.step(self.actor.to_env(actions))
            valid = ~self._prev_done & ~finished
            rew = np.where(valid, np.asarray(rew, dtype=np.float64), 0.0)
            term, trunc = np.asarray(term) & valid, np.asarray(trunc) & valid
            done = term | trunc
            self._ep_ret += rew
            self._ep_len += valid
            success = self.success.at_step(infos, next_obs)  # every step: any-step success needs each
            if success is not None:
                self._ep_any |= valid & success
            for i in np.flatnonzero(done):
                rets.append(float(self._ep_ret[i]))
                lens.append(int(self._ep_len[i]))
                if success is not None:
                    succ.append(float(success[i]))
                    any_succ.append(float(self._ep_any[i]))
            self._ep_ret[done], self._ep_len[done], self._ep_any[done] = 0.0, 0, False
            buf["obs"].append(obs_t)
            buf["raw"].append(self._tensor(self._obs))
            buf["act"].append(actions)
            buf["logp"].append(logp)
            for k, v in (("rew", rew.astype(np.float32)), ("term", term), ("trunc", trunc), ("valid", valid)):
                buf[k].append(self._tensor(np.ascontiguousarray(v)))
            self._prev_done = done
            self._obs = self.obs_proc.flat(next_obs)
            if one_episode_each:
                finished |= done
                if finished.all():
                    break
        obs = torch.stack(buf["obs"] + [self._tensor(self.obs_proc.normalize(self._obs, update=False))])
        if value_fn is None:
            values = torch.zeros(*obs.shape[:2], n_heads, device=self.device)
        else:  # one batched forward pass for all T + 1 rows instead of one per step
            values = value_fn(obs.reshape(-1, obs.shape[-1])).reshape(*obs.shape[:2], n_heads)
        stacked = {k: torch.stack(buf[k]) for k in ("act", "logp", "rew", "term", "trunc", "valid")}
        return Rollout(obs=obs, obs_raw=torch.stack(buf["raw"] + [self._tensor(self._obs)]), actions=stacked["act"],
                       logp=stacked["logp"], values=values, rewards=stacked["rew"], terminated=stacked["term"],
                       truncated=stacked["trunc"], valid=stacked["valid"], episode_returns=rets,
                       episode_lengths=lens, episode_successes=succ, episode_any_successes=any_succ)
