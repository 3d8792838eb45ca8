"""A trained agent as a policy: ``her_rl.load(run_dir).predict(obs)``.

:func:`load` reads a run folder's ``checkpoint.pt`` (``torch.load(weights_only=True)``), rebuilds
only what acting needs (the networks and input statistics; no training envs, no replay memory) and
wraps it in a :class:`Policy`, whose :meth:`Policy.predict` follows Stable-Baselines3's ``predict``
protocol: observations exactly as a plain ``gymnasium.make`` env returns them, or batched as a
vector env (gymnasium's or SB3's ``VecEnv``) returns them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from her_rl.config.checks import check_device
from her_rl.config.saved import check_saved
from her_rl.envs.families import ensure_registered, registered_id
from her_rl.envs.time_limits import time_limit
from her_rl.errors import CheckpointError, ConfigError, one_line
from her_rl.folder import checkpoint
from her_rl.folder.rundir import CHECKPOINT
from her_rl.run.runner import make_agent


def checkpoint_path(path: str | Path) -> Path:
    """A run folder stands for its ``checkpoint.pt``."""
    path = Path(path)
    if path.is_dir():
        if not (path / CHECKPOINT).is_file():
            raise CheckpointError(f"cannot load {path}: the folder holds no {CHECKPOINT} (not a her-rl run folder, "
                                  "or the run stopped before its first checkpoint)")
        return path / CHECKPOINT
    return path


def make_env(env_cfg: dict[str, Any], render_mode: str | None = None, **kwargs: Any) -> gym.Env:
    """The single gymnasium env of an ``env`` config group (``kwargs`` override the group's)."""
    ensure_registered(env_cfg["id"], env_cfg.get("name"))
    options = {**dict(env_cfg.get("kwargs") or {}), **kwargs}
    limit = time_limit(env_cfg, registered_id(env_cfg["id"])).limit  # the run's step limit: a video never hangs
    if limit is not None and "max_episode_steps" not in kwargs:
        options["max_episode_steps"] = limit
    if render_mode is not None:
        options["render_mode"] = render_mode
    return gym.make(registered_id(env_cfg["id"]), **options)


def _space_text(space: spaces.Space) -> str:
    """A space in a few words: a Box's bounds can run to hundreds of characters."""
    if isinstance(space, spaces.Box):
        return f"Box of shape {tuple(space.shape)} {space.dtype}"
    return str(space)


def _integer_range(space: spaces.Space) -> tuple[Any, Any] | None:
    """(lowest, highest) whole-number value of a Discrete, MultiBinary or MultiDiscrete space; None for a Box."""
    if isinstance(space, spaces.Discrete):
        return int(space.start), int(space.start + space.n - 1)
    if isinstance(space, spaces.MultiBinary):
        return 0, 1
    if isinstance(space, spaces.MultiDiscrete):
        start = np.asarray(getattr(space, "start", 0))
        return start, start + space.nvec - 1  # per element, broadcast against the batch
    return None


def _array(obs: Any, space: spaces.Space, name: str) -> tuple[np.ndarray, int | None]:
    """``obs`` as a numeric array of ``space`` and its batch size (None: one observation). Whole-array
    numpy checks only (no Python loop over elements): predict stays cheap."""
    if isinstance(obs, Mapping):
        raise ConfigError(f"{name} is a dict with keys {list(obs)}, but the run's space is {_space_text(space)}")
    try:
        arr = np.asarray(obs)
    except (ValueError, TypeError) as e:  # ragged lists, GPU tensors: numpy's message is a traceback away
        raise ConfigError(f"{name} is not an array of numbers ({one_line(e)[:200]})") from None
    if arr.dtype.kind not in "biuf":  # strings, objects, complex, dates: nothing the networks can read
        raise ConfigError(f"{name} has dtype {arr.dtype}, not numbers (bool, int or float; the run's space is "
                          f"{_space_text(space)})")
    shape, got = tuple(space.shape or ()), arr.shape
    if got == shape:
        size = None
    elif len(got) == len(shape) + 1 and got[1:] == shape:
        size = got[0]
    else:
        raise ConfigError(f"{name} of shape {got} fits neither one observation {shape} nor a batch of them "
                          f"(the run's space is {_space_text(space)})")
    if size == 0:
        raise ConfigError(f"{name} is an empty batch (shape {got}): give at least one observation")
    if arr.dtype.kind == "f":
        if not np.isfinite(arr).all():  # NaN would act (action 0) or reach torch.distributions' error
            where = tuple(int(i) for i in np.argwhere(~np.isfinite(arr))[0])
            raise ConfigError(f"{name} holds NaN or inf (first at index {where})")
        narrow = space.dtype if space.dtype is not None and space.dtype.kind == "f" else np.dtype(np.float32)
        if arr.dtype.itemsize > narrow.itemsize and np.abs(arr).max() > np.finfo(narrow).max:
            raise ConfigError(f"{name} holds values beyond {narrow}'s range (they become inf in the networks)")
    bounds = _integer_range(space)
    if bounds is not None:
        low, high = bounds
        if arr.dtype.kind == "f" and (arr != np.floor(arr)).any():
            raise ConfigError(f"{name} holds values that are not whole numbers (the run's space is {space})")
        if (arr < low).any() or (arr > high).any():  # they would index past a one-hot table or be read as bits
            raise ConfigError(f"{name} holds values outside {space}")
    return arr, size


def _checked(obs: Any, space: spaces.Space, name: str = "observation") -> tuple[Any, int | None]:
    """``obs`` checked against the run's ``space``: numpy arrays (a dict of them, with only the space's
    keys, for a ``Dict`` space) and the batch size, None for one observation. Bad input is one
    ``ConfigError`` line (a ``ValueError``, as SB3 users expect) naming what is wrong, before any
    network sees it."""
    if not isinstance(space, spaces.Dict):
        return _array(obs, space, name)
    if not isinstance(obs, Mapping):
        raise ConfigError(f"{name} must be a dict with keys {list(space.spaces)}, got {type(obs).__name__}")
    missing = [k for k in space.spaces if k not in obs]
    if missing:
        raise ConfigError(f"{name} has no key {', '.join(map(repr, missing))} (it has {list(obs)}; "
                          f"the run's observations have {list(space.spaces)})")
    # Extra keys (a wrapper's) are dropped: the networks read only the space's own.
    parts = {k: _checked(obs[k], sub, f"{name}[{k!r}]") for k, sub in space.spaces.items()}
    sizes = {k: size for k, (_, size) in parts.items()}
    if len(set(sizes.values())) > 1:
        told = ", ".join(f"{k}: {'one observation' if n is None else n}" for k, n in sizes.items())
        raise ConfigError(f"{name} mixes batch sizes across keys ({told})")
    return {k: arr for k, (arr, _) in parts.items()}, next(iter(sizes.values()))


class Policy:
    """A trained agent, ready to act: ``action, _ = policy.predict(obs)``.

    Attributes: ``agent`` (the algorithm object, built for inference), ``config`` (the run's saved,
    resolved config), ``algo`` and ``env_id`` (names), ``observation_space`` and ``action_space``
    (of the single env), ``path`` (the checkpoint it came from).
    """

    def __init__(self, agent: Any, config: dict[str, Any], path: Path | None = None):
        self.agent, self.config, self.path = agent, config, path
        self.algo, self.env_id = config["algo"]["name"], config["env"]["id"]
        env = self.make_env()
        try:
            self.observation_space, self.action_space = env.observation_space, env.action_space
        finally:
            env.close()

    def __reduce__(self):
        """Pickled as its run's config and networks (what acting needs), rebuilt on unpickling; the env's
        module, for a user's env, must be imported where it is unpickled, as for :func:`load`."""
        state = {k: v for k, v in self.agent.state_dict().items() if k != "memory"}
        return _rebuilt, (self.config, state, str(self.path) if self.path is not None else None)

    def predict(self, observation: Any, state: Any = None, episode_start: Any = None,
                deterministic: bool = False) -> tuple[np.ndarray, Any]:
        """Actions for one observation or a batch, with Stable-Baselines3's ``predict`` protocol, so SB3's
        ``evaluate_policy`` and RL-Zoo-style loops take a ``Policy`` as it is.

        ``observation`` is one observation as the single env returns it (a dict of arrays for goal
        envs, an array otherwise) or a batch with a leading batch dimension, as a vector env returns
        it (SB3's ``VecEnv``: a dict of ``(n_envs, ...)`` arrays, or an ``(n_envs, ...)`` array). One
        observation gives one action, a batch a batch of them (Discrete: a 0-d int array, or ``(n,)``).

        ``deterministic=False`` (SB3's default) acts as in training: epsilon-greedy for HER-DQN,
        noise for HER-DDPG and HER-TD3, a sampled action for the others; ``deterministic=True`` is
        greedy. The policies are memoryless: ``state`` is returned as passed and ``episode_start`` is
        ignored. Bad input (a wrong shape, a missing key, an empty batch, NaN or inf, values a
        Discrete or MultiBinary space does not hold, batch sizes that differ across keys, non-numbers)
        is one :class:`her_rl.ConfigError` line that names it (a ``ValueError`` subclass).
        """
        if not isinstance(deterministic, (bool, np.bool_)):  # "no" or None would silently mean something
            raise ConfigError(f"deterministic={deterministic!r} is not allowed: deterministic must be True or False")
        observation, size = _checked(observation, self.observation_space)
        if size is None:  # one observation: the agents act on batches only
            observation = ({k: v[None] for k, v in observation.items()} if isinstance(observation, dict)
                           else observation[None])
        action = self.agent.act(observation, explore=not deterministic)
        # One observation: one action, a 0-d array for Discrete as SB3 gives.
        return (action if size is not None else np.asarray(action[0])), state

    def make_env(self, render_mode: str | None = None, **kwargs: Any) -> gym.Env:
        """The run's single gymnasium env (its id and ``env.kwargs``; ``kwargs`` override them)."""
        return make_env(self.config["env"], render_mode, **kwargs)

    def __repr__(self) -> str:
        return f"Policy(algo={self.algo!r}, env_id={self.env_id!r}, path={str(self.path)!r})"


def _rebuilt(config: dict[str, Any], state: dict[str, Any], path: str | None) -> Policy:
    agent = make_agent(config, "cpu", inference=True, state=state, source=Path(path or "pickled policy"), checked=True)
    return Policy(agent, config, Path(path) if path is not None else None)


def load(path: str | Path, device: str = "cpu") -> Policy:
    """The policy saved in a run folder (or a ``checkpoint.pt``), on ``device`` (``cpu``, ``cuda``,
    ``auto``). A run on your own env (``env.id=your.module:YourEnv-v0``) needs ``import your.module``
    first: loading a checkpoint never imports a module by itself."""
    if not isinstance(path, (str, os.PathLike)):
        raise CheckpointError(f"load needs a run folder or a checkpoint.pt path (a str or Path), got {type(path).__name__}")
    if not isinstance(device, str) or device not in ("cpu", "cuda", "auto"):  # arguments first, then the file
        raise ConfigError(f"device={device!r} is not allowed: device must be one of cpu, cuda, auto")
    check_device(device)
    ckpt = checkpoint_path(path)
    saved = checkpoint.load(ckpt)
    config = saved["config"]
    if not isinstance(config.get("algo"), dict) or not isinstance(config.get("env"), dict):
        raise CheckpointError(f"cannot load checkpoint {ckpt}: its config has no algo or env group")
    check_saved(saved, ckpt)
    agent = make_agent(config, device, inference=True, state=dict(saved["agent"]), source=ckpt, checked=True)
    return Policy(agent, config, ckpt)
