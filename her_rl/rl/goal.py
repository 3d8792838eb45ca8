"""Goal-env building blocks every hindsight learner shares.

* :func:`goal_env_spec` reads what a learner needs from a goal env (shapes, dtypes, action space,
  horizon, reward and termination rules), never from a list of known envs; what makes an env a goal
  env (its keys, spaces and time limit) is :mod:`her_rl.envs.goal_env`'s;
* :func:`flat_observation` flattens a goal env's extra observation keys (a velocity, a step count)
  after ``observation`` into the one
  observation vector the networks read, stored and normalised as ``observation`` alone is otherwise;
* :class:`GoalInputs` turns (observation, goal) batches into network inputs: exact +-1 for bits,
  else the HER paper's running mean/std normalisation, clipped;
* :func:`collect_episodes` plays one lock-step batch of episodes in a vector env (a HER cycle's
  episodes, in parallel) and returns them in :class:`~her_rl.rl.her.HindsightMemory`'s layout (the
  memory reads its shapes from the :class:`GoalEnvSpec`);
* :func:`action_space_for` refuses an action space a learner cannot act in; continuous learners act
  in [-1, 1]^A and the env's Box bounds are applied only when stepping (:func:`to_env_actions`,
  :func:`from_env_actions`); :func:`batch_tensors` turns a sampled batch into network-ready tensors.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Callable

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces

from her_rl.errors import ConfigError
from her_rl.rl.memory import space_bytes
from her_rl.rl.normalize import RunningMeanStd
from her_rl.rl.success import EpisodeSuccess, SuccessRule, reward_probe
from her_rl.envs.goal_env import ARRAY_SPACES, GOAL_KEYS, episode_horizon, extra_keys, goal_carrier



@dataclass
class GoalEnvSpec:
    obs_shape: tuple[int, ...]
    """``observation``'s shape; with :attr:`extra_keys`, ``(D,)``: observation and extra keys flattened."""
    goal_shape: tuple[int, ...]
    obs_dtype: np.dtype
    goal_dtype: np.dtype
    binary: bool
    """Observation and goals are bits (MultiBinary): scaled exactly to +-1 instead of normalised."""
    action_space: gym.Space
    horizon: int
    compute_reward: Callable
    compute_terminated: Callable | None
    """The env's rule for ending an episode at a goal; None: it never ends early (Fetch, push)."""
    reward_bounds: tuple[float, float] | None = None
    """The range of compute_reward (-1/0 for Fetch and bit-flip, 0/1 for the mazes), probed or declared
    (env.reward_range); None: not known (a dense reward), so TD targets are not bounded."""
    success: SuccessRule = SuccessRule()
    """How an episode's success is read (info key, else compute_reward at the goal)."""
    extra_keys: tuple[str, ...] = ()
    """The observation's keys beside GOAL_KEYS, flattened after ``observation`` (:func:`flat_observation`)."""


def flat_size(space: gym.Space) -> int:
    """Numbers one observation of ``space`` flattens to (a Discrete: its integer value)."""
    return 1 if isinstance(space, spaces.Discrete) else int(np.prod(space.shape))


def flat_observation(obs: dict[str, Any], keys: tuple[str, ...], dtype=np.float32) -> np.ndarray:
    """A batch's observation vector ``[B, D]`` in ``dtype``: ``observation`` flattened, then each of ``keys``.
    No keys: ``obs["observation"]`` itself, as it is (an env without extra keys pays nothing)."""
    if not keys:
        return obs["observation"]
    parts = [np.asarray(obs["observation"]), *(np.asarray(obs[k]) for k in keys)]
    B = len(parts[0])
    return np.concatenate([p.reshape(B, -1) for p in parts], axis=1).astype(dtype, copy=False)





