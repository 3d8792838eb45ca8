"""Names -> builders for algorithms, the env group names, and which algorithm fits which env.

A config names things only through this registry: ``algo._target_`` must be one of the
registered algorithm classes, so a command-line override cannot import or run arbitrary code.
Whether an env is goal-conditioned and which actions it takes is not kept here: it is read from
the env's own spaces (``her_rl.config.checks.probe_env``) and checked with :func:`check_pairing`.
"""

from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gymnasium import spaces

from her_rl.errors import ConfigError  # also importable from here, its first home


@dataclass(frozen=True)
class AlgoInfo:
    target: str
    """Dotted path of the algorithm class (what its config's ``_target_`` must say)."""
    needs_goal_env: bool = False
    action_spaces: tuple[str, ...] = ("discrete",)
    """Which action-space kinds the algorithm can act in: ``discrete`` and/or ``continuous``."""


@dataclass(frozen=True)
class EnvSpaces:
    """What one built env looks like, as far as pairing it with an algorithm goes."""

    observation_space: spaces.Space
    action_space: spaces.Space
    goal_env: bool
    """Dict observation with observation/achieved_goal/desired_goal and a ``compute_reward``."""
    horizon: int | None = None
    """The longest an episode lasts, where known (its time limit): what one copy's collection may hold."""


ALGOS: dict[str, AlgoInfo] = {
    "her_dqn": AlgoInfo("her_rl.algos.her_dqn.HerDQN", needs_goal_env=True),
    "her_ddpg": AlgoInfo("her_rl.algos.her_ddpg.HerDDPG", needs_goal_env=True, action_spaces=("continuous",)),
    "her_sac": AlgoInfo("her_rl.algos.her_sac.HerSAC", needs_goal_env=True, action_spaces=("continuous",)),
    "her_td3": AlgoInfo("her_rl.algos.her_td3.HerTD3", needs_goal_env=True, action_spaces=("continuous",)),
    "her_redq": AlgoInfo("her_rl.algos.her_redq.HerREDQ", needs_goal_env=True, action_spaces=("continuous",)),
    "her_crossq": AlgoInfo("her_rl.algos.her_crossq.HerCrossQ", needs_goal_env=True, action_spaces=("continuous",)),
    "reinforce": AlgoInfo("her_rl.algos.reinforce.Reinforce", action_spaces=("discrete", "continuous")),
    "ppo": AlgoInfo("her_rl.algos.ppo.PPO", action_spaces=("discrete", "continuous")),
    "rnd_ppo": AlgoInfo("her_rl.algos.rnd_ppo.RNDPPO", action_spaces=("discrete", "continuous")),
}

# The env config groups, one per her_rl/conf/env/<name>.yaml, for the CLI's early name check.
ENVS: tuple[str, ...] = tuple(sorted(p.stem for p in (Path(__file__).parents[1] / "conf" / "env").glob("*.yaml")))


def _choices(names) -> str:
    return ", ".join(sorted(names))


def algo_info(name: str) -> AlgoInfo:
    if name not in ALGOS:
        raise ConfigError(f"unknown algo '{name}'; valid choices: {_choices(ALGOS)}")
    return ALGOS[name]


def check_env_name(name: str) -> None:
    if name not in ENVS:
        raise ConfigError(f"unknown env '{name}'; valid choices: {_choices(ENVS)}")


def action_kind(space: spaces.Space) -> str | None:
    """``discrete`` (Discrete), ``continuous`` (Box) or None (any other action space)."""
    if isinstance(space, spaces.Discrete):
        return "discrete"
    if isinstance(space, spaces.Box):
        return "continuous"
    return None


CONTINUOUS_DEFAULT = "her_crossq"
"""The learner a goal env with Box actions gets when the command names none: HER-CrossQ measured best
of the continuous hindsight learners on FetchPush (docs/benchmarks/fetch.md)."""


