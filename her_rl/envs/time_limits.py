"""Where an env's episodes end: its own time limit, ``env.max_episode_steps``, or her-rl's default
for an env that would run forever (said at the start of a run)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

DEFAULT_MAX_EPISODE_STEPS = 1000
"""Episodes of an env with no time limit of its own are truncated here (env.max_episode_steps: another)."""


@dataclass(frozen=True)
class StepLimit:
    limit: int | None
    """What make_vec passes as ``max_episode_steps`` (gymnasium's TimeLimit); None: the env's own."""
    by_default: bool = False
    """The env has no limit of its own: her-rl applies DEFAULT_MAX_EPISODE_STEPS (said at start)."""


def time_limit(env_cfg: dict[str, Any], name: str) -> StepLimit:
    """``env.max_episode_steps`` if given; else none where the env has a limit of its own (registered
    ``max_episode_steps``, her-rl's envs, which truncate themselves, or a ``max_episode_steps``
    kwarg); else the default."""
    given = env_cfg.get("max_episode_steps")
    if given is not None:
        return StepLimit(int(given))
    spec = gym.spec(name)
    if spec.max_episode_steps or spec.namespace == "her_rl" or "max_episode_steps" in (env_cfg.get("kwargs") or {}):
        return StepLimit(None)
    return StepLimit(DEFAULT_MAX_EPISODE_STEPS, by_default=True)


def episode_cap(envs: gym.vector.VectorEnv) -> int | None:
    """The longest an episode of ``envs`` can last, where it is known (its TimeLimit or own limit)."""
    spec = getattr(envs, "spec", None)
    known = [getattr(spec, "kwargs", {}).get("max_episode_steps"), getattr(spec, "max_episode_steps", None),
             getattr(envs, "max_episode_steps", None)]
    known = [int(k) for k in known if isinstance(k, (int, np.integer)) and k > 0]
    return max(known) if known else None


__all__ = ["DEFAULT_MAX_EPISODE_STEPS", "StepLimit", "episode_cap", "time_limit"]