def goal_env_spec(envs: gym.vector.VectorEnv, env_cfg: dict[str, Any], algo: str) -> GoalEnvSpec:
    """What a hindsight learner needs from ``envs``; a ConfigError names what is missing."""
    name = f"'{env_cfg.get('name')}' ({env_cfg.get('id')})"
    space = envs.single_observation_space
    env = goal_carrier(envs)
    if (not isinstance(space, spaces.Dict) or not set(GOAL_KEYS) <= set(space.spaces)
            or not all(isinstance(space[k], ARRAY_SPACES) for k in GOAL_KEYS) or not hasattr(env, "compute_reward")):
        raise ConfigError(f"algo '{algo}' needs a goal-conditioned env (Dict observation whose observation, "
                          f"achieved_goal and desired_goal are arrays, and compute_reward); {name} has none")
    horizon = episode_horizon(envs, env_cfg)
    if horizon is None:
        raise ConfigError(f"algo '{algo}' needs episodes of bounded length; {name} has no time limit "
                          f"(set env.kwargs.max_episode_steps)")
    extra = extra_keys(space, f"env {name}")
    obs, goal = space["observation"], space["desired_goal"]
    binary = all(isinstance(space[k], spaces.MultiBinary) for k in (*GOAL_KEYS, *extra))
    obs_shape = (flat_size(obs) + sum(flat_size(space[k]) for k in extra),) if extra else tuple(obs.shape)
    probe = probe_rewards(envs, env, goal, env_cfg)
    return GoalEnvSpec(
        obs_shape=obs_shape, goal_shape=tuple(goal.shape),
        obs_dtype=np.dtype(np.int8 if binary else np.float32), goal_dtype=np.dtype(np.int8 if binary else np.float32),
        binary=binary, action_space=envs.single_action_space, horizon=horizon,
        compute_reward=env.compute_reward, compute_terminated=getattr(env, "compute_terminated", None),
        reward_bounds=probe.bounds,
        success=SuccessRule(env_cfg.get("success_key"), probe.goal_reward, env.compute_reward),
        extra_keys=extra,
    )


def probe_rewards(envs: gym.vector.VectorEnv, carrier: Any, goal_space: gym.Space, env_cfg: dict[str, Any]):
    """What compute_reward gives at and away from the goal, from a reset of ``envs`` (every learner
    reseeds its envs before collecting) and goals drawn from a copy of the goal space."""
    obs, _ = envs.reset(seed=0)
    space = copy.deepcopy(goal_space)
    space.seed(0)
    achieved = np.asarray(obs["achieved_goal"])
    drawn = np.stack([space.sample() for _ in range(len(achieved))]).astype(achieved.dtype)
    return reward_probe(carrier.compute_reward, achieved, np.asarray(obs["desired_goal"]), drawn,
                        env_cfg.get("reward_range"))