def learner_for(env_spaces: EnvSpaces) -> tuple[str, str]:
    """The algorithm an env gets when the command names none, and why, from its probed spaces: a goal
    env with discrete actions HER-DQN, with Box actions :data:`CONTINUOUS_DEFAULT`, any other env PPO."""
    kind = action_kind(env_spaces.action_space)
    if env_spaces.goal_env and kind == "discrete":
        return "her_dqn", "a goal env with discrete actions"
    if env_spaces.goal_env and kind == "continuous":
        return CONTINUOUS_DEFAULT, "a goal env with Box actions"
    return "ppo", "not a goal env"


def check_pairing(algo: str, env: str, env_id: str, env_spaces: EnvSpaces) -> None:
    """Refuse an algorithm on an env it cannot learn in, judged by the env's probed spaces."""
    info = algo_info(algo)
    kind, fits = action_kind(env_spaces.action_space), learner_for(env_spaces)[0]
    fitting = kind in ALGOS[fits].action_spaces and (env_spaces.goal_env or not ALGOS[fits].needs_goal_env)
    instead = f" (algo={fits} fits it; with no algo= her-rl picks that)" if fitting and fits != algo else ""
    if info.needs_goal_env and not env_spaces.goal_env:
        raise ConfigError(
            f"algo '{algo}' needs a goal-conditioned env (Dict observation whose observation, achieved_goal and "
            f"desired_goal are arrays, and compute_reward); '{env}' ({env_id}) has none{instead}"
        )
    if kind not in info.action_spaces:
        raise ConfigError(
            f"algo '{algo}' acts in {' or '.join(info.action_spaces)} action spaces; '{env}' ({env_id}) has "
            f"action space {env_spaces.action_space}{instead}"
        )


def resolve_target(algo: str, target: str | None) -> type:
    """Import the class registered for ``algo``; refuse any other ``_target_``."""
    info = algo_info(algo)
    if target is not None and target != info.target:
        raise ConfigError(
            f"algo '{algo}' has _target_ '{target}', but only registered builders may be used "
            f"('{info.target}'); register new algorithms in her_rl/config/registry.py"
        )
    module, _, cls = info.target.rpartition(".")
    return getattr(importlib.import_module(module), cls)


RUNTIME_ARGS = ("env", "seed", "device", "inference", "checked")
"""Constructor arguments the runner passes itself; never config keys. ``inference=True`` builds
only what acting needs (networks, input statistics): no training envs, no replay memory.
``checked=True``: the values passed the class's rules already (her_rl/config/checks.py, in the
run's plan), so the constructor does not check them a second time."""


def accepted_params(name: str) -> list[str]:
    """The hyperparameters (config keys) the registered class of algo ``name`` accepts."""
    params = inspect.signature(resolve_target(name, None)).parameters
    return [p for p, v in params.items() if p not in RUNTIME_ARGS and v.kind not in (v.VAR_KEYWORD, v.VAR_POSITIONAL)]


def check_algo_keys(name: str, keys) -> None:
    unknown = sorted(set(keys) - {"name", "_target_"} - set(accepted_params(name)))
    if unknown:
        raise ConfigError(f"algo '{name}' has no parameter(s) {unknown}; accepted: "
                          f"{', '.join(sorted(accepted_params(name)))}")


def build_agent(algo_cfg: dict[str, Any], **runtime: Any):
    """Instantiate an algorithm from its config group plus runtime objects (env config, seed, device).

    ``algo_cfg`` holds ``name``, ``_target_`` and the algorithm's hyperparameters as keyword
    arguments; unknown hyperparameters raise a ConfigError naming the accepted ones.
    """
    cfg = dict(algo_cfg)
    name = cfg.pop("name")
    cls = resolve_target(name, cfg.pop("_target_", None))
    if not runtime.get("checked"):  # the gate checked a run's keys already
        check_algo_keys(name, cfg)
    return cls(**cfg, **runtime)
