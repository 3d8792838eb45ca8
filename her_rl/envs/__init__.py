"""Environments: bit-flip, push, drag, deep sea, and a factory for batched envs of any config.

Importing this package (``import her_rl`` does) registers ``her_rl/BitFlip-v0``,
``her_rl/Push-v0``, ``her_rl/Drag-v0`` and ``her_rl/DeepSea-v0`` with gymnasium, each with a
``vector_entry_point`` so that ``gymnasium.make_vec`` builds the numpy-batched class. No
``max_episode_steps`` is registered: the envs truncate themselves, and a TimeLimit would count twice.
"""

from __future__ import annotations

import inspect
from typing import Any

import gymnasium as gym
import numpy as np

from her_rl.envs.bitflip import BitFlipEnv, BitFlipVectorEnv
from her_rl.envs.checks import EnvFault, guard, raised
from her_rl.envs.drag import DragEnv, DragVectorEnv
from her_rl.envs.families import ensure_registered, registered_id
from her_rl.envs.fetch import GoalVectorEnv, NoBlockToHold, cache_joint_lookups, start_in_gripper
from her_rl.envs.push import PushEnv, PushVectorEnv
from her_rl.envs.table_settings import check_table_kwargs
from her_rl.envs.time_limits import time_limit
from her_rl.errors import ConfigError, one_line, outside, raised_by_code

_OURS = {
    "her_rl/BitFlip-v0": "her_rl.envs.bitflip:BitFlip",
    "her_rl/Push-v0": "her_rl.envs.push:Push",
    "her_rl/Drag-v0": "her_rl.envs.drag:Drag",
    "her_rl/DeepSea-v0": "her_rl.envs.deep_sea:DeepSea",
}
for _id, _path in _OURS.items():
    if _id not in gym.registry:
        gym.register(id=_id, entry_point=_path + "Env", vector_entry_point=_path + "VectorEnv")


class SeededResets(gym.Wrapper):
    """A goal env copy whose every reset is seeded: one without a seed (gymnasium's autoreset after a
    terminal step) gets a seed drawn from a generator seeded by the last seed given. panda-gym draws a
    new generator from the OS at each reset without a seed, and its PyBullet simulation carries state from
    one episode into the next, so a single success mid-cycle made a seeded run unrepeatable. Hindsight
    learners store nothing after a terminal step, so an env that keeps its own generator trains as
    before; envs without goals (on-policy learners reset them all the time) are left as they are."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self.active = "achieved_goal" in getattr(env.observation_space, "spaces", {})
        self.seeds: np.random.Generator | None = None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        if self.active and seed is not None:
            self.seeds = np.random.default_rng(seed)
        elif self.active and self.seeds is not None:
            seed = int(self.seeds.integers(2**31))
        return self.env.reset(seed=seed, options=options)


def _params(entry_point: Any) -> dict[str, inspect.Parameter]:
    """A vector entry point's constructor parameters ({} if it cannot be loaded: make_vec reports that below)."""
    try:
        creator = gym.envs.registration.load_env_creator(entry_point) if isinstance(entry_point, str) else entry_point
        return dict(inspect.signature(creator).parameters)
    except Exception:  # noqa: BLE001
        return {}


def _takes_seed(entry_point: Any) -> bool:
    """Whether a vector entry point's constructor accepts ``seed=`` (ours do; gymnasium's do not)."""
    return "seed" in _params(entry_point)


def _takes_limit(entry_point: Any) -> bool:
    """Whether it accepts ``max_episode_steps=`` (CartPole's, the table envs')."""
    params = _params(entry_point)
    return "max_episode_steps" in params or any(p.kind == p.VAR_KEYWORD for p in params.values())


def _not_made(env_id: str, given: dict[str, Any], exc: BaseException) -> ConfigError:
    """Why the env could not be made: a missing package, an unknown id or kwargs the constructor refused
    are the config's (the probe in her_rl.config.checks words them); anything else the constructor raised
    is the env's own fault, one line naming where."""
    if isinstance(exc, (gym.error.Error, ImportError)) or (isinstance(exc, (TypeError, ValueError)) and given):
        return ConfigError(f"cannot make env '{env_id}': {outside(one_line(exc))}")
    return raised(env_id, "the constructor", exc)


