"""Checks on a composed config, run before anything is built or trained.

Every problem becomes a :class:`ConfigError` with one line that says what is wrong and what is
accepted; the CLI prints it and exits with status 2 instead of a traceback.
"""

from __future__ import annotations

import numbers
from typing import Any

from omegaconf import DictConfig, OmegaConf

from her_rl.registry import ConfigError, check_pairing

DEVICES = ("cpu", "cuda", "auto")


def _int(value: Any, key: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ConfigError(f"{key} must be an integer >= {minimum}, got {value!r}")
    if value < minimum:
        raise ConfigError(f"{key} must be >= {minimum}, got {value}")
    return int(value)


def _positive(value: Any, key: str, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value > 0:
        raise ConfigError(f"{key} must be a positive number, got {value!r}")


def validate(cfg: DictConfig) -> None:
    """Raise ConfigError on the first invalid value; names and pairings go through the registry."""
    for key in ("algo", "env"):
        if not isinstance(cfg.get(key), DictConfig) or "name" not in cfg[key]:
            raise ConfigError(f"config group '{key}' is missing; pick one with {key}=NAME")
    check_pairing(cfg.algo.name, cfg.env.name)

    _int(cfg.n, "n (number of bits)", 1)
    _int(cfg.size, "size", 1)
    _int(cfg.seed, "seed", 0)
    _int(cfg.threads, "threads", 1)
    if cfg.device not in DEVICES:
        raise ConfigError(f"device must be one of {', '.join(DEVICES)}, got {cfg.device!r}")
    _int(cfg.budget.env_steps, "budget.env_steps", 1)
    _positive(cfg.budget.wall_time_s, "budget.wall_time_s", allow_none=True)
    _int(cfg.eval.episodes, "eval.episodes", 1)
    _int(cfg.eval.every_iterations, "eval.every_iterations", 1)
    threshold = cfg.eval.success_threshold
    if isinstance(threshold, bool) or not isinstance(threshold, numbers.Real) or not 0 < threshold <= 1:
        raise ConfigError(f"eval.success_threshold must lie in (0, 1], got {threshold!r}")
    if cfg.checkpoint.every_s is None or cfg.checkpoint.every_s < 0:
        raise ConfigError(f"checkpoint.every_s must be >= 0, got {cfg.checkpoint.every_s!r}")

    algo = OmegaConf.to_container(cfg.algo, resolve=True)
    for key, value in algo.items():
        if (key in ("lr", "learning_rate") or key.endswith("_lr")) and not isinstance(value, bool):
            _positive(value, f"algo.{key} (learning rate)")
        if key in ("batch_size", "minibatch_size", "num_envs", "n_steps", "epochs"):
            _int(value, f"algo.{key}", 1)
