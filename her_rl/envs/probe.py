"""Probing an env: build it the way training builds it (one copy), read its spaces, close it.

What an env is, as far as pairing it with a learner goes (:class:`EnvSpaces`), is known only from the
env itself: a goal env is a Dict observation of observation/achieved_goal/desired_goal arrays with a
``compute_reward``, whatever its name. A probe also takes the env's first reset and step, so a fault is
one line before anything is written. One probe per env config and process; the warnings a probe raises
wait until the run passes its checks (:func:`show_held_warnings`), so a refused run prints one line.
"""

from __future__ import annotations

import copy
import json
import warnings
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
from gymnasium import spaces

from her_rl.envs import make_vec  # the package, imported before this module whatever imports it
from her_rl.envs.families import ensure_registered, registered_id
from her_rl.envs.goal_env import ARRAY_SPACES, GOAL_KEYS, episode_horizon, extra_keys, goal_carrier
from her_rl.envs.time_limits import time_limit
from her_rl.errors import ConfigError, one_line, outside


@dataclass(frozen=True)
class EnvSpaces:
    """What one built env looks like, as far as pairing it with an algorithm goes."""

    observation_space: spaces.Space
    action_space: spaces.Space
    goal_env: bool
    """Dict observation with observation/achieved_goal/desired_goal and a ``compute_reward``."""
    horizon: int | None = None
    """The longest an episode lasts, where known (its time limit): what one copy's collection may hold."""
    default_limit: int | None = None
    """The steps after which her-rl truncates the episodes of an env with no time limit of its own (said at
    start); None: the env's own limit, or env.max_episode_steps."""


_HELD: dict[tuple[str, str], list] = {}  # warnings each probe raised, until the run passes its checks
_PROBED: dict[tuple[str, str], EnvSpaces] = {}  # one probe per env config and process: a sweep checks each variant, then its jobs plan


def forget_probes() -> None:
    """Forget the env spaces probed so far in this process (the next check builds the env again)."""
    _PROBED.clear()


def _probe_failure(env: dict[str, Any], exc: ConfigError) -> ConfigError:
    """make_vec's one line, told as the probe tells it: which packages, which kwargs."""
    cause, env_id, kwargs = exc.__cause__, env["id"], dict(env.get("kwargs") or {})
    if cause is None:  # an unknown or unimported id, a missing extra: make_vec's own line says it
        return exc
    if isinstance(cause, gym.error.DependencyNotInstalled):
        return ConfigError(f"env.id '{env_id}' needs packages that are not installed: {outside(one_line(cause))}")
    if isinstance(cause, (TypeError, ValueError)):
        why = outside(one_line(cause).split(" was raised from the environment creator")[0])  # gymnasium repeats kwargs
        return ConfigError(f"env.kwargs={kwargs} rejected by '{env_id}': {why}")
    return ConfigError(f"cannot make env '{env_id}' with env.kwargs={kwargs}: {outside(one_line(cause))}")


def probe_env(env: dict[str, Any]) -> EnvSpaces:
    """Build the env of the ``env`` group as training builds it (``her_rl.envs.make_vec``, one
    copy), read its spaces, close it.

    This is how goal-ness is known: a Dict observation with observation/achieved_goal/desired_goal
    and a ``compute_reward`` on the env, whatever the env's name.
    """
    ensure_registered(env["id"], env.get("name"))  # Fetch ids: gymnasium-robotics registers them, or one line
    # Only registered ids, never an import here: a "module:Env-v0" id's module must already be imported.
    key = (json.dumps(env, sort_keys=True, default=str), repr(gym.registry[registered_id(env["id"])]))
    if key in _PROBED:
        return _PROBED[key]
    with warnings.catch_warnings(record=True) as said:  # shown only once the env passes: none before a refusal
        try:
            made = make_vec(env, 1, training=True)  # env.start_in_gripper: refused here for an env without a block
        except ConfigError as exc:
            raise _probe_failure(env, exc) from None
        try:
            obs, act = made.single_observation_space, made.single_action_space
            goal = (isinstance(obs, spaces.Dict) and all(k in obs.spaces for k in GOAL_KEYS)
                    and all(isinstance(obs[k], ARRAY_SPACES) for k in GOAL_KEYS)  # FrankaKitchen's are dicts per task
                    and callable(getattr(goal_carrier(made), "compute_reward", None)))
            if goal:
                extra_keys(obs, f"env {env['id']}")  # a key the networks cannot read: one line before the run folder
            elif isinstance(obs, spaces.Dict) and not all(isinstance(obs.spaces.get(k), ARRAY_SPACES)
                                                          for k in ("observation", "desired_goal")):
                raise ConfigError(
                    f"env {env['id']}: no learner of her-rl reads its observations, a Dict with keys "
                    f"{sorted(obs.spaces)[:8]} whose observation and desired_goal are not both arrays; her-rl reads "
                    "Box, Discrete or MultiBinary observations or a goal env's Dict of arrays (flatten yours with "
                    "gymnasium.wrappers.FlattenObservation in a module of your own and name that env.id)")
            # The env's first reset and step, checked by her_rl.envs.checks: a fault is one line before
            # anything is written, not after the run folder is taken.
            made.reset(seed=0)
            actions = copy.deepcopy(made.action_space)
            actions.seed(0)
            made.step(actions.sample())
            try:
                horizon = episode_horizon(made, env)
            except Exception:  # noqa: BLE001  (a user's attribute that raises or is no number: the horizon is unknown)
                horizon = None
        finally:
            made.close()
    if len(_PROBED) >= 32:
        _PROBED.clear()
        _HELD.clear()
    _HELD[key] = said
    limit = time_limit(env, registered_id(env["id"]))
    _PROBED[key] = EnvSpaces(observation_space=obs, action_space=act, goal_env=bool(goal), horizon=horizon,
                             default_limit=limit.limit if limit.by_default else None)
    return _PROBED[key]


def show_held_warnings() -> None:
    """The warnings the env probes raised (gymnasium's env checker, the env's own), shown once the run
    passed every check: a refused run's one line is all it prints."""
    for key, said in _HELD.items():
        for w in said:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno, w.file, w.line)
        _HELD[key] = []
