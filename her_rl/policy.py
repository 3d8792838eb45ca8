"""A trained agent as a policy: ``her_rl.load(run_dir).predict(obs)``.

:func:`load` reads a run folder's ``checkpoint.pt`` (``torch.load(weights_only=True)``), rebuilds
only what acting needs (the networks and input statistics; no training envs, no replay memory) and
wraps it in a :class:`Policy`, whose :meth:`Policy.predict` takes observations exactly as a plain
``gymnasium.make`` env returns them, one at a time or batched.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from her_rl import checkpoint
from her_rl.errors import CheckpointError, ConfigError
from her_rl.rundir import CHECKPOINT


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
    import her_rl.envs  # noqa: F401  (registers her_rl/* ids)
    from her_rl.envs.custom import registered_id
    from her_rl.envs.fetch import ensure_registered

    ensure_registered(env_cfg["id"], env_cfg.get("name"))
    options = {**dict(env_cfg.get("kwargs") or {}), **kwargs}
    if render_mode is not None:
        options["render_mode"] = render_mode
    return gym.make(registered_id(env_cfg["id"]), **options)


def _batched(obs: Any, space: spaces.Space) -> bool:
    """Whether ``obs`` is a batch of observations of ``space`` or a single one."""
    if isinstance(space, spaces.Dict):
        key = "observation" if "observation" in space.spaces else next(iter(space.spaces))
        if not isinstance(obs, dict) or key not in obs:
            raise ValueError(f"expected a dict observation with key '{key}' (the env's {space}), got {type(obs).__name__}")
        return _batched(obs[key], space[key])
    shape, got = tuple(space.shape or ()), np.shape(obs)
    if got == shape:
        return False
    if len(got) == len(shape) + 1 and got[1:] == shape:
        return True
    raise ValueError(f"observation of shape {got} fits neither one observation {shape} nor a batch of them "
                     f"(the run's observation space is {space})")


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

    def predict(self, observation: Any, deterministic: bool = True) -> tuple[np.ndarray, None]:
        """Actions for one observation (as the single env returns it: a dict of arrays for goal envs,
        an array otherwise) or for a batch (a leading batch dimension). Returns ``(action, None)``,
        like Stable-Baselines3's ``predict``; ``deterministic=False`` explores as in training
        (epsilon-greedy, noise or a sampled action)."""
        batched = _batched(observation, self.observation_space)
        if not batched:
            if isinstance(observation, dict):
                observation = {k: np.asarray(v)[None] for k, v in observation.items()}
            else:
                observation = np.asarray(observation)[None]
        action = self.agent.act(observation, explore=not deterministic)
        return (action if batched else action[0]), None

    def make_env(self, render_mode: str | None = None, **kwargs: Any) -> gym.Env:
        """The run's single gymnasium env (its id and ``env.kwargs``; ``kwargs`` override them)."""
        return make_env(self.config["env"], render_mode, **kwargs)

    def __repr__(self) -> str:
        return f"Policy(algo={self.algo!r}, env_id={self.env_id!r}, path={str(self.path)!r})"


def load(path: str | Path, device: str = "cpu") -> Policy:
    """The policy saved in a run folder (or a ``checkpoint.pt``), on ``device`` (``cpu``, ``cuda``,
    ``auto``). A run on your own env (``env.id=your.module:YourEnv-v0``) needs ``import your.module``
    first: loading a checkpoint never imports a module by itself."""
    from her_rl.build import make_agent
    from her_rl.config import check_device
    from her_rl.resume import check_saved

    ckpt = checkpoint_path(path)
    saved = checkpoint.load(ckpt)
    config = saved["config"]
    if not isinstance(config.get("algo"), dict) or not isinstance(config.get("env"), dict):
        raise CheckpointError(f"cannot load checkpoint {ckpt}: its config has no algo or env group")
    check_saved(saved, ckpt)
    if device not in ("cpu", "cuda", "auto"):
        raise ConfigError(f"device={device!r} is not allowed: device must be one of cpu, cuda, auto")
    check_device(device)
    agent = make_agent(config, device, inference=True, state=dict(saved["agent"]), source=ckpt)
    return Policy(agent, config, ckpt)