def make_vec(env_cfg: dict[str, Any], num_envs: int, seed: int | None = None,
             training: bool = False) -> gym.vector.VectorEnv:
    """Build ``num_envs`` copies of the env named by an ``env`` config group, as one vector env.

    Every id goes through ``gymnasium.make_vec``: the env's own batched implementation where it has
    one (ours, CartPole), else a synchronous loop over copies; both with next-step autoreset. A
    batched env that takes ``seed=`` gets it (the same seed gives the same episodes); the action
    space is seeded in every case. Unknown ids and bad kwargs become one-line ``ConfigError``s; an
    env with no time limit of its own gets ``env.max_episode_steps`` (gymnasium's TimeLimit, default
    1000); the env's faults are told in one line (:mod:`her_rl.envs.checks`). ``training``: the
    copies a learner collects in, where ``env.start_in_gripper`` applies (never to evaluation).
    """
    env_id = env_cfg["id"]
    given = dict(env_cfg.get("kwargs") or {})
    ensure_registered(env_id, env_cfg.get("name"))  # Fetch ids: import gymnasium-robotics, or one line
    name = registered_id(env_id)  # a "module:Env-v0" id: its module must have been imported already
    limit = time_limit(env_cfg, name).limit
    # gymnasium.make turns max_episode_steps into its TimeLimit (replacing the registered one); a batched
    # env gets it as a constructor argument, so one that takes none is looped over copies instead
    kwargs = {**given, "max_episode_steps": limit} if limit is not None else given
    # A native numpy-batched implementation (CartPole's steps 20 copies ~3x faster than a loop of
    # single envs, same dynamics and time limit) beats the generic synchronous loop. JAX-backed
    # vector envs are skipped: they return JAX arrays, and the rest of the pipeline is numpy/torch.
    vector_entry = gym.registry[name].vector_entry_point
    native = vector_entry is not None and "jax" not in str(vector_entry).lower() \
        and (limit is None or _takes_limit(vector_entry))
    attempts = [("vector_entry_point", {"seed": seed} if _takes_seed(vector_entry) else {})] if native else []
    attempts.append(("sync", {}))
    # env.vectorization (sync | async) picks gymnasium's loop explicitly: async steps each copy in
    # its own worker process (MuJoCo Fetch; see her_rl.envs.fetch for the measurement).
    if env_cfg.get("vectorization"):
        attempts = [(str(env_cfg["vectorization"]), {})]
    share = float(env_cfg.get("start_in_gripper") or 0) if training else 0.0
    wrappers = [SeededResets, *([start_in_gripper(share)] if share > 0 else [])]  # each copy of gymnasium's loops
    attempts = [(mode, extra if mode == "vector_entry_point" else {"wrappers": wrappers}) for mode, extra in attempts
                if mode != "vector_entry_point" or share <= 0]
    first_error: BaseException | None = None
    for mode, extra in attempts:
        try:
            envs = gym.make_vec(name, num_envs=num_envs, vectorization_mode=mode, **kwargs, **extra)
            break
        except (EnvFault, NoBlockToHold):
            raise
        except BaseException as exc:  # gymnasium raises many types (missing deps, bad kwargs); a constructor sys.exit()
            if not raised_by_code(exc):
                raise
            first_error = first_error or exc
    else:
        error = _not_made(env_id, given, first_error)
        raise error from (None if isinstance(error, EnvFault) else first_error)  # the probe reads the cause
    # copies in other processes: a goal env gets a local one for compute_reward (a plain env has none)
    goal = "achieved_goal" in getattr(envs.single_observation_space, "spaces", {})
    if goal and isinstance(envs, gym.vector.AsyncVectorEnv):
        envs = GoalVectorEnv(envs, name, kwargs)
    envs = cache_joint_lookups(envs)  # Fetch copies read their joints by address (her_rl/envs/fetch.py)
    guard(envs, env_id)
    if seed is not None:
        envs.action_space.seed(seed)
    return envs


__all__ = ["BitFlipEnv", "BitFlipVectorEnv", "DragEnv", "DragVectorEnv", "PushEnv", "PushVectorEnv",
           "EnvFault", "check_table_kwargs", "make_vec"]
