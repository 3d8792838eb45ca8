"""From a command's overrides to the config ``her-run`` composes, and one line for what Hydra refuses.

Before Hydra composes, :func:`check_overrides` refuses an override that would make Hydra run code:
Hydra calls what its config names (hydra.callbacks, the launcher and the sweeper and any ``_target_``
inside them, the handler classes of hydra.job_logging, submitit's ``setup`` shell lines) and reads
configs from any hydra.searchpath, so of Hydra's settings a command may change only those of
``HYDRA_SETTINGS`` (docs/safety.md); every other key is the run's own config, which names code only
through ``algo._target_``, checked against the registry. :func:`check_group_names` refuses an unknown
algo, env or tuned name (sweeps included), listing the choices; :func:`hydra_message` turns an error
Hydra or OmegaConf raised while composing into one line. :func:`composed` is Hydra's composition,
which a run's gate (:mod:`her_rl.run.plan`) and :func:`compose` (scripts, tests) share.

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
from hydra.errors import HydraException, MissingConfigException, OverrideParseException
from omegaconf import DictConfig, OmegaConf, open_dict
from omegaconf.errors import OmegaConfBaseException

from her_rl.config import checks
from her_rl.config.registry import ALGOS, accepted_params, algo_info, check_env_name, learner_for
from her_rl.envs.families import import_given, settings_names
from her_rl.envs.probe import probe_env
from her_rl.errors import ConfigError, one_line, outside


HYDRA_GROUPS = ("hydra/launcher", "hydra/sweeper", "hydra/sweeper/sampler", "hydra/job_logging",
                "hydra/hydra_logging", "hydra/help", "hydra/hydra_help")
HYDRA_DIRS = ("run.dir", "sweep.dir", "sweep.subdir")
HYDRA_SETTINGS = {
    "": ("verbose",),
    "launcher.": ("n_jobs", "backend", "prefer", "verbose", "pre_dispatch", "batch_size",  # joblib
                  "timeout_min", "cpus_per_task", "gpus_per_node", "tasks_per_node", "mem_gb", "nodes",  # submitit
                  "name", "stderr_to_stdout", "partition", "qos", "comment", "constraint", "exclude", "gres",
                  "cpus_per_gpu", "gpus_per_task", "mem_per_gpu", "mem_per_cpu", "account", "signal_delay_s",
                  "max_num_timeout", "array_parallelism",
                  "ray.init.num_cpus", "ray.init.num_gpus", "ray.init.address", "ray.remote.num_cpus",  # ray
                  "ray.remote.num_gpus"),
    "sweeper.": ("max_batch_size", "n_trials", "n_jobs", "direction", "study_name", "max_failure_rate",
                 "sampler.seed", "sampler.n_startup_trials"),
}
_ALLOWED = {*HYDRA_DIRS, *(prefix + key for prefix, keys in HYDRA_SETTINGS.items() for key in keys)}
_PARAMS = "sweeper.params."  # hydra.sweeper.params.KEY=VALUES: checked as the override KEY=VALUES
_INSTANTIATE = re.compile(r"(?<![A-Za-z0-9])_(target|args|partial|recursive|convert)_(?![A-Za-z0-9])")


_SHORT = re.compile(r"^(\+{0,2})video=(true|false)$", re.IGNORECASE)


def expand_overrides(overrides: list[str]) -> list[str]:
    """``video=true`` / ``video=false`` -> ``video.enabled=...``; every other override unchanged."""
    out = []
    for override in overrides:
        short = _SHORT.match(override)
        out.append(f"{short.group(1)}video.enabled={short.group(2).lower()}" if short else override)
    return out


def _check_key(key: str, package: str | None, line: str, value: str) -> None:
    if package is not None:
        raise ConfigError(f"{line!r} is not accepted: a config group cannot be put at another place (@{package})")
    if key.startswith(("hydra.callbacks.", "hydra/callbacks")) or key == "hydra.callbacks":
        raise ConfigError(f"{line!r} is not accepted: hydra.callbacks are her-rl's own (swept_keys, summary) "
                          "and cannot be changed from the command line")
    if _INSTANTIATE.search(line) and key != "algo._target_":  # algo._target_: the registry checks it
        raise ConfigError(f"{line!r} is not accepted: an override cannot name code for Hydra to call "
                          "(_target_ and the other instantiation keys); algorithms are picked with algo=NAME")
    if key.startswith("hydra/"):
        if key not in HYDRA_GROUPS:
            raise ConfigError(f"{line!r} is not accepted: of Hydra's config groups a command may pick "
                              f"{', '.join(HYDRA_GROUPS)}")
        return
    if key != "hydra" and not key.startswith("hydra."):
        return
    sub = key[len("hydra."):]
    if sub.startswith(_PARAMS) and len(sub) > len(_PARAMS):
        return _check_key(sub[len(_PARAMS):], None, line, value)
    if sub == "launcher.timeout":
        raise ConfigError(f"{line!r} is not accepted: joblib's timeout ends the whole sweep with its first job past "
                          "it; budget.wall_time_s=SECONDS ends each job at that time, with its checkpoint and results")
    if sub not in _ALLOWED:
        raise ConfigError(f"{line!r} is not accepted: of Hydra's settings a command may change hydra.run.dir, "
                          "hydra.sweep.dir, hydra.sweep.subdir and the documented launcher and sweeper settings "
                          "(docs/safety.md)")
    if sub not in HYDRA_DIRS and "${" in value:  # an interpolation could build a config Hydra instantiates
        raise ConfigError(f"{line!r} is not accepted: hydra.{sub} takes a value, not an interpolation")


MULTIRUN_CHECKS = 64  # at most this many sweep variants are composed and checked up front
MAX_NESTING = 32  # brackets and braces in one value; Hydra's parser and OmegaConf recurse per level
_GROUP_KEYS = ("algo", "env", "tuned", "experiment")


def _nesting(text: str) -> int:
    """How deep a value's brackets and braces go, outside quotes."""
    depth = deepest = 0
    quote, escaped = None, False
    for ch in text:
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "[{(":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]})":
            depth -= 1
    return deepest


