"""A user's env fault is one line: what the env raised or returned wrong, and where.

:func:`guard` is applied by :func:`her_rl.envs.make_vec` to every vector env it builds:

* every exception from ``reset``, ``step``, ``render``, ``close``, ``compute_reward`` and
  ``compute_terminated`` becomes an :class:`EnvFault` naming the env, the method and the line of
  the env's code that raised (the constructor's are told by ``make_vec`` the same way);
* the first reset and the first step are checked against the spaces: the observation (each key of a
  Dict one) by shape and dtype, the gymnasium API (``reset`` -> ``(obs, info)``, ``step`` -> 5 values),
  reward a number, terminated/truncated booleans; every batched ``compute_reward`` call must give
  one reward per goal (its shape and dtype: a later batch that changes shape is caught too). In a synchronous loop of copies the checks see each copy's own return
  (before SyncVectorEnv stacks it, which would fail with numpy's words); a batched or asynchronous
  env is checked on the batch.

The methods are replaced on the instances, not wrapped in a new object: attribute access
(``envs.envs``, ``autoreset``, ``compute_reward``), ``isinstance`` checks and the episode snapshots
of :mod:`her_rl.envs.state` (which walk the objects and would not know a new class) see the env
exactly as before. After the first call a copy's checked method removes itself; what stays on the
hot path is one try/except per vector call.
"""

from __future__ import annotations

import functools
import sys
import sysconfig
import time
import traceback
from pathlib import Path
from typing import Any, Callable

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from her_rl.envs.output_checks import check_obs, check_reset, check_rewards, check_step
from her_rl.errors import EnvError, EnvFault, one_line, outside, printable, raised_by_code


_STDLIB = sysconfig.get_paths()["stdlib"].replace("\\", "/")
_LIBRARIES = ("/gymnasium/", "/numpy/", "/her_rl/")


def _ours(path: str) -> bool:
    """A frame of Python, gymnasium, numpy or her-rl, not of the env (an installed env package is the env's)."""
    library = path.startswith(_STDLIB) and "-packages/" not in path
    return library or path.startswith("<") or any(p in path for p in _LIBRARIES)


def _where(exc: BaseException) -> str:
    """`` (file.py:line)`` of the innermost frame outside the libraries: the env's own code."""
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        path = frame.filename.replace("\\", "/")
        if not _ours(path):
            return f" ({Path(path).name}:{frame.lineno})"
    return ""


def raised(env_id: str, what: str, exc: BaseException) -> EnvFault:
    """``env ID: WHAT raised Type: message (file.py:line)``."""
    text = outside(one_line(exc).split(" was raised from the environment creator")[0][:300])  # gymnasium repeats kwargs
    return EnvFault(f"env {env_id}: {what} raised {type(exc).__name__}{': ' + text if text else ''}{_where(exc)}")


# ---- applying it -----------------------------------------------------------------------------

IN_CALL: dict[str, Any] = {"env": None, "method": None, "since": None}
"""The guarded env call under way (``since``: its time.monotonic() start), read by a watch that says a
slow step while it runs (her_rl.run.trainer); two assignments per call."""


def _guarded(env_id: str, name: str, method: Callable, check: Callable[[Any], str | None] | None = None,
             quiet: bool = False) -> Callable:
    """``method`` with its exceptions told as EnvFaults, and (``check``) its first result checked.
    ``quiet``: gymnasium's logger is silenced during the call (AsyncVectorEnv logs a worker's whole
    traceback before it re-raises the worker's error here)."""
    first = [check is not None]

    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Any:
        if quiet:
            level, gym.logger.min_level = gym.logger.min_level, gym.logger.ERROR + 10
        IN_CALL.update(env=env_id, method=name, since=time.monotonic())
        try:
            result = method(*args, **kwargs)
        except EnvError:
            raise
        except BaseException as exc:  # the env's code may raise anything, sys.exit() included
            if not raised_by_code(exc):
                raise
            raise raised(env_id, name, exc) from None
        finally:
            IN_CALL["since"] = None
            if quiet:
                gym.logger.min_level = level
        if first[0]:
            first[0] = False
            wrong = check(result)
            if wrong:
                raise EnvFault(f"env {env_id}: {wrong}")
        return result
    return call


def _check_first(env_id: str, env: Any, name: str, check: Callable[[Any], str | None]) -> None:
    """Check the first return of a copy's ``name`` (its own value, before gymnasium's wrappers and the
    vector loop see it); the method then removes itself, leaving the copy's own."""
    own = env.__dict__.get(name)
    method = getattr(env, name)

    @functools.wraps(method)
    def first(*args: Any, **kwargs: Any) -> Any:
        if own is None:
            delattr(env, name)
        else:
            setattr(env, name, own)
        result = method(*args, **kwargs)
        wrong = check(result)
        if wrong:
            raise EnvFault(f"env {env_id}: {wrong}")
        return result
    try:
        setattr(env, name, first)
    except (AttributeError, TypeError):  # __slots__ or a read-only attribute: the batch check still runs
        pass


