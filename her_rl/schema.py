"""What every config value may be: one rule per key, one checker per config group.

A rule names the allowed values (``an integer in [1, 4096]``); a violation is a ConfigError of one
line naming the key, the value and what is allowed. Types are strict: ``k=1.5`` is refused rather
than truncated, ``maybe`` is not a boolean, ``1e6`` is a float (write ``1000000``). Checks here
look at values only; whether the env can be built and fits the algorithm is ``her_rl.config``'s job.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any, Callable

from her_rl.algos.her_ddpg import NOISES
from her_rl.algos.her_dqn import NETWORKS
from her_rl.algos.hindsight import PRECISIONS
from her_rl.envs.bitflip import MAX_BITS
from her_rl.registry import ConfigError, check_algo_keys
from her_rl.rl.her import STRATEGIES
from her_rl.rl.nets import _ACTIVATIONS

DEEP_SEA_MAX_SIZE = 256  # one-hot observations of size**2 floats: 65,536 inputs per env copy at 256
MAX_SEED = 2**32 - 1  # numpy's SeedSequence and torch both take seeds in [0, 2**32 - 1] here
MAX_ENVS = 4096  # parallel env copies (num_envs, eval.episodes)
ACTIVATIONS = tuple(sorted(_ACTIVATIONS))  # the names her_rl.rl.nets.mlp knows


def show(value: Any) -> str:
    return repr(value) if isinstance(value, str) else str(value)


class RuleError(ConfigError):
    """A value outside its rule; ``source`` names the interpolation it came from, if any."""

    def __init__(self, key: str, value: Any, allowed: str, source: str | None = None):
        self.key, self.value, self.allowed = key, value, allowed
        origin = f" (from {source})" if source else ""
        super().__init__(f"{key}={show(value)}{origin} is not allowed: {key} must be {allowed}")

    def from_source(self, source: str) -> RuleError:
        return RuleError(self.key, self.value, self.allowed, source)


@dataclass(frozen=True)
class Rule:
    allowed: str
    """What is allowed, as it reads after "must be"."""
    ok: Callable[[Any], bool]

    def check(self, key: str, value: Any) -> None:
        if not self.ok(value):
            raise RuleError(key, value, self.allowed)


def _is_int(v: Any) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _is_real(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v)


def integer(lo: int | None = None, hi: int | None = None) -> Rule:
    if hi is not None:
        text = f"an integer in [{lo}, {hi}]"
    else:
        text = "an integer" if lo is None else f"an integer >= {lo}"
    return Rule(text, lambda v: _is_int(v) and (lo is None or v >= lo) and (hi is None or v <= hi))


def real(lo: float | None = None, hi: float | None = None, lo_open: bool = False, hi_open: bool = False) -> Rule:
    if lo is not None and hi is not None:
        text = f"a number in {'(' if lo_open else '['}{lo}, {hi}{')' if hi_open else ']'}"
    elif lo is not None:
        text = f"a finite number {'>' if lo_open else '>='} {lo}"
    else:
        text = "a finite number"

    def ok(v: Any) -> bool:
        if not _is_real(v):
            return False
        if lo is not None and (v <= lo if lo_open else v < lo):
            return False
        return hi is None or (v < hi if hi_open else v <= hi)
    return Rule(text, ok)


def optional(rule: Rule) -> Rule:
    return Rule(f"null or {rule.allowed}", lambda v: v is None or rule.ok(v))


def choice(*values: Any) -> Rule:
    # compare type too: 1 == True in Python, but `resume=1` is not `resume=true`
    text = "one of " + ", ".join(str(v).lower() if isinstance(v, bool) else str(v) for v in values)
    return Rule(text, lambda v: any(type(v) is type(c) and v == c for c in values))


BOOL = Rule("true or false", lambda v: isinstance(v, bool))
POSITIVE = real(0, lo_open=True)
NON_NEGATIVE = real(0)
UNIT_OPEN_CLOSED = real(0, 1, lo_open=True)  # (0, 1]
UNIT = real(0, 1)  # [0, 1]
COUNT = integer(1)
TEXT = Rule("a non-empty string", lambda v: isinstance(v, str) and v != "")
HIDDEN = Rule("a non-empty list of positive integers, e.g. [64, 64]",
              lambda v: isinstance(v, (list, tuple)) and len(v) > 0 and all(_is_int(h) and h >= 1 for h in v))
ACTIVATION = choice(*ACTIVATIONS)
GRAD_NORM = optional(POSITIVE)  # a negative max norm would flip the gradient's sign in torch


# ---- top level ------------------------------------------------------------------------------

TOP: dict[str, Any] = {
    "n": integer(1, MAX_BITS),
    "size": integer(1, DEEP_SEA_MAX_SIZE),
    "seed": integer(0, MAX_SEED),
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


def _check_hindsight(algo: dict[str, Any]) -> None:
    batch, buffer = algo.get("batch_size"), algo.get("buffer_size")
    if batch is not None and buffer is not None and batch > buffer:
        raise ConfigError(f"algo.batch_size={batch} is not allowed: it is larger than algo.buffer_size ({buffer})")


_HINDSIGHT = {  # every hindsight learner's keys (her_rl/algos/hindsight.py)
    "strategy": choice(*STRATEGIES), "k": integer(0), "random_mix": UNIT, "hidden": HIDDEN,
    "gamma": UNIT_OPEN_CLOSED, "batch_size": COUNT, "buffer_size": COUNT, "episodes_per_cycle": integer(1, MAX_ENVS),
    "updates_per_cycle": COUNT, "updates_per_step": optional(POSITIVE), "n_step": integer(1, 1000), "polyak": UNIT,
    "clip_target": BOOL, "grad_clip": GRAD_NORM, "normalize": choice("auto", True, False), "norm_clip": POSITIVE,
    "precision": choice(*PRECISIONS),
}
_DETERMINISTIC = {  # her_ddpg and her_td3: a deterministic actor explored around
    "actor_lr": POSITIVE, "critic_lr": POSITIVE, "random_eps": UNIT, "noise": choice(*NOISES),
    "noise_eps": NON_NEGATIVE, "action_l2": NON_NEGATIVE,
}


def check_hindsight(name: str, values: dict[str, Any]) -> None:
    """A hindsight learner built from Python meets the rules of the command line (its constructor calls this)."""
    schema = ALGO_SCHEMAS.get(name, AlgoSchema(_HINDSIGHT, _check_hindsight))
    for key, value in values.items():
        if key in schema.rules:
            schema.rules[key].check(f"algo.{key}", value)
    schema.cross(values)


@dataclass(frozen=True)
class AlgoSchema:
    rules: dict[str, Rule]
    cross: Callable[[dict[str, Any]], None] | None = None


ALGO_SCHEMAS: dict[str, AlgoSchema] = {
    "her_dqn": AlgoSchema({
        **_HINDSIGHT, "network": choice(*NETWORKS), "lr": POSITIVE, "double_dqn": BOOL, "epsilon": UNIT,
    }, _check_hindsight),
    "her_ddpg": AlgoSchema({**_HINDSIGHT, **_DETERMINISTIC}, _check_hindsight),
    "her_sac": AlgoSchema({
        **_HINDSIGHT, "actor_lr": POSITIVE, "critic_lr": POSITIVE, "alpha_lr": POSITIVE, "alpha_init": POSITIVE,
        "autotune": BOOL, "target_entropy": optional(real()),
    }, _check_hindsight),
    "her_td3": AlgoSchema({
        **_HINDSIGHT, **_DETERMINISTIC, "target_noise": NON_NEGATIVE, "noise_clip": NON_NEGATIVE,
        "policy_delay": integer(1, 1000),
    }, _check_hindsight),
    "reinforce": AlgoSchema({
        **_PG_COMMON, "gamma": UNIT_OPEN_CLOSED, "baseline": choice("none", "critic"), "vf_lr": POSITIVE,
        "normalize_adv": BOOL, "max_episode_steps": COUNT,
    }),
    "ppo": AlgoSchema(_PPO, _check_anneal),
    "rnd_ppo": AlgoSchema({
        **{k: v for k, v in _PPO.items() if k != "gamma"},
        "gamma_ext": UNIT_OPEN_CLOSED, "gamma_int": UNIT_OPEN_CLOSED, "ext_coef": NON_NEGATIVE,
        "int_coef": NON_NEGATIVE, "rnd_lr": POSITIVE, "rnd_hidden": HIDDEN, "rnd_embed_dim": COUNT,
        "predictor_fraction": UNIT_OPEN_CLOSED, "rnd_init_steps": integer(0), "rnd_whiten": BOOL,
        "int_norm_decay": UNIT_OPEN_CLOSED,
    }, _check_anneal),
}


def check_algo(algo: dict[str, Any]) -> None:
    """Unknown keys are refused naming the accepted ones (the class's constructor decides which
    exist, so a parameter added to an algorithm is accepted here at once); known keys are
    range-checked."""
    name = algo["name"]
    check_algo_keys(name, algo)  # also refuses an unknown algo name
    schema = ALGO_SCHEMAS.get(name, AlgoSchema({}))
    for key, value in algo.items():
        if key in schema.rules:
            schema.rules[key].check(f"algo.{key}", value)
    if schema.cross is not None:
        schema.cross(algo)


# ---- env groups -----------------------------------------------------------------------------

ENV_GROUP: dict[str, Rule] = {
    "name": TEXT, "id": TEXT,
    "kwargs": Rule("a mapping of constructor arguments", lambda v: isinstance(v, dict)),
    "solved_return": optional(real()),
    "eval_episodes": integer(1, MAX_ENVS),
    "vectorization": optional(choice("sync", "async")),  # gymnasium's loop over copies (Fetch); null: the env's own
}

ENV_KWARGS: dict[str, dict[str, Rule]] = {  # keyed by env id, so `env=gym env.id=...` is checked too
    "her_rl/BitFlip-v0": {"n": integer(1, MAX_BITS)},
    "her_rl/DeepSea-v0": {"size": integer(1, DEEP_SEA_MAX_SIZE), "mapping_seed": integer(0, MAX_SEED)},
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
