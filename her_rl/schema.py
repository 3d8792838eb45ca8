"""What every config value may be: the rules of the top-level keys, and one checker per config group.

The rules themselves are written next to what they configure (her_rl/rules.py has the primitives):
an algorithm class declares ``RULES`` and ``check_config``, an env module ``KWARG_RULES``. This
module gathers them for the command line, in the order a config is read. Checks here look at values
only; whether the env can be built and fits the algorithm is ``her_rl.config``'s job.
"""

from __future__ import annotations

from typing import Any, Callable

from her_rl.envs import bitflip, deep_sea
from her_rl.errors import ConfigError
from her_rl.registry import check_algo_keys, resolve_target
from her_rl.rules import (ACTIVATION, BOOL, COUNT, GRAD_NORM, HIDDEN, MAX_ENVS, MAX_SEED, NON_NEGATIVE,  # noqa: F401
                          POSITIVE, SEED, TEXT, UNIT, UNIT_OPEN_CLOSED, Rule, RuleError, check_values, choice, integer, optional, real, show)


# ---- top level ------------------------------------------------------------------------------

TOP: dict[str, Any] = {
    "n": bitflip.KWARG_RULES["n"],  # interpolated into env.kwargs of env=bitflip
    "size": deep_sea.KWARG_RULES["size"],  # interpolated into env.kwargs of env=deep_sea
    "seed": SEED,
    "device": choice("cpu", "cuda", "auto"),
    "threads": integer(1, 1024),
    "budget": {"env_steps": COUNT, "wall_time_s": optional(POSITIVE)},
    "eval": {"every_iterations": COUNT, "every_env_steps": optional(COUNT), "episodes": integer(1, MAX_ENVS), "stop_when_solved": BOOL,
             "success_threshold": UNIT_OPEN_CLOSED, "return_threshold": optional(real())},
    "checkpoint": {"every_s": NON_NEGATIVE, "save_replay": BOOL},
    "guard": {"nonfinite": choice("stop", "skip"), "max_skips": COUNT},
    "resume": choice(False, True, "auto"),
    "load": optional(TEXT),
    "video": {"enabled": BOOL, "episodes": integer(1, 1000), "fps": optional(real(0, 240, lo_open=True)),
              "format": choice("mp4", "gif")},
    "progress": BOOL,
    "objective": choice("final_eval", "steps_to_solve"),
}
GROUPS = ("algo", "env")


def _check_table(prefix: str, table: dict[str, Any], values: Any, allow_unknown: bool = False) -> None:
    if not isinstance(values, dict):
        raise ConfigError(f"{prefix.rstrip('.')} must be a mapping of keys {', '.join(table)}, got {show(values)}")
    for key, value in values.items():
        rule = table.get(key)
        if rule is None:
            if allow_unknown:
                continue
            raise ConfigError(f"unknown config key '{prefix}{key}'; accepted: {', '.join(table)}")
        if isinstance(rule, dict):
            _check_table(f"{prefix}{key}.", rule, value)
        else:
            rule.check(f"{prefix}{key}", value)


def check_top(cfg: dict[str, Any]) -> None:
    unknown = sorted(set(cfg) - set(TOP) - set(GROUPS))
    if unknown:
        raise ConfigError(f"unknown config key '{unknown[0]}'; top-level keys: {', '.join([*GROUPS, *TOP])}")
    for group in GROUPS:
        if not isinstance(cfg.get(group), dict) or "name" not in cfg[group]:
            raise ConfigError(f"config group '{group}' is missing; pick one with {group}=NAME")
    _check_table("", TOP, {k: v for k, v in cfg.items() if k not in GROUPS})


# ---- algorithm groups -----------------------------------------------------------------------

_PG_COMMON = {  # shared by REINFORCE and PPO-style algorithms (her_rl/algos/rollout.py)
    "num_envs": integer(1, MAX_ENVS), "lr": POSITIVE, "ent_coef": NON_NEGATIVE, "max_grad_norm": GRAD_NORM,
    "hidden": HIDDEN, "activation": ACTIVATION, "normalize_obs": BOOL, "obs_clip": POSITIVE,
    "log_std_init": real(),
}
_PPO = {
    **_PG_COMMON, "num_steps": COUNT, "epochs": COUNT, "minibatch_size": COUNT, "lr_anneal": BOOL,
    "clip_eps": POSITIVE, "clip_anneal": BOOL, "anneal_steps": optional(COUNT), "gamma": UNIT_OPEN_CLOSED,
    "gae_lambda": UNIT, "vf_coef": NON_NEGATIVE, "norm_adv": BOOL, "target_kl": optional(POSITIVE),
}


