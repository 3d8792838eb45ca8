"""The goal-env contract: what makes an env a goal env her-rl can learn in, read from the env itself.

A goal env's observation is a Dict of ``observation``, ``achieved_goal`` and ``desired_goal`` arrays
(Box or MultiBinary), with any other keys that flatten to numbers beside them, and something in the
stack carries ``compute_reward``. Its episodes end at a time limit found through any wrappers.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
from gymnasium import spaces

from her_rl.envs.families import split_id
from her_rl.envs.time_limits import first_copy, inner_limit
from her_rl.errors import ConfigError

GOAL_KEYS = ("observation", "achieved_goal", "desired_goal")
ARRAY_SPACES = (spaces.Box, spaces.MultiBinary)  # what a goal (and the observation beside it) may be
EXTRA_SPACES = (spaces.Box, spaces.MultiBinary, spaces.Discrete, spaces.MultiDiscrete)  # flattened to numbers


def extra_keys(space: spaces.Dict, env: str = "the env") -> tuple[str, ...]:
    """A goal env's observation keys other than GOAL_KEYS, in the space's own (sorted, fixed) order;
    one that cannot be flattened to numbers is a one-line ConfigError naming ``env`` and the key."""
    keys = tuple(k for k in space.spaces if k not in GOAL_KEYS)
    for k in keys:
        if not isinstance(space[k], EXTRA_SPACES):
            raise ConfigError(f"{env}: observation key {k!r} is a {type(space[k]).__name__} space; observation keys "
                              f"beside {', '.join(GOAL_KEYS)} must be Box, MultiBinary, Discrete or MultiDiscrete "
                              "(they are flattened into the network input)")
    return keys


def goal_carrier(envs: gym.vector.VectorEnv) -> Any:
    """The object carrying compute_reward: a batched env itself, or the first copy of a loop."""
    if hasattr(envs, "compute_reward"):
        return envs
    sub = getattr(envs, "envs", None)
    return sub[0].unwrapped if sub else envs


def episode_horizon(envs: gym.vector.VectorEnv, env_cfg: dict[str, Any]) -> int | None:
    """The env's time limit: the shortest of its own ``max_episode_steps`` and a TimeLimit wrapper's
    (``gymnasium.make`` turns a ``max_episode_steps`` kwarg into the wrapper; the entry point may wrap
    one under others), else the registered one."""
    limits = [getattr(envs, "max_episode_steps", None)]
    sub = getattr(envs, "envs", None)
    if sub:
        limits += [getattr(sub[0].unwrapped, "max_episode_steps", None), getattr(sub[0].spec, "max_episode_steps", None)]
    limits.append(inner_limit(first_copy(envs)))  # a spec can miss it: a user's wrapper, a copy made without one
    limits = [int(x) for x in limits if x]
    if limits:
        return min(limits)
    name = split_id(env_cfg.get("id", ""))[1]
    spec = gym.spec(name) if name in gym.registry else None
    return int(spec.max_episode_steps) if spec is not None and spec.max_episode_steps else None
