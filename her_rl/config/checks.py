"""What every config value may be, and the checks of a composed config before anything is built,
trained or written.

The rules themselves are written on what they configure (her_rl/rules.py has the primitives): a
learner's on its fields (``setting``), with ``check_config`` for keys that constrain each other; an
env's on its constructor's parameters (``Annotated``). This module gathers them for the command line,
in the order a config is read: the top-level keys (``TOP``), then one checker per group
(:func:`check_values`), and the ``video`` keys (the short form ``video=true`` becomes
``video.enabled=true`` as the command is composed, :func:`her_rl.config.compose.expand_overrides`,
because an OmegaConf bool cannot also hold ``video.episodes``; :func:`options` is their one check).

:func:`validate` resolves the config, checks every value, builds the env the way training builds it to
read its spaces (``probe_env``) and checks that the algorithm fits them
(:func:`her_rl.config.registry.check_pairing`). Every problem becomes a :class:`ConfigError` with one
line that says what is wrong and what is accepted; the CLI prints it and exits with status 2.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Callable

import yaml
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from her_rl.config.registry import check_algo_keys, check_pairing, defaults, resolve_target
from her_rl.envs import bitflip, deep_sea
from her_rl.envs.probe import EnvSpaces, probe_env, show_held_warnings
from her_rl.envs.table_settings import check_table_kwargs
from her_rl.errors import ConfigError, one_line
from her_rl.rules import (BOOL, COUNT, MAX_ENVS, NON_NEGATIVE, POSITIVE, Rule, RuleError, SEED, TEXT, UNIT,
                          UNIT_OPEN_CLOSED, arg_rules, choice, integer, optional, real, rules_of, show)


TOP: dict[str, Any] = {
    "n": arg_rules(bitflip.BitFlipEnv.__init__)["n"],  # interpolated into env.kwargs of env=bitflip
    "size": arg_rules(deep_sea.DeepSeaEnv.__init__)["size"],  # interpolated into env.kwargs of env=deep_sea
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
    "logger": Rule("a list of distinct names among tensorboard, wandb, mlflow, e.g. [tensorboard,wandb]",
                   lambda v: isinstance(v, (list, tuple)) and len(set(v)) == len(v)
                   and all(isinstance(x, str) and x in ("tensorboard", "wandb", "mlflow") for x in v)),
    "wandb": {"project": optional(TEXT), "entity": optional(TEXT), "group": optional(TEXT),
              "tags": Rule("a list of non-empty strings", lambda v: isinstance(v, (list, tuple))
                           and all(isinstance(x, str) and x != "" for x in v)),
              "mode": optional(choice("online", "offline", "disabled"))},
    "mlflow": {"tracking_uri": optional(TEXT), "experiment": TEXT},
    "progress": BOOL,
    "objective": choice("final_eval", "steps_to_solve"),
}
GROUPS = ("algo", "env")
# Keys a run reads with a default of its own (configs saved before they existed): the only ones of TOP
# a config may lack. Every other key, and every hyperparameter of the learner, is required.
OPTIONAL = ("n", "size", "eval.every_env_steps", "guard", "load", "video", "objective", "logger", "wandb",
            "wandb.project", "wandb.entity", "wandb.group", "wandb.tags", "wandb.mode", "mlflow", "mlflow.tracking_uri",
            "mlflow.experiment")
ENV_REQUIRED = ("name", "id", "kwargs")


def deleted_by(key: str, overrides: list[str] | None) -> str | None:
    """The ``~KEY`` override that removed ``key`` or a table above it, if one did."""
    for line in overrides or ():
        name = line[1:].split("=", 1)[0].strip() if line.startswith("~") else None
        if name and (key == name or key.startswith(name + ".")):
            return line
    return None


def missing(key: str, overrides: list[str] | None = None) -> ConfigError:
    """The one line for a required ``key`` that the config lacks."""
    line = deleted_by(key, overrides)
    group = key.split(".")[0]
    if key in GROUPS or key == f"{group}.name" and group in GROUPS:
        what = f"config group '{key}'" if key in GROUPS else key
        return ConfigError(f"{what} is required; {f'it was deleted with {line}: ' if line else ''}"
                           f"pick one with {group}=NAME")
    if line and isinstance(TOP.get(key), dict):
        return ConfigError(f"{key} is required (the table of {', '.join(TOP[key])}); it was deleted with {line}")
    if line:
        return ConfigError(f"{key} is required; it was deleted with {line} (set it with {key}=VALUE instead)")
    return ConfigError(f"{key} is missing from the config; the run needs it (her-run --cfg job shows its default)")


def required(cfg: dict[str, Any], learner: bool = True) -> list[str]:
    """Every key the run reads without a default, in the order a config is read; ``learner``: the
    hyperparameters of the algo's class too (a composed config has all; a saved one may predate some)."""
    keys = [*GROUPS]
    for key, rule in TOP.items():
        subs = [f"{key}.{sub}" for sub in rule] if isinstance(rule, dict) else []
        keys += [k for k in [key, *subs] if k not in OPTIONAL]
    keys += [f"env.{key}" for key in ENV_REQUIRED] + ["algo.name"]
    name = cfg.get("algo", {}).get("name") if isinstance(cfg.get("algo"), dict) else None
    if learner and isinstance(name, str):
        try:
            keys += [f"algo.{key}" for key in defaults(name)]
        except ConfigError:  # an unknown algo: check_algo names the choices
            pass
    return keys