def _parse(parser, line: str):
    """``line`` parsed, or None if malformed (Hydra reports that); a value no config needs, nested
    past ``MAX_NESTING`` or a number past Python's 4,300 digits, is refused here in one line."""
    key = line.lstrip("+~").split("=", 1)[0]
    if _nesting(line.partition("=")[2]) > MAX_NESTING:
        raise ConfigError(f"{key}: a value nested more than {MAX_NESTING} levels deep (brackets, braces) is not "
                          "accepted")
    try:
        (override,) = parser.parse_overrides([line])
    except RecursionError:
        raise ConfigError(f"{key}: the value is nested too deeply to read") from None
    except ValueError as exc:
        if "integer string conversion" not in str(exc):
            return None
        raise ConfigError(f"{key}: a number of more than 4,300 digits is not accepted") from None
    except Exception:  # noqa: BLE001  (malformed: Hydra reports it before composing anything)
        return None
    return override


def _check_group_values(override, line: str) -> None:
    """A config group's option is a file name of that group: ``hydra/help=../../x`` would read another."""
    key = override.key_or_group
    if override.is_delete() or ("/" not in key and key not in _GROUP_KEYS):
        return
    try:
        values = sweep_values(override)
    except Exception:  # noqa: BLE001  (interval sweeps of optimiser plugins: no names)
        return
    for value in values:
        if any(c in str(value) for c in "/\\") or str(value).startswith("."):
            raise ConfigError(f"{line!r} is not accepted: {key} takes the name of one of its options, not a path")


def check_overrides(overrides: list[str]) -> None:
    """Refuse, before Hydra composes or instantiates anything, an override that would make Hydra
    call code the command names or read configs from elsewhere (see ``HYDRA_SETTINGS``), and a
    value no config needs that would crash Hydra's parser (see ``_parse``)."""
    parser = OverridesParser.create()
    for line in overrides:
        override = _parse(parser, line)
        if override is None:
            continue
        key = override.key_or_group
        if override.is_delete() and (key == "hydra" or key.startswith(("hydra.", "hydra/"))):
            raise ConfigError(f"{line!r} is not accepted: Hydra's settings may be changed, not deleted")
        _check_key(key, override.package, line, line.partition("=")[2])
        _check_group_values(override, line)


def sweep_values(override) -> list:
    """The values a parsed override gives its jobs, unescaped. Hydra hands each job a sweep value as
    override text, escaped (``env.id=mod:A-v0,mod:B-v0`` -> ``mod\\:A-v0``), so a value is that text
    parsed back (Hydra's grammar, ``.value()``), never the text itself."""
    if not override.is_sweep_override():
        return [override.value()]
    parser = OverridesParser.create()
    return [parser.parse_override(f"key={text}").value() for text in override.sweep_string_iterator()]


def sweep_variants(overrides: list[str]) -> list[list[str]]:
    """Each value of each swept key once (other sweeps at their first value): every value a sweep
    would use is checked without composing the whole product."""
    parsed = OverridesParser.create().parse_overrides(list(overrides))
    choices = []
    for o in parsed:
        if o.is_sweep_override():
            try:
                choices.append([f"{o.get_key_element()}={v}" for v in o.sweep_string_iterator()])
            except Exception:  # interval sweeps of optimiser plugins: left to the plugin
                choices.append([])
        else:
            choices.append([o.input_line])
    first = [c[0] for c in choices if c]
    variants = [first]
    for i, values in enumerate(choices):
        for value in values[1:]:
            variant = [c[0] for c in choices[:i] if c] + [value] + [c[0] for c in choices[i + 1:] if c]
            variants.append(variant)
    return variants[:MULTIRUN_CHECKS]


