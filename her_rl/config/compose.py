"""The config ``her-run`` composes from a command's overrides, and the one line for what Hydra refuses.

Before Hydra composes, :func:`check_group_names` refuses an override that would make Hydra run code
and an unknown algo, env or tuned name (sweeps included), listing the choices; :func:`hydra_message`
turns an error Hydra or OmegaConf raised while composing into one line. :func:`composed` is Hydra's
composition, which a run's gate (:mod:`her_rl.run.plan`) and :func:`compose` (scripts, tests) share.

:func:`choose` fills in what the command leaves to the env: a command that names no ``algo`` gets the
learner its env's spaces call for (:func:`her_rl.config.registry.learner_for`), and an env of a
third-party family (:func:`her_rl.envs.families.settings_names`) gets its measured tuned file whatever
its group is called (``env=fetch_push`` as ``env=gym env.id=FetchPush-v4``), unless its group has one
of its own. Both become plain overrides (``algo=her_crossq``, ``tuned=her_crossq_gym``) put before the
command's, so the run folder, ``config.yaml`` and a sweep's jobs see them as if typed; a key the command
sets still wins over the tuned file. An ``experiment``, ``load`` or ``resume=true`` is left alone.
"""

from __future__ import annotations

import copy
import difflib
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path

from hydra import compose as hydra_compose, initialize_config_module
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import MissingConfigException, OverrideParseException
from omegaconf import DictConfig, OmegaConf, open_dict

from her_rl.config import schema
from her_rl.config.overrides import check_overrides, one_value_each, sweep_values, sweep_variants
from her_rl.config.registry import ALGOS, accepted_params, algo_info, check_env_name, learner_for
from her_rl.envs.custom import import_given
from her_rl.envs.families import settings_names
from her_rl.envs.probe import probe_env
from her_rl.config.video import expand_overrides
from her_rl.errors import ConfigError, one_line, outside

_EXTRAS = {"hydra/launcher/ray": "ray", "hydra/launcher/joblib": "launchers", "hydra/sweeper/optuna": "tune",
           "hydra/launcher/submitit_local": "launchers", "hydra/launcher/submitit_slurm": "launchers"}


TUNED = Path(__file__).parents[1] / "conf" / "tuned"


def compose(overrides: list[str] | None = None, hydra: bool = False) -> DictConfig:
    """The config ``her-run`` would see for these overrides (``hydra``: with its ``hydra`` node), with
    what :func:`choose` adds, for Python callers (scripts, tests); an override that would make Hydra run
    code is refused first. A run's own composition is its gate's (:mod:`her_rl.run.plan`)."""
    overrides = list(overrides or [])
    check_overrides(overrides)  # the command line's refusals, for Python callers too
    return composed(choose(overrides).apply(overrides), hydra)


_HYDRA = threading.RLock()
_LAST: list = []  # (overrides, hydra, config) of the last composition: the choice's is the check's when it adds nothing


def composed(overrides: list[str], hydra: bool = False) -> DictConfig:
    """Hydra's composition of these overrides as they stand (checked and chosen already)."""
    key = (tuple(expand_overrides(overrides)), hydra, os.getcwd())  # the hydra node holds the working folder
    with _HYDRA:  # Hydra's global state takes one composition at a time (her_rl.train from several threads)
        if not _LAST or _LAST[0] != key:
            with initialize_config_module(config_module="her_rl.conf", version_base="1.3"):
                _LAST[:] = key, hydra_compose(config_name="config", overrides=list(key[0]), return_hydra_config=hydra)
        return copy.deepcopy(_LAST[1])


@dataclass(frozen=True)
class Choice:
    """What :func:`choose` adds to a command, and the line that says so at the start of a run."""

    added: tuple[str, ...] = ()
    line: str | None = None

    def apply(self, overrides: list[str]) -> list[str]:
        return [*self.added, *overrides]


def _given(overrides: list[str]) -> dict[str, str]:
    """``{key: value}`` of the command's overrides (a deletion as ``~``; a sweep's values as written)."""
    given = {}
    for override in OverridesParser.create().parse_overrides(list(overrides)):
        given[override.key_or_group] = "~" if override.is_delete() else str(override.value())
    return given


def tuned_file(algo: str, group: str, env_id: str) -> str | None:
    """The tuned file a run takes when the command names none: the group's own (``<algo>_<group>``),
    else, for an env of a family, its kind's or the ``gym`` file (:func:`settings_names`)."""
    own = f"{algo}_{group}"
    if (TUNED / f"{own}.yaml").is_file() and (group != "gym" or not settings_names(env_id)):
        return own
    return next((f"{algo}_{name}" for name in settings_names(env_id) if (TUNED / f"{algo}_{name}.yaml").is_file()),
                None)