def check_required(cfg: dict[str, Any], overrides: list[str] | None = None, learner: bool = True) -> None:
    """Refuse a config that lacks a key the run needs (a ``~KEY`` override, a Python caller's dict),
    naming the key and the override that deleted it; a value of the wrong kind is the rules' business.
    A table comes before its keys, so a deleted table is named as such."""
    for key in required(cfg, learner):
        node: Any = cfg
        for part in key.split("."):
            if not isinstance(node, dict):
                break
            if part not in node:
                raise missing(key, overrides)
            node = node[part]


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
            raise missing(group)
    _check_table("", TOP, {k: v for k, v in cfg.items() if k not in GROUPS})


# ---- algorithm groups -----------------------------------------------------------------------

def algo_rules(name: str) -> dict[str, Rule]:
    """The rules of algo ``name``'s keys, as its registered class's fields declare them."""
    return rules_of(resolve_target(name, None))


def check_algo(algo: dict[str, Any]) -> None:
    """Unknown keys are refused naming the accepted ones (the class's constructor decides which
    exist, so a parameter added to an algorithm is accepted here at once); known keys are checked
    by the class's own ``check_config`` (its rules, then keys that constrain each other)."""
    name = algo["name"]
    check_algo_keys(name, algo)  # also refuses an unknown algo name
    resolve_target(name, None).check_config({k: v for k, v in algo.items() if k not in ("name", "_target_")})


# ---- env groups -----------------------------------------------------------------------------

ENV_GROUP: dict[str, Rule] = {
    "name": TEXT, "id": TEXT,
    "kwargs": Rule("a mapping of constructor arguments", lambda v: isinstance(v, dict)),
    "solved_return": optional(real()),
    "eval_episodes": integer(1, MAX_ENVS),
    "vectorization": optional(choice("sync", "async")),  # gymnasium's loop over copies (Fetch); null: the env's own
    "success_key": optional(TEXT),  # the info key that says success; null: is_success, else success, else compute_reward
    "reward_range": optional(Rule("a list [low, high] of two numbers, low <= high",
                                  lambda v: isinstance(v, (list, tuple)) and len(v) == 2
                                  and all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v)
                                  and v[0] <= v[1])),  # goal envs: declared reward range (else probed)
    "max_episode_steps": optional(COUNT),  # truncate episodes here (TimeLimit); null: the env's own, else 1000
    "start_in_gripper": optional(UNIT),  # Fetch with a block: share of training episodes started with it held
}

ENV_KWARGS: dict[str, dict[str, Rule]] = {  # keyed by env id, so `env=gym env.id=...` is checked too
    "her_rl/BitFlip-v0": arg_rules(bitflip.BitFlipEnv.__init__),
    "her_rl/DeepSea-v0": arg_rules(deep_sea.DeepSeaEnv.__init__),
}


def _table_checker(task: str) -> Callable[[dict[str, Any]], None]:
    """push/drag ship their own kwargs check (her_rl.envs.table_settings.check_table_kwargs)."""
    def check(kwargs: dict[str, Any]) -> None:
        try:
            check_table_kwargs(task, **kwargs)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"env.kwargs: {exc}") from None
    return check