def _check_anneal(algo: dict[str, Any]) -> None:
    if (algo.get("lr_anneal") or algo.get("clip_anneal")) and not algo.get("anneal_steps"):
        raise ConfigError("algo.anneal_steps=null is not allowed with lr_anneal or clip_anneal: annealing needs "
                          "the env steps until lr/clip reach 0 (an integer >= 1)")


_LEGACY = {  # TEMPORARY until the on-policy classes declare RULES
    "reinforce": ({
        **_PG_COMMON, "gamma": UNIT_OPEN_CLOSED, "baseline": choice("none", "critic"), "vf_lr": POSITIVE,
        "normalize_adv": BOOL, "max_episode_steps": COUNT,
    }, None),
    "ppo": (_PPO, _check_anneal),
    "rnd_ppo": ({
        **{k: v for k, v in _PPO.items() if k != "gamma"},
        "gamma_ext": UNIT_OPEN_CLOSED, "gamma_int": UNIT_OPEN_CLOSED, "ext_coef": NON_NEGATIVE,
        "int_coef": NON_NEGATIVE, "rnd_lr": POSITIVE, "rnd_hidden": HIDDEN, "rnd_embed_dim": COUNT,
        "predictor_fraction": UNIT_OPEN_CLOSED, "rnd_init_steps": integer(0), "rnd_whiten": BOOL,
        "int_norm_decay": UNIT_OPEN_CLOSED,
    }, _check_anneal),
}


def algo_rules(name: str) -> dict[str, Rule]:
    """The rules of algo ``name``'s keys, as its registered class declares them."""
    cls = resolve_target(name, None)
    return cls.RULES if hasattr(cls, "RULES") else _LEGACY[name][0]


def check_algo(algo: dict[str, Any]) -> None:
    """Unknown keys are refused naming the accepted ones (the class's constructor decides which
    exist, so a parameter added to an algorithm is accepted here at once); known keys are checked
    by the class's own ``check_config`` (its rules, then keys that constrain each other)."""
    name = algo["name"]
    check_algo_keys(name, algo)  # also refuses an unknown algo name
    values = {k: v for k, v in algo.items() if k not in ("name", "_target_")}
    cls = resolve_target(name, None)
    if hasattr(cls, "check_config"):
        cls.check_config(values)
        return
    rules, cross = _LEGACY[name]
    check_values(rules, values)
    if cross is not None:
        cross(values)


# ---- env groups -----------------------------------------------------------------------------

ENV_GROUP: dict[str, Rule] = {
    "name": TEXT, "id": TEXT,
    "kwargs": Rule("a mapping of constructor arguments", lambda v: isinstance(v, dict)),
    "solved_return": optional(real()),
    "eval_episodes": integer(1, MAX_ENVS),
    "vectorization": optional(choice("sync", "async")),  # gymnasium's loop over copies (Fetch); null: the env's own
}

ENV_KWARGS: dict[str, dict[str, Rule]] = {  # keyed by env id, so `env=gym env.id=...` is checked too
    "her_rl/BitFlip-v0": bitflip.KWARG_RULES,
    "her_rl/DeepSea-v0": deep_sea.KWARG_RULES,
}


def _table_checker(task: str) -> Callable[[dict[str, Any]], None] | None:
    """push/drag ship their own kwargs check (her_rl.envs.table.check_table_kwargs)."""
    try:
        from her_rl.envs.table import check_table_kwargs
    except ImportError:  # pragma: no cover - the envs are probed instead
        return None

    def check(kwargs: dict[str, Any]) -> None:
        try:
            check_table_kwargs(task, **kwargs)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"env.kwargs: {exc}") from None
    return check


ENV_KWARG_CHECKERS: dict[str, Callable[[], Callable[[dict[str, Any]], None] | None]] = {
    "her_rl/Push-v0": lambda: _table_checker("push"),
    "her_rl/Drag-v0": lambda: _table_checker("drag"),
}


def check_env(env: dict[str, Any]) -> None:
    for key, value in env.items():
        if key not in ENV_GROUP:
            raise ConfigError(f"unknown config key 'env.{key}'; accepted: {', '.join(ENV_GROUP)}")
        ENV_GROUP[key].check(f"env.{key}", value)
    for key in ("id", "kwargs"):
        if key not in env:
            raise ConfigError(f"env.{key} is missing (env group '{env.get('name')}')")
    _check_table("env.kwargs.", ENV_KWARGS.get(env["id"], {}), env["kwargs"], allow_unknown=True)
    checker = ENV_KWARG_CHECKERS.get(env["id"], lambda: None)()
    if checker is not None:
        checker(env["kwargs"])


def check(cfg: dict[str, Any]) -> None:
    """Check a resolved config (plain containers): top-level keys, then the algo and env groups."""
    check_top(cfg)
    check_algo(cfg["algo"])
    check_env(cfg["env"])