def tuned_keys(name: str) -> dict[str, object]:
    """The dotted keys a tuned file sets and their values (its ``@package`` line says where they go)."""
    text = (TUNED / f"{name}.yaml").read_text()
    package = re.search(r"^# @package (\S+)", text, re.M)
    prefix = "" if package and package.group(1) == "_global_" else "algo."
    flat: dict[str, object] = {}

    def walk(node, at: str) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key != "defaults":
                    walk(value, f"{at}{key}.")
        else:
            flat[at[:-1]] = node
    walk(OmegaConf.to_container(OmegaConf.create(text)), prefix)
    return flat


def compose_command(overrides: list[str], multirun: bool = False) -> tuple[list[DictConfig], Choice]:
    """A command's config as her-run composes it (with Hydra's node; a sweep: one per variant): the
    modules its ``env.id=module:Env-v0`` values name imported (they register the envs chosen for), and
    what :func:`choose` adds; its overrides were refused or let through (:func:`check_group_names`)."""
    import_given(one_value_each(overrides))
    choice = choose(overrides, multirun)
    overrides = choice.apply(overrides)
    return [composed(v, hydra=True) for v in (sweep_variants(overrides) if multirun else [overrides])], choice


def without_hydra(cfg: DictConfig) -> DictConfig:
    """The run's config: a composed one without Hydra's node."""
    task = cfg.copy()
    with open_dict(task):
        del task["hydra"]
    return task


_CHOSEN: dict[tuple[str, ...], Choice] = {}  # per process: a run composes its command once to choose, not per check


def choose(overrides: list[str], multirun: bool = False) -> Choice:
    """The learner and tuned file a command leaves to its env (see the module's docstring); the env is
    built once to read its spaces (the config check reuses that probe). A config that cannot be
    composed or resolved here adds nothing: the checks that follow tell what is wrong with it. The
    command with what was added is known to need nothing more, so composing it does not choose again.
    ``multirun``: a sweep's variants must agree (Hydra composes every job from the same command line)."""
    if multirun:
        choices = {c.added: c for c in map(choose, sweep_variants(overrides))}
        if len(choices) > 1:
            told = "; ".join(" ".join(added) or "the defaults" for added in choices)
            raise ConfigError(f"the sweep's envs call for different learners or tuned files ({told}): give algo= "
                              "(and tuned=) on the command line")
        return next(iter(choices.values()))
    key = tuple(overrides)
    if key not in _CHOSEN:
        if len(_CHOSEN) >= 64:
            _CHOSEN.clear()
        choice = _CHOSEN[key] = _choose(overrides)
        if choice.added:
            _CHOSEN[tuple(choice.apply(overrides))] = Choice()
    return _CHOSEN[key]


def _choose(overrides: list[str]) -> Choice:
    given = _given(overrides)
    if {"experiment", "load"} & set(given) or given.get("resume") == "True" or {"algo", "tuned"} <= set(given):
        return Choice()
    try:
        cfg = composed(list(overrides), hydra=True)
        env = OmegaConf.to_container(cfg.env, resolve=True, throw_on_missing=True)
        group, algo = cfg.hydra.runtime.choices.env, cfg.hydra.runtime.choices.algo
        env_id = str(env["id"])
        spaces = probe_env(env) if "algo" not in given else None
    except Exception:  # noqa: BLE001  (Hydra's, OmegaConf's and the env's errors: told by the checks after this)
        return Choice()
    added, said, default = [], [], algo
    if spaces is not None:
        algo, why = learner_for(spaces)
        if algo != default:
            added.append(f"algo={algo}")
        if algo != default or group == "gym":  # a built-in env with the default learner: nothing to say
            said.append(f"algo={algo}, chosen for env {env_id}: {why} (algo= picks another)")
    if "tuned" not in given:
        tuned = tuned_file(algo, group, env_id)
        if tuned is not None and tuned != f"{algo}_{group}":
            added.append(f"tuned={tuned}")
        if tuned is not None and (said or tuned != f"{algo}_{group}"):
            keys = {k: v for k, v in tuned_keys(tuned).items() if k not in given}
            shown = ", ".join(f"{k}={v}" for k, v in keys.items())
            said.append(f"tuned file {tuned} sets {shown or 'nothing the command did not set'} "
                        "(a key on the command line wins; ~tuned runs without the file)")
    return Choice(tuple(added), "; ".join(said) or None)


