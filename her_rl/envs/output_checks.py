"""Whether what an env returned fits the gymnasium API and the env's spaces: each check gives what is
wrong, in words, or None. :mod:`her_rl.envs.checks` applies them to an env's first reset and step
and to its first batched ``compute_reward``."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from her_rl.errors import one_line


# ---- what a value is, in words ---------------------------------------------------------------

def _what(value: Any) -> str:
    if value is None:
        return "None"
    if isinstance(value, np.ndarray):
        return f"an array of shape {value.shape} and dtype {value.dtype}"
    if isinstance(value, tuple):
        return f"a tuple of {len(value)}"
    return f"a {type(value).__name__} ({one_line(repr(value))[:40]})"


# ---- the checks of the first outputs ---------------------------------------------------------

def check_obs(value: Any, space: gym.Space, batch: tuple[int, ...] = (), field: str = "observation") -> str | None:
    """What is wrong with ``value`` as an observation of ``space`` (with leading ``batch`` axes),
    or None. Shapes and dtypes only, not bounds; a dtype may be cast within its kind (float64 for a
    float32 Box: SyncVectorEnv casts it), never across (strings, objects, floats for integers)."""
    if isinstance(space, spaces.Dict):
        if not isinstance(value, dict):
            return f"{field} is {_what(value)}, but the observation space is a Dict ({', '.join(space.spaces)})"
        for key, sub in space.spaces.items():
            if key not in value:
                return f"{field} has no key {key!r} (the observation space has {', '.join(space.spaces)})"
            wrong = check_obs(value[key], sub, batch, f"{field}[{key!r}]")
            if wrong:
                return wrong
        return None
    if isinstance(space, spaces.Tuple):
        if not isinstance(value, tuple) or len(value) != len(space.spaces):
            return f"{field} is {_what(value)}, but the observation space is a Tuple of {len(space.spaces)}"
        return next((w for i, (v, s) in enumerate(zip(value, space.spaces))
                     if (w := check_obs(v, s, batch, f"{field}[{i}]"))), None)
    if not isinstance(space, (spaces.Box, spaces.Discrete, spaces.MultiBinary, spaces.MultiDiscrete)):
        return None  # Text, Graph, Sequence, ...: left to the learner
    try:
        array = np.asarray(value)
    except Exception:  # noqa: BLE001  (ragged lists and other things numpy refuses)
        return f"{field} is {_what(value)}, not an array"
    shape = (*batch, *space.shape)
    kinds = "biuf" if isinstance(space, spaces.Box) else "biu"
    if array.dtype.kind not in kinds or not np.can_cast(array.dtype, space.dtype, "same_kind"):
        return f"{field} has dtype {array.dtype}; the observation space {space} holds {space.dtype}"
    if array.shape != shape:
        return f"{field} has shape {array.shape}; the observation space {space} wants {shape}"
    return None


def _flag(value: Any, batch: tuple[int, ...]) -> bool:
    """A bool, or 0/1 as an integer (many envs return ``int(done)``; gymnasium stores it as a bool)."""
    if batch:
        return (isinstance(value, np.ndarray) and value.shape == batch
                and (value.dtype == bool or (value.dtype.kind in "iu" and bool(np.isin(value, (0, 1)).all()))))
    if isinstance(value, (bool, np.bool_)):
        return True
    return isinstance(value, (int, np.integer)) and value in (0, 1)


def _number(value: Any, batch: tuple[int, ...]) -> bool:
    if value is None or isinstance(value, (str, bytes)) or (not batch and not np.isscalar(value)
                                                            and not isinstance(value, np.ndarray)):
        return False
    array = np.asarray(value)
    return array.dtype.kind in "biuf" and array.shape == batch


def check_reset(result: Any, space: gym.Space, batch: tuple[int, ...] = ()) -> str | None:
    if not isinstance(result, tuple) or len(result) != 2 or not isinstance(result[1], dict):
        if isinstance(result, tuple) and len(result) == 2:
            return f"reset's info is {_what(result[1])}; it must be a dict"
        return (f"reset returned {_what(result)}, not (observation, info): the old gym API returned the "
                "observation alone; gymnasium's reset returns (obs, info)")
    wrong = check_obs(result[0], space, batch)
    return f"reset's {wrong}" if wrong else None


def check_step(result: Any, space: gym.Space, batch: tuple[int, ...] = ()) -> str | None:
    if not isinstance(result, tuple) or len(result) != 5:
        if isinstance(result, tuple) and len(result) == 4:
            return ("step returned 4 values (obs, reward, done, info: the old gym API); gymnasium's step returns "
                    "5: (obs, reward, terminated, truncated, info)")
        return f"step returned {_what(result)}, not (obs, reward, terminated, truncated, info)"
    obs, reward, terminated, truncated, info = result
    wrong = check_obs(obs, space, batch)
    if wrong:
        return f"step's {wrong}"
    if not _number(reward, batch):
        return f"step's reward is {_what(reward)}; it must be " + (f"an array of {batch} numbers" if batch else
                                                                    "a number (a float)")
    for field, flag in (("terminated", terminated), ("truncated", truncated)):
        if not _flag(flag, batch):
            return f"step's {field} is {_what(flag)}; it must be " + (f"a bool (or 0/1) array of shape {batch}" if batch
                                                                      else "a bool (or 0/1)")
    return None if isinstance(info, dict) else f"step's info is {_what(info)}; it must be a dict"


def check_rewards(rewards: Any, batch: tuple[int, ...]) -> str | None:
    """What is wrong with ``compute_reward``'s answer for a batch of goals (one reward each), or None."""
    array = np.asarray(rewards) if rewards is not None else None
    if array is not None and array.dtype.kind in "biuf" and array.shape == batch:
        return None
    n = int(np.prod(batch))
    return (f"compute_reward returned {_what(rewards)} for a batch of {n} goal{'s' * (n != 1)}; it must return one "
            f"reward per goal, an array of shape {batch} (HER relabels goals in batches)")
