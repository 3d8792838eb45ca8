"""Names -> builders for algorithms and environments.

A config names things only through this registry: ``algo._target_`` must be one of the
registered algorithm classes, so a command-line override cannot import or run arbitrary code.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any


class ConfigError(ValueError):
    """A bad configuration, reported to the user as one clear line (no traceback)."""


@dataclass(frozen=True)
class AlgoInfo:
    target: str
    """Dotted path of the algorithm class (what its YAML's ``_target_`` must say)."""
    needs_goal_env: bool = False
    action_spaces: tuple[str, ...] = ("discrete",)
    """Which action-space kinds the algorithm can act in: ``discrete`` and/or ``continuous``."""


@dataclass(frozen=True)
class EnvInfo:
    goal_env: bool
    """Dict observations with observation/achieved_goal/desired_goal and compute_reward."""


ALGOS: dict[str, AlgoInfo] = {
    "her_dqn": AlgoInfo("her_rl.algos.her_dqn.HerDQN", needs_goal_env=True),
    "reinforce": AlgoInfo("her_rl.algos.reinforce.Reinforce", action_spaces=("discrete", "continuous")),
    "ppo": AlgoInfo("her_rl.algos.ppo.PPO", action_spaces=("discrete", "continuous")),
    "rnd_ppo": AlgoInfo("her_rl.algos.rnd_ppo.RNDPPO", action_spaces=("discrete", "continuous")),
}

ENVS: dict[str, EnvInfo] = {
    "bitflip": EnvInfo(goal_env=True),
    "cartpole": EnvInfo(goal_env=False),
    "mountaincar": EnvInfo(goal_env=False),
    "pendulum": EnvInfo(goal_env=False),
    "deep_sea": EnvInfo(goal_env=False),
    "gym": EnvInfo(goal_env=False),
}


def _choices(names) -> str:
    return ", ".join(sorted(names))


def algo_info(name: str) -> AlgoInfo:
    if name not in ALGOS:
        raise ConfigError(f"unknown algo '{name}'; valid choices: {_choices(ALGOS)}")
    return ALGOS[name]


def env_info(name: str) -> EnvInfo:
    if name not in ENVS:
        raise ConfigError(f"unknown env '{name}'; valid choices: {_choices(ENVS)}")
    return ENVS[name]


def check_pairing(algo: str, env: str) -> None:
    a, e = algo_info(algo), env_info(env)
    if a.needs_goal_env and not e.goal_env:
        goal_envs = [n for n, i in ENVS.items() if i.goal_env]
        raise ConfigError(
            f"algo '{algo}' needs a goal-conditioned env (hindsight relabelling); "
            f"'{env}' has no goals. Goal envs: {_choices(goal_envs)}"
        )


def resolve_target(algo: str, target: str | None) -> type:
    """Import the class registered for ``algo``; refuse any other ``_target_``."""
    info = algo_info(algo)
    if target is not None and target != info.target:
        raise ConfigError(
            f"algo '{algo}' has _target_ '{target}', but only registered builders may be used "
            f"('{info.target}'); register new algorithms in her_rl/registry.py"
        )
    module, _, cls = info.target.rpartition(".")
    return getattr(importlib.import_module(module), cls)


def build_agent(algo_cfg: dict[str, Any], **runtime: Any):
    """Instantiate an algorithm from its config group plus runtime objects (env config, seed, device).

    ``algo_cfg`` holds ``name``, ``_target_`` and the algorithm's hyperparameters as keyword
    arguments; unknown hyperparameters raise a ConfigError naming the accepted ones.
    """
    import inspect

    cfg = dict(algo_cfg)
    name = cfg.pop("name")
    cls = resolve_target(name, cfg.pop("_target_", None))
    params = inspect.signature(cls).parameters
    unknown = sorted(set(cfg) - set(params))
    if unknown:
        accepted = sorted(p for p in params if p not in runtime)
        raise ConfigError(f"algo '{name}' has no parameter(s) {unknown}; accepted: {', '.join(accepted)}")
    return cls(**cfg, **runtime)