def _check_tuned_name(name: str) -> None:
    """``tuned`` is an optional group (absent for most algo/env pairs), so Hydra would silently skip a
    misspelt explicit choice: refuse it here instead."""
    if name == "None":
        raise ConfigError("tuned=null is not accepted; pass ~tuned to run without the tuned file")
    names = sorted(p.stem for p in (Path(__file__).parents[1] / "conf" / "tuned").glob("*.yaml"))
    if name not in names:
        raise ConfigError(f"unknown tuned file '{name}'; valid choices: {', '.join(names)}")


def check_group_names(overrides: list[str]) -> None:
    """Reject an override that would make Hydra run code (:func:`her_rl.config.overrides.check_overrides`), then
    unknown algo/env/tuned names with one line listing the choices, before Hydra composes (sweeps
    included: ``algo=ppo,reinforce``, ``env=choice(cartpole,nope)``)."""
    check_overrides(overrides)
    for override in OverridesParser.create().parse_overrides(list(overrides)):
        if override.is_delete() and override.key_or_group in schema.GROUPS:  # Hydra would fail on ${algo}_${env}
            raise schema.missing(override.key_or_group, [override.input_line])
        known = {"algo": algo_info, "env": check_env_name, "tuned": _check_tuned_name}.get(override.key_or_group)
        if known is None or override.is_delete():
            continue
        for name in sweep_values(override):
            known(str(name))


def _malformed(overrides: list[str]) -> str | None:
    parser = OverridesParser.create()
    for override in overrides:
        try:
            parser.parse_overrides([override])
        except Exception:
            return override
    return None


def unknown_key(key: str, overrides: list[str] = ()) -> str:
    """One line for a key the config does not have, with what works instead: the keys beside it (the
    nearest first), ``+env.kwargs.KEY`` for a new keyword of the env, the named learner's keys for ``algo.``."""
    parent, _, leaf = key.rpartition(".")
    if parent == "env.kwargs":
        return f"unknown config key '{key}': +{key}=VALUE passes a new keyword argument to the env"
    algo = next((o.split("=", 1)[1] for o in overrides if o.startswith("algo=")), None)
    if parent == "algo" and algo in ALGOS:
        table = dict.fromkeys(accepted_params(algo))
        near = difflib.get_close_matches(leaf, list(table), n=1, cutoff=0.8)
        hint = f"did you mean 'algo.{near[0]}'? " if near else ""
        return f"unknown config key '{key}': algo '{algo}' has no such key; {hint}its keys: {', '.join(sorted(table))}"
    if parent == "algo":
        return (f"unknown config key '{key}': her-run --cfg job --package algo lists the learner's keys "
                "(algo=NAME picks another learner)")
    table = {"": {**dict.fromkeys(schema.GROUPS), **schema.TOP}, "env": schema.ENV_GROUP}.get(parent)
    if table is None:
        table = schema.TOP.get(parent) if isinstance(schema.TOP.get(parent), dict) else None
    if table is None:
        return f"unknown config key '{key}' (her-run --cfg job lists the keys)"
    near = difflib.get_close_matches(leaf, list(table), n=1, cutoff=0.8)
    hint = f"did you mean '{parent + '.' if parent else ''}{near[0]}'? " if near else ""
    return f"unknown config key '{key}': {hint}{'accepted' if parent else 'top-level keys'}: {', '.join(table)}"


def hydra_message(exc: BaseException, overrides: list[str]) -> str:
    """One line for an error Hydra or OmegaConf raised while composing the config."""
    text = str(exc)
    if isinstance(exc, OverrideParseException):
        bad = _malformed(overrides)
        # Hydra's words and the override are the command line's: a screen-wide line cuts them first
        return (f"malformed override {outside(repr(bad))}: " if bad else "malformed override: ") \
            + outside(one_line(text.splitlines()[0])) + " (override grammar: https://hydra.cc/docs/advanced/override_grammar/basic)"
    found = re.match(r"Could not override '([^']+)'", text)
    if found:
        key, cause = found.group(1), str(exc.__cause__ or "")
        if "not in struct" in cause or "not in '" in cause:
            return unknown_key(key, overrides)
        return f"cannot set '{key}': {one_line(cause.splitlines()[0] if cause else text)}"
    if isinstance(exc, MissingConfigException):
        lines = [line.strip() for line in text.split("Config search path")[0].splitlines() if line.strip()]
        head, options = lines[0], [line for line in lines[1:] if not line.startswith("Available")]
        extra = next((extra for path, extra in _EXTRAS.items() if f"'{path}'" in head), None)
        hint = f" (it comes with her-rl's {extra} extra: pip install -e \".[{extra}]\")" if extra else ""
        return head + (f"; available: {', '.join(options)}" if options else "") + hint
    return one_line(text.split("Config search path")[0])


__all__ = ["Choice", "check_group_names", "choose", "compose", "compose_command", "composed", "hydra_message",
           "tuned_file", "tuned_keys", "without_hydra"]
