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

from her_rl.envs.bitflip import BitFlipEnv, BitFlipVectorEnv
from her_rl.envs.custom import registered_id
from her_rl.envs.drag import DragEnv, DragVectorEnv
from her_rl.envs.fetch import GoalVectorEnv, cache_joint_lookups, ensure_registered
from her_rl.envs.push import PushEnv, PushVectorEnv
from her_rl.envs.table import check_table_kwargs
from her_rl.errors import ConfigError

_OURS = {
    "her_rl/BitFlip-v0": "her_rl.envs.bitflip:BitFlip",
    "her_rl/Push-v0": "her_rl.envs.push:Push",
    "her_rl/Drag-v0": "her_rl.envs.drag:Drag",
    "her_rl/DeepSea-v0": "her_rl.envs.deep_sea:DeepSea",
}
for _id, _path in _OURS.items():
    if _id not in gym.registry:
        gym.register(id=_id, entry_point=_path + "Env", vector_entry_point=_path + "VectorEnv")


def _takes_seed(entry_point: Any) -> bool:
    """Whether a vector entry point's constructor accepts ``seed=`` (ours do; gymnasium's do not)."""
    try:
        creator = gym.envs.registration.load_env_creator(entry_point) if isinstance(entry_point, str) else entry_point
        return "seed" in inspect.signature(creator).parameters
    except Exception:  # noqa: BLE001  (unloadable entry point: make_vec reports it below)
        return False


def make_vec(env_cfg: dict[str, Any], num_envs: int, seed: int | None = None) -> gym.vector.VectorEnv:
    """Build ``num_envs`` copies of the env named by an ``env`` config group, as one vector env.

    Every id goes through ``gymnasium.make_vec``: the env's own batched implementation where it has
    one (ours, CartPole), else a synchronous loop over copies; both with next-step autoreset. A
    batched env that takes ``seed=`` gets it (the same seed gives the same episodes); the action
    space is seeded in every case. Unknown ids and bad kwargs become one-line ``ConfigError``s.
    """
    env_id = env_cfg["id"]
    kwargs = dict(env_cfg.get("kwargs") or {})
    ensure_registered(env_id, env_cfg.get("name"))  # Fetch ids: import gymnasium-robotics, or one line
    env_id = registered_id(env_id)  # a "module:Env-v0" id: its module must have been imported already
    # A native numpy-batched implementation (CartPole's steps 20 copies ~3x faster than a loop of
    # single envs, same dynamics and time limit) beats the generic synchronous loop. JAX-backed
    # vector envs are skipped: they return JAX arrays, and the rest of the pipeline is numpy/torch.
    vector_entry = gym.registry[env_id].vector_entry_point
    native = vector_entry is not None and "jax" not in str(vector_entry).lower()
    attempts = [("vector_entry_point", {"seed": seed} if _takes_seed(vector_entry) else {})] if native else []
    attempts.append(("sync", {}))
    # env.vectorization (sync | async) picks gymnasium's loop explicitly: async steps each copy in
    # its own worker process (MuJoCo Fetch; see her_rl.envs.fetch for the measurement).
    if env_cfg.get("vectorization"):
        attempts = [(str(env_cfg["vectorization"]), {})]
    first_error: Exception | None = None
    for mode, extra in attempts:
        try:
            envs = gym.make_vec(env_id, num_envs=num_envs, vectorization_mode=mode, **kwargs, **extra)
            break
        except Exception as exc:  # noqa: BLE001  (gymnasium raises many types for missing deps / bad kwargs)
            first_error = first_error or exc
    else:
        message = " ".join(str(first_error).split())  # one line
        raise ConfigError(f"cannot make env '{env_id}': {message}") from first_error
    if isinstance(envs, gym.vector.AsyncVectorEnv):  # copies in other processes: a local one for compute_reward
        envs = GoalVectorEnv(envs, env_id, kwargs)
    envs = cache_joint_lookups(envs)  # Fetch copies read their joints by address (her_rl/envs/fetch.py)
    if seed is not None:
        envs.action_space.seed(seed)
    return envs


__all__ = ["BitFlipEnv", "BitFlipVectorEnv", "DragEnv", "DragVectorEnv", "PushEnv", "PushVectorEnv",
           "check_table_kwargs", "make_vec"]