ENV_KWARG_CHECKERS: dict[str, Callable[[dict[str, Any]], None]] = {
    "her_rl/Push-v0": _table_checker("push"),
    "her_rl/Drag-v0": _table_checker("drag"),
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
    if env["id"] in ENV_KWARG_CHECKERS:
        ENV_KWARG_CHECKERS[env["id"]](env["kwargs"])


def check_values(cfg: dict[str, Any]) -> None:
    """Check a resolved config (plain containers): top-level keys, then the algo and env groups."""
    check_top(cfg)
    check_algo(cfg["algo"])
    check_env(cfg["env"])


def _config_defaults() -> dict[str, Any]:
    """The ``video`` settings of conf/config.yaml: written there once, for her-run and for Python callers."""
    text = (Path(__file__).parents[1] / "conf" / "config.yaml").read_text(encoding="utf-8")
    return dict(yaml.safe_load(text)["video"])


VIDEO_DEFAULTS: dict[str, Any] = _config_defaults()
def _given(overrides: list[str] | None) -> list[str]:
    """The ``video`` keys among command-line overrides (``video``, ``video.episodes``, ...)."""
    keys = [o.lstrip("+~").split("=", 1)[0] for o in overrides or []]
    return [k for k in keys if k.split(".")[0] == "video"]


def options(current: Mapping[str, Any], overrides: list[str] | None) -> dict[str, Any]:
    """The one check of the ``video`` keys, for training and ``load=`` alike: the table this command
    records with (:data:`VIDEO_DEFAULTS` under what was given; the bare bool ``video=true`` of a Python
    caller's dict counts as ``video.enabled``). Refused in one line: video keys on a training command
    (videos are recorded from a saved run), and ``video.episodes=5`` alone, which would record nothing.
    Values are checked by the schema."""
    value = current.get("video")
    table = {**VIDEO_DEFAULTS, **({"enabled": value} if isinstance(value, bool) else dict(value or {}))}
    given = _given(overrides)
    if not current.get("load") and (given or table["enabled"] is True):
        raise ConfigError("video keys need load=RUN_DIR: videos are recorded from a trained run "
                          "(her-run load=RUN_DIR video=true)")
    if given and table["enabled"] is False and not {"video", "video.enabled"} & set(given):
        raise ConfigError(f"{given[0]} is given but video is off: add video=true to record")
    return table


def resolved(cfg: DictConfig | dict[str, Any], overrides: list[str] | None = None) -> dict[str, Any]:
    """The config as plain containers with every interpolation resolved; ``overrides``: the command's,
    to name the ``~KEY`` that deleted a key an interpolation needs."""
    if isinstance(cfg, dict):
        return cfg
    try:
        return OmegaConf.to_container(cfg, resolve=True)
    except OmegaConfBaseException as exc:
        needed = re.match(r"Interpolation key '([^']+)' not found", str(getattr(exc, "msg", "")))
        line = deleted_by(needed.group(1), overrides) if needed else None
        if line:
            raise ConfigError(f"{exc.full_key} needs {needed.group(1)}, which was deleted with {line}") from None
        raise ConfigError(f"cannot resolve the config: {one_line(exc)}") from None


def by_size(size: Any, table: dict[Any, Any]) -> Any:
    """``${by_size:${n},{30: a, 4096: b}}``: the value of the smallest bound >= ``size`` (a setting
    chosen by the size of the task, as the bit-flip tuned file chooses its network by n).

    A size past every bound takes the last value and one that is not an integer the first: the size's
    own rule (``n`` in her_rl/envs/bitflip.py) then refuses it with its one line."""
    bounds = sorted(table, key=int)
    try:
        size = int(size)
    except (TypeError, ValueError):
        return table[bounds[0]]
    return next((table[b] for b in bounds if size <= int(b)), table[bounds[-1]])


def check_device(name: str) -> None:
    import torch  # lazy: her-run imports this module at its start, before torch

    if name == "cuda" and torch.version.cuda is None:
        raise ConfigError(f"device=cuda, but the installed torch {torch.__version__} is a CPU build without CUDA: "
                          "install a CUDA build of torch (docs: GPU training), or use device=cpu or device=auto")
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"device=cuda, but torch {torch.__version__} (CUDA {torch.version.cuda}) finds no CUDA device "
                          "(no GPU, or its driver is missing or too old); use device=cpu or device=auto")


def interpolations(cfg: DictConfig | dict[str, Any]) -> dict[str, str]:
    """``{key: "${other}"}`` for values set by interpolation, to name where a bad value came from."""
    if isinstance(cfg, dict):
        return {}
    found: dict[str, str] = {}

    def walk(node: Any, prefix: str) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                walk(value, f"{prefix}{key}.")
        elif isinstance(node, str) and "${" in node:
            found[prefix[:-1]] = node
    walk(OmegaConf.to_container(cfg, resolve=False), "")
    return found


def check(data: dict[str, Any], sources: dict[str, str] | None = None) -> EnvSpaces:
    """Check a resolved config that holds every key the run needs (``sources``: the interpolation each
    value came from, to name it in an error); raise ConfigError on the first invalid value; return the
    env's probed spaces."""
    from her_rl.rl.memory import check_env_copies  # lazy: torch (her-run imports this module at its start)

    try:
        check_values(data)
    except RuleError as exc:
        source = (sources or {}).get(exc.key)
        raise (exc.from_source(source) if source else exc) from None
    check_device(data["device"])
    env_spaces = probe_env(data["env"])
    check_pairing(data["algo"]["name"], data["env"]["name"], data["env"]["id"], env_spaces)
    # training and load= both evaluate in this many copies; the learner sizes its own training copies
    episodes = int(data["eval"]["episodes"])
    check_env_copies(episodes, env_spaces.observation_space, env_spaces.action_space,
                     f"a batched env of {episodes:,} evaluation copies of {data['env']['id']}", "eval.episodes")
    show_held_warnings()
    return env_spaces


def validate(cfg: DictConfig | dict[str, Any], overrides: list[str] | None = None, required: bool = True) -> EnvSpaces:
    """Raise ConfigError on the first missing key (``overrides``: the command's, to name a ``~KEY``
    that deleted one; ``required=False``: checked already) or invalid value; return the env's probed
    spaces. A saved config may predate a hyperparameter: only the run's own keys are required."""
    data = resolved(cfg, overrides)
    if required:
        check_required(data, overrides, learner=False)
    return check(data, interpolations(cfg))