def _goal_ndim(space: gym.Space) -> int:
    goal = space.spaces.get("achieved_goal") if isinstance(space, spaces.Dict) else None
    return len(goal.shape) if goal is not None and goal.shape is not None else 1


def _per_goal(method: Callable, achieved: Any, desired: Any, info: Any) -> np.ndarray:
    """``method`` called on one goal at a time over a batch, its rewards stacked in the batch's shape."""
    achieved, desired = np.asarray(achieved), np.asarray(desired)
    batch = achieved.shape[:-1]
    flat_a, flat_d = achieved.reshape(-1, achieved.shape[-1]), desired.reshape(-1, desired.shape[-1])
    infos = info if isinstance(info, (list, tuple, np.ndarray)) and len(info) == len(flat_a) else [info] * len(flat_a)
    return np.array([np.asarray(method(a, d, i)).item() for a, d, i in zip(flat_a, flat_d, infos)]).reshape(batch)


def _reward_rule(env_id: str, carrier: Any, goal_ndim: int) -> None:
    """compute_reward (and compute_terminated) of ``carrier``: faults told; every batched call checked.

    An env whose compute_reward takes one goal but fails on a batch (gymnasium-robotics 1.4's
    HandManipulatePen*, whose z-rotation case indexes the batch axis) is called one goal at a time
    from then on, said once: slower, not wrong. A batch that fails one goal at a time too is a fault."""
    method, pending, per_goal = carrier.compute_reward, [True], [False]

    @functools.wraps(method)
    def compute_reward(*args: Any, **kwargs: Any) -> Any:
        if per_goal[0]:
            try:
                return _per_goal(method, *args, **kwargs)
            except BaseException as exc:
                if not raised_by_code(exc):
                    raise
                raise raised(env_id, "compute_reward", exc) from None
        try:
            rewards = method(*args, **kwargs)
        except EnvError:
            raise
        except BaseException as exc:
            if not raised_by_code(exc):
                raise
            achieved = args[0] if args else kwargs.get("achieved_goal")
            if not pending[0] or np.ndim(achieved) <= goal_ndim or goal_ndim != 1:
                raise raised(env_id, "compute_reward", exc) from None
            try:
                rewards = _per_goal(method, *args, **kwargs)
            except BaseException as again:  # fails either way: the batch's error is the one to tell
                if not raised_by_code(again):
                    raise
                raise raised(env_id, "compute_reward", exc) from None
            per_goal[0] = True
            print(printable(f"her-run: warning: env {env_id}: compute_reward fails on a batch of goals "
                            f"({type(exc).__name__}: {outside(one_line(exc)[:120])}) but takes one goal at a time: "
                            "it is called per goal (slower relabelling)"), file=sys.stderr, flush=True)
        achieved = args[0] if args else kwargs.get("achieved_goal")
        batch = np.shape(achieved)[:max(0, np.ndim(achieved) - goal_ndim)]
        if batch:  # every batch HER sends (a shape and a dtype: nothing per goal); the env's own step asks one goal
            pending[0] = False
            wrong = check_rewards(rewards, tuple(batch))
            if wrong:
                raise EnvFault(f"env {env_id}: {wrong}")
        return rewards
    carrier.compute_reward = compute_reward
    if callable(getattr(carrier, "compute_terminated", None)):
        carrier.compute_terminated = _guarded(env_id, "compute_terminated", carrier.compute_terminated)


def guard(envs: gym.vector.VectorEnv, env_id: str) -> gym.vector.VectorEnv:
    """Make ``envs`` (in place) tell its faults as EnvFaults; see the module docstring."""
    space, batch = envs.single_observation_space, (envs.num_envs,)
    quiet = isinstance(envs.unwrapped, gym.vector.AsyncVectorEnv)
    envs.reset = _guarded(env_id, "reset", envs.reset, lambda r: check_reset(r, space, batch), quiet)
    envs.step = _guarded(env_id, "step", envs.step, lambda r: check_step(r, space, batch), quiet)
    envs.render = _guarded(env_id, "render", envs.render, quiet=quiet)
    envs.close = _guarded(env_id, "close", envs.close, quiet=quiet)
    carriers = [envs] if callable(getattr(envs, "compute_reward", None)) else []
    for copy in getattr(envs, "envs", None) or ():  # a synchronous loop: each copy's own returns
        base = copy.unwrapped
        own = base.observation_space
        _check_first(env_id, base, "reset", lambda r, own=own: check_reset(r, own))
        _check_first(env_id, base, "step", lambda r, own=own: check_step(r, own))
        if callable(getattr(base, "compute_reward", None)):
            carriers.append(base)
    for carrier in carriers:
        try:
            _reward_rule(env_id, carrier, _goal_ndim(space))
        except (AttributeError, TypeError):
            pass
    return envs


__all__ = ["EnvFault", "check_obs", "check_reset", "check_rewards", "check_step", "guard", "raised"]