class GoalInputs:
    """Network inputs from (observation, goal): bits as +-1, anything else normalised with running
    statistics as in the HER paper: clip raw values to +-200, whiten with eps 0.01, clip to +-``clip``.
    Statistics change only in :meth:`update` (after each collected batch), never while sampling.
    The observation is the flattened one (extra keys included, :func:`flat_observation`)."""

    def __init__(self, spec: GoalEnvSpec, normalize: str | bool = "auto", clip: float = 5.0, device="cpu"):
        if normalize not in ("auto", True, False):
            raise ConfigError(f"algo.normalize must be auto, true or false, got {normalize!r}")
        self.running = (not spec.binary) if normalize == "auto" else bool(normalize)
        self.binary, self.clip, self.device = spec.binary, float(clip), torch.device(device)
        self.extra_keys = spec.extra_keys
        self.obs_dim, self.goal_dim = int(np.prod(spec.obs_shape)), int(np.prod(spec.goal_shape))
        self.obs_rms = RunningMeanStd((self.obs_dim,))
        self.goal_rms = RunningMeanStd((self.goal_dim,))
        self._refresh()

    @property
    def dim(self) -> int:
        return self.obs_dim + self.goal_dim

    def _refresh(self) -> None:
        """Cache mean and 1/std as one tensor over the concatenated input."""
        mean = np.concatenate([self.obs_rms.mean, self.goal_rms.mean])
        std = np.maximum(np.sqrt(np.concatenate([self.obs_rms.var, self.goal_rms.var])), 0.01)
        self._mean = torch.as_tensor(mean, dtype=torch.float32, device=self.device)
        self._inv_std = torch.as_tensor(1.0 / std, dtype=torch.float32, device=self.device)

    def update(self, episodes: dict[str, np.ndarray]) -> None:
        """Fold the valid steps of a batch of collected episodes into the statistics."""
        if not self.running:
            return
        T1 = episodes["obs"].shape[1]
        valid = np.arange(T1)[None, :] <= episodes["length"][:, None]
        self.obs_rms.update(np.clip(episodes["obs"][valid].reshape(-1, self.obs_dim), -200, 200))
        goals = np.concatenate([episodes["achieved_goal"][valid].reshape(-1, self.goal_dim),
                                episodes["desired_goal"].reshape(-1, self.goal_dim)])
        self.goal_rms.update(np.clip(goals, -200, 200))
        self._refresh()

    def __call__(self, obs: np.ndarray, goal: np.ndarray) -> torch.Tensor:
        x = np.concatenate([obs.reshape(len(obs), -1), goal.reshape(len(goal), -1)], axis=1)
        x = torch.as_tensor(x, dtype=torch.float32, device=self.device)
        if self.running:
            return ((x.clamp(-200.0, 200.0) - self._mean) * self._inv_std).clamp(-self.clip, self.clip)
        return x * 2.0 - 1.0 if self.binary else x

    def of(self, observation: dict[str, np.ndarray], goal: np.ndarray) -> torch.Tensor:
        """Inputs for a batch of goal-env observations (a dict, extra keys included) and goals."""
        return self(flat_observation(observation, self.extra_keys), goal)

    def state_dict(self) -> dict:
        return {"obs": self.obs_rms.state_dict(), "goal": self.goal_rms.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.obs_rms.load_state_dict(state["obs"])
        self.goal_rms.load_state_dict(state["goal"])
        self._refresh()


def collect_episodes(envs: gym.vector.VectorEnv, spec: GoalEnvSpec, act: Callable, seed: int,
                     max_env_steps: int | None = None) -> dict[str, np.ndarray]:
    """Play one episode in every copy of ``envs``, all starting together (lock-step).

    ``act(obs_dict)`` returns a batch of actions, each for the goal its copy's observation carries.
    A copy's episode ends at its first terminated or truncated step; later steps of that copy are
    played but not stored (``length`` marks them off). With ``max_env_steps`` (the budget left) the
    episodes still running are cut after the lock-step that reaches it (stored as they are,
    truncated). Returns HindsightMemory's episode layout plus ``ended`` (the episodes that ended,
    not cut), ``success`` and ``any_success`` (see :mod:`her_rl.rl.success`; all False when success
    cannot be told) and ``returns`` (undiscounted).
    """
    B, T = envs.num_envs, spec.horizon
    obs, _ = envs.reset(seed=seed)
    ep_obs = np.zeros((B, T + 1, *spec.obs_shape), dtype=spec.obs_dtype)
    ep_ag = np.zeros((B, T + 1, *spec.goal_shape), dtype=spec.goal_dtype)
    ep_act = np.zeros((B, T, *spec.action_space.shape), dtype=spec.action_space.dtype)
    ep_obs[:, 0], ep_ag[:, 0] = flat_observation(obs, spec.extra_keys), obs["achieved_goal"]
    goal = obs["desired_goal"].copy()
    length = np.full(B, T, dtype=np.int64)
    returns, tracker = np.zeros(B), EpisodeSuccess(spec.success, B)
    active, ended = np.ones(B, dtype=bool), np.zeros(B, dtype=bool)
    steps = 0
    for t in range(T):
        action = act(obs)  # a copy whose episode ended acts on its next one's goal: not stored
        obs, reward, terminated, truncated, info = envs.step(action)
        ep_act[:, t] = action
        ep_obs[:, t + 1], ep_ag[:, t + 1] = flat_observation(obs, spec.extra_keys), obs["achieved_goal"]
        returns[active] += np.asarray(reward)[active]
        tracker.step(info, obs, active)
        steps += int(active.sum())
        done_now = active & (np.asarray(terminated) | np.asarray(truncated))
        ended |= done_now
        cut = active & ~done_now if max_env_steps is not None and steps >= max_env_steps else np.zeros(B, bool)
        length[done_now | cut] = t + 1
        active &= ~(done_now | cut)
        if not active.any():
            break
    return {"obs": ep_obs, "achieved_goal": ep_ag, "desired_goal": goal, "action": ep_act, "length": length,
            "ended": ended, "success": tracker.last, "any_success": tracker.any, "success_told": tracker.told,
            "returns": returns}


def episode_bytes(copies: int, horizon: int, observation_space: spaces.Dict, action_space: gym.Space) -> int:
    """Bytes of the arrays :func:`collect_episodes` allocates for ``copies`` episodes of up to ``horizon``
    steps, from the spaces alone: observations and achieved goals as stored (bits int8, else float32),
    actions as the env takes them."""
    parts = observation_space.spaces
    itemsize = 1 if all(isinstance(part, spaces.MultiBinary) for part in parts.values()) else 4
    per_step = sum(space_bytes(part, itemsize) for key, part in parts.items() if key != "desired_goal")
    return int(copies) * ((horizon + 1) * per_step + horizon * space_bytes(action_space))


def action_space_for(spec: GoalEnvSpec, env_cfg: dict[str, Any], algo: str, continuous: bool) -> gym.Space:
    """The env's action space if the learner can act in it (Discrete, or a bounded Box for a continuous
    learner whose policy ends in tanh); anything else is a one-line ConfigError."""
    space, name = spec.action_space, f"'{env_cfg.get('name')}' ({env_cfg.get('id')})"
    if not continuous:
        if not isinstance(space, spaces.Discrete):
            raise ConfigError(f"{algo} acts in Discrete action spaces only; {name} has {space}")
        return space
    if not isinstance(space, spaces.Box):
        raise ConfigError(f"{algo} acts in Box (continuous) action spaces only; {name} has {space}")
    if not (np.isfinite(space.low).all() and np.isfinite(space.high).all()):
        raise ConfigError(f"{algo} needs finite action bounds (its policy ends in tanh); {name} has {space}")
    return space


def to_env_actions(a: np.ndarray, space: spaces.Box) -> np.ndarray:
    """Policy actions in [-1, 1] -> the env's [low, high] (affine)."""
    return (space.low + (a + 1.0) * 0.5 * (space.high - space.low)).astype(space.dtype)


def from_env_actions(a: np.ndarray, space: spaces.Box) -> np.ndarray:
    """The env's [low, high] -> [-1, 1]: the inverse of :func:`to_env_actions` (stored -> policy scale)."""
    return ((a - space.low) / (space.high - space.low) * 2.0 - 1.0).astype(np.float32)


def batch_tensors(b: dict[str, np.ndarray], inputs: GoalInputs, space: gym.Space,
                  device: torch.device) -> dict[str, torch.Tensor]:
    """A sampled batch as tensors: normalised inputs ``x``, ``x_next``; ``action`` (indices, or a Box's
    actions back in [-1, 1]); ``reward``, ``not_done`` and ``discount`` (gamma ** steps of an n-step return)."""
    def as_t(v):
        return torch.as_tensor(v, dtype=torch.float32, device=device)

    if isinstance(space, spaces.Box):
        action = as_t(from_env_actions(b["action"], space).reshape(len(b["reward"]), -1))
    else:
        action = torch.as_tensor(b["action"], device=device)
    out = {"x": inputs(b["obs"], b["goal"]), "x_next": inputs(b["next_obs"], b["goal"]), "action": action,
           "reward": as_t(b["reward"]), "not_done": 1.0 - as_t(b["terminated"])}
    if "discount" in b:
        out["discount"] = as_t(b["discount"])
    return out
