"""The learners by name, the configs made from their classes, the env group names, and which learner
fits which env.

A config names things only through this registry: ``algo._target_`` must be one of the registered
learner classes, so a command-line override cannot import or run arbitrary code. Whether an env is
goal-conditioned and which actions it takes is not kept here: it is read from the env's own spaces
(:func:`her_rl.envs.probe.probe_env`) and checked with :func:`check_pairing`.

A learner is a dataclass of its hyperparameters, and its class is the one place a hyperparameter is
written: the field (``her_rl.rules.setting``) holds the config's default, what the key may be and what
it means. So there is no YAML file per algorithm: :func:`store` puts one config per registered learner
(``name``, ``_target_`` and every field's default) into Hydra's ConfigStore, and the config reference
page reads the meanings with :func:`meanings`. Adding a hyperparameter is adding a field. The same
holds for the push and drag settings: their defaults are ``her_rl.envs.table_settings``'s, which a
Python caller of the env gets too, and conf/env/push.yaml and drag.yaml take them as ``env.kwargs``
from the stored ``_push_kwargs`` / ``_drag_kwargs``.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, fields
from pathlib import Path
from typing import Any

from gymnasium import spaces
from hydra.core.config_store import ConfigStore

from her_rl.envs.probe import EnvSpaces
from her_rl.envs.table_settings import DEFAULTS, DRAG_DEFAULTS
from her_rl.errors import ConfigError  # also importable from here, its first home
from her_rl.rules import meanings_of


@dataclass(frozen=True)
class AlgoInfo:
    """What a learner asks of an env, known without importing it (the classes: :func:`learners`)."""

    needs_goal_env: bool = False
    action_spaces: tuple[str, ...] = ("discrete",)
    """Which action-space kinds the algorithm can act in: ``discrete`` and/or ``continuous``."""


ALGOS: dict[str, AlgoInfo] = {
    "her_dqn": AlgoInfo(True),
    "her_ddpg": AlgoInfo(True, ("continuous",)),
    "her_sac": AlgoInfo(True, ("continuous",)),
    "her_td3": AlgoInfo(True, ("continuous",)),
    "her_redq": AlgoInfo(True, ("continuous",)),
    "her_crossq": AlgoInfo(True, ("continuous",)),
    "reinforce": AlgoInfo(False, ("discrete", "continuous")),
    "ppo": AlgoInfo(False, ("discrete", "continuous")),
    "rnd_ppo": AlgoInfo(False, ("discrete", "continuous")),
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


_LEARNERS: dict[str, type] = {}


def learners() -> dict[str, type]:
    """Each name's learner class. Imported on first use, not with this module: her-run refuses a bad
    command before torch loads."""
    if not _LEARNERS:
        # lazy: the algorithms load torch, and her-run refuses a bad command before that
        from her_rl.algos.her_crossq import HerCrossQ
        from her_rl.algos.her_ddpg import HerDDPG
        from her_rl.algos.her_dqn import HerDQN
        from her_rl.algos.her_redq import HerREDQ
        from her_rl.algos.her_sac import HerSAC
        from her_rl.algos.her_td3 import HerTD3
        from her_rl.algos.ppo import PPO
        from her_rl.algos.reinforce import Reinforce
        from her_rl.algos.rnd_ppo import RNDPPO

        _LEARNERS.update(her_dqn=HerDQN, her_ddpg=HerDDPG, her_sac=HerSAC, her_td3=HerTD3, her_redq=HerREDQ,
                         her_crossq=HerCrossQ, reinforce=Reinforce, ppo=PPO, rnd_ppo=RNDPPO)
    return _LEARNERS


def target_of(algo: str) -> str:
    """What the config's ``_target_`` of ``algo`` says: its class's dotted path."""
    cls = learners()[algo]
    return f"{cls.__module__}.{cls.__qualname__}"


def resolve_target(algo: str, target: str | None) -> type:
    """The class registered for ``algo``; any other ``_target_`` is refused (nothing is imported by name)."""
    algo_info(algo)
    if target is not None and target != target_of(algo):
        raise ConfigError(
            f"algo '{algo}' has _target_ '{target}', but only registered builders may be used "
            f"('{target_of(algo)}'); register new algorithms in her_rl/config/registry.py"
        )
    return learners()[algo]


def _hyperparameters(name: str) -> list:
    """The fields of algo ``name``'s registered class that are config keys (not the runtime arguments)."""
    from her_rl.algos.base import RUNTIME_ARGS  # lazy: torch, as the learners

    return [f for f in fields(resolve_target(name, None)) if f.init and f.name not in RUNTIME_ARGS]


def accepted_params(name: str) -> list[str]:
    """The hyperparameters (config keys) the registered class of algo ``name`` accepts: its fields."""
    return [f.name for f in _hyperparameters(name)]


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


def _plain(value: Any) -> Any:
    """A default as a config holds it: tuples become lists."""
    return [_plain(v) for v in value] if isinstance(value, (list, tuple)) else value


def defaults(name: str) -> dict[str, Any]:
    """Algo ``name``'s hyperparameters and their defaults, in the class's field order."""
    out = {}
    for f in _hyperparameters(name):
        if f.default is MISSING:  # a hyperparameter needs a default to be a config key
            raise TypeError(f"{name}: hyperparameter field '{f.name}' has no default")
        out[f.name] = _plain(f.default)
    return out


def node(name: str) -> dict[str, Any]:
    """The config ``algo=NAME`` selects."""
    return {"name": name, "_target_": target_of(name), **defaults(name)}


def meanings(name: str) -> dict[str, str]:
    """Hyperparameter -> what it means: the words of the nearest class that declares the field with
    some, so a learner that changes a default keeps the base's words unless it writes its own."""
    words = meanings_of(resolve_target(name, None))
    return {key: words.get(key, "") for key in defaults(name)}


def stored_groups() -> dict[str, tuple[str, ...]]:
    """The config groups whose options :func:`store` puts into Hydra's ConfigStore (no file each), as
    registered now: her-run's help lists them beside the groups of conf/ without importing the learners."""
    return {"algo": tuple(ALGOS)}


def store() -> None:
    """Put every registered algorithm's config and the table tasks' settings into Hydra's ConfigStore
    (idempotent)."""
    cs = ConfigStore.instance()
    for group, names in stored_groups().items():
        for name in names:
            cs.store(group=group, name=name, node=node(name))
    cs.store(name="_push_kwargs", node=dict(DEFAULTS))
    cs.store(name="_drag_kwargs", node=dict(DRAG_DEFAULTS))


__all__ = ["defaults", "meanings", "node", "store", "stored_groups"]