def one_value_each(overrides: list[str]) -> list[str]:
    """The overrides with every sweep split into one override per value, each as Hydra writes it for a
    job (escaped), so that code reading one job's overrides reads every value of the sweep."""
    out = []
    for override in OverridesParser.create().parse_overrides(list(overrides)):
        if not override.is_sweep_override():
            out.append(override.input_line)
            continue
        try:
            out += [f"{override.get_key_element()}={text}" for text in override.sweep_string_iterator()]
        except Exception:  # noqa: BLE001  (interval sweeps of optimiser plugins: no values to list)
            continue
    return out



def single_job_dir(overrides: list[str], out_dir: str | Path | None) -> str | Path | None:
    """``hydra.run.dir=D`` among the overrides is ``out_dir=D`` (both given: they must agree); any other
    ``hydra.`` key is refused, since ``her_rl.train`` runs one job without Hydra's launcher."""
    for override in overrides:
        key, _, value = override.partition("=")
        if key == "hydra.run.dir":
            if out_dir is not None and Path(out_dir) != Path(value):
                raise ConfigError(f"hydra.run.dir={value} and out_dir={out_dir} name two folders; give one")
            out_dir = value
        elif key.lstrip("+~").startswith("hydra.") or key.lstrip("+~").startswith("hydra/"):
            raise ConfigError(f"{override} is not accepted by her_rl.train, which runs one job in out_dir without "
                              "Hydra's launcher; use her-run for Hydra's settings")
    return out_dir


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
    """The dotted keys a tuned file sets and their values (its ``@package`` line says where they go),
    the keys of the tuned files its ``defaults`` list names first."""
    text = (TUNED / f"{name}.yaml").read_text()
    package = re.search(r"^# @package (\S+)", text, re.M)
    prefix = "" if package and package.group(1) == "_global_" else "algo."
    node = OmegaConf.to_container(OmegaConf.create(text))
    flat: dict[str, object] = {}
    for base in node.get("defaults", []):
        if base != "_self_":
            flat.update(tuned_keys(base))

    def walk(node, at: str) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key != "defaults":
                    walk(value, f"{at}{key}.")
        else:
            flat[at[:-1]] = node
    walk(node, prefix)
    return flat


def compose_command(overrides: list[str], multirun: bool = False) -> tuple[list[DictConfig], Choice]:
    """A command's config as her-run composes it (with Hydra's node; a sweep: one per variant): the
    modules its ``env.id=module:Env-v0`` values name imported (they register the envs chosen for), and
    what :func:`choose` adds; its overrides were refused or let through (:func:`check_group_names`)."""
    import_given(one_value_each(overrides))
    choice = choose(overrides, multirun)
    overrides = choice.apply(overrides)
    try:
        return [composed(v, hydra=True) for v in (sweep_variants(overrides) if multirun else [overrides])], choice
    except (HydraException, OmegaConfBaseException) as exc:  # told with the chosen learner, whose keys it names
        raise ConfigError(hydra_message(exc, overrides)) from None


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
    if "algo" not in given:  # the learner's own keys wait for the learner: the default one may not have them
        overrides = [o.input_line for o in OverridesParser.create().parse_overrides(list(overrides))
                     if not o.key_or_group.startswith("algo.")]
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
    """Reject an override that would make Hydra run code (:func:`her_rl.config.compose.check_overrides`), then
    unknown algo/env/tuned names with one line listing the choices, before Hydra composes (sweeps
    included: ``algo=ppo,reinforce``, ``env=choice(cartpole,nope)``)."""
    check_overrides(overrides)
    for override in OverridesParser.create().parse_overrides(list(overrides)):
        if override.is_delete() and override.key_or_group in checks.GROUPS:  # Hydra would fail on ${algo}_${env}
            raise checks.missing(override.key_or_group, [override.input_line])
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
    table = {"": {**dict.fromkeys(checks.GROUPS), **checks.TOP}, "env": checks.ENV_GROUP}.get(parent)
    if table is None:
        table = checks.TOP.get(parent) if isinstance(checks.TOP.get(parent), dict) else None
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


__all__ = ["check_group_names", "check_overrides", "Choice", "choose", "compose", "compose_command", "composed",
           "HYDRA_DIRS", "HYDRA_GROUPS", "hydra_message", "HYDRA_SETTINGS", "one_value_each", "single_job_dir",
           "sweep_values", "sweep_variants", "tuned_file", "tuned_keys", "without_hydra"]
