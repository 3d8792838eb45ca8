"""Where an env's episodes end: its own time limit, ``env.max_episode_steps``, or her-rl's default
for an env that would run forever (said at the start of a run). An env's own limit may be registered
or a TimeLimit its entry point wraps it in, under any other wrappers (:func:`inner_limit`)."""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.wrappers import TimeLimit

DEFAULT_MAX_EPISODE_STEPS = 1000
"""Episodes of an env with no time limit of its own are truncated here (env.max_episode_steps: another)."""

_CHAIN_DEPTH = 64  # a wrapper chain deeper than this (or a loop) is not walked further


@dataclass(frozen=True)
class StepLimit:
    limit: int | None
    """What make_vec passes as ``max_episode_steps`` (gymnasium's TimeLimit); None: the env's own."""
    by_default: bool = False
    """The env has no limit of its own: her-rl applies DEFAULT_MAX_EPISODE_STEPS (said at start)."""
    inner: int | None = None
    """The limit of a TimeLimit the entry point wraps the env in (found by building one copy), if any."""


_inner_limits: dict[tuple[str, str, str], int | None] = {}  # (id, entry point, kwargs): inner_limit of a copy


def inner_limit(env: Any) -> int | None:
    """The shortest TimeLimit down ``env``'s wrapper chain (every ``.env``, a user's own wrappers too);
    None: none. Only a TimeLimit counts: an env's ``max_episode_steps`` attribute does not prove that it
    truncates itself, and trusting one that does not would let its episodes run forever."""
    limits, seen = [], set()
    while isinstance(env, gym.Env) and id(env) not in seen and len(seen) < _CHAIN_DEPTH:
        seen.add(id(env))
        if isinstance(env, TimeLimit):
            steps = getattr(env, "_max_episode_steps", None)
            if isinstance(steps, (int, np.integer)) and not isinstance(steps, bool) and steps > 0:
                limits.append(int(steps))
        try:
            env = getattr(env, "env", None)
        except Exception:  # noqa: BLE001  (a user's property may raise)
            break
    return min(limits) if limits else None


def _built_limit(spec: gym.envs.registration.EnvSpec, kwargs: dict[str, Any]) -> int | None:
    """:func:`inner_limit` of one copy of ``spec``'s env, built once per id, entry point and kwargs;
    None where it cannot be built (make_vec then says why)."""
    try:
        given = json.dumps(kwargs, sort_keys=True, default=repr)
    except Exception:  # noqa: BLE001  (keys json cannot sort)
        given = repr(kwargs)
    key = (spec.id, str(spec.entry_point), given)
    if key not in _inner_limits:
        env, found = None, None
        try:
            with warnings.catch_warnings():  # make_vec's copies warn of the same things
                warnings.simplefilter("ignore")
                env = gym.make(spec.id, disable_env_checker=True, **kwargs)
                found = inner_limit(env)
        except Exception:  # noqa: BLE001  (whatever the constructor raises: not found)
            found = None
        finally:
            if env is not None:
                try:
                    env.close()
                except Exception:  # noqa: BLE001
                    pass
        _inner_limits[key] = found
    return _inner_limits[key]


def time_limit(env_cfg: dict[str, Any], name: str) -> StepLimit:
    """``env.max_episode_steps`` if given; else none where the env has a limit of its own (registered
    ``max_episode_steps``, her-rl's envs, which truncate themselves, a ``max_episode_steps`` kwarg, or
    a TimeLimit inside what the entry point returns); else the default."""
    given = env_cfg.get("max_episode_steps")
    if given is not None:
        return StepLimit(int(given))
    spec = gym.spec(name)
    kwargs = dict(env_cfg.get("kwargs") or {})
    if spec.max_episode_steps or spec.namespace == "her_rl" or "max_episode_steps" in kwargs:
        return StepLimit(None)
    inner = _built_limit(spec, kwargs)
    if inner is not None:  # the entry point's TimeLimit cuts episodes: a default would only hide it
        return StepLimit(None, inner=inner)
    return StepLimit(DEFAULT_MAX_EPISODE_STEPS, by_default=True)


def first_copy(envs: gym.vector.VectorEnv) -> gym.Env | None:
    """A single env of ``envs`` whose wrapper chain can be read: a synchronous loop's first copy, or
    the local copy beside an asynchronous one (her_rl.envs.fetch.GoalVectorEnv); None: none."""
    sub = getattr(envs, "envs", None)
    if sub:
        return sub[0]
    local = getattr(envs, "local_env", None)
    return local if isinstance(local, gym.Env) else None


def episode_cap(envs: gym.vector.VectorEnv) -> int | None:
    """The longest an episode of ``envs`` can last, where it is known (its TimeLimit or own limit)."""
    spec = getattr(envs, "spec", None)
    known = [getattr(spec, "kwargs", {}).get("max_episode_steps"), getattr(spec, "max_episode_steps", None),
             getattr(envs, "max_episode_steps", None), inner_limit(first_copy(envs))]
    known = [int(k) for k in known if isinstance(k, (int, np.integer)) and k > 0]
    return max(known) if known else None


__all__ = ["DEFAULT_MAX_EPISODE_STEPS", "StepLimit", "episode_cap", "first_copy", "inner_limit", "time_limit"]
