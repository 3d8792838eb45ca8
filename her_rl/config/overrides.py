"""Overrides that would make Hydra run code, refused before any config is composed.

Hydra calls what the config names: hydra.callbacks, the launcher and the sweeper (and anything with a
_target_ inside them), the handler classes of hydra.job_logging, submitit's `setup` shell lines; and
it reads configs from any hydra.searchpath. So of Hydra's settings a command may change only those of
``HYDRA_SETTINGS`` (documented in docs/safety.md); every other key is the run's own config, which
names code only through algo._target_, checked against the registry.
"""

from __future__ import annotations

import re
from pathlib import Path

from hydra.core.override_parser.overrides_parser import OverridesParser

from her_rl.errors import ConfigError

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

__all__ = ["single_job_dir", "HYDRA_GROUPS", "HYDRA_DIRS", "HYDRA_SETTINGS", "check_overrides", "one_value_each",
           "sweep_values", "sweep_variants"]
