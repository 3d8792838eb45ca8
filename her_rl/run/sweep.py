"""A sweep (``her-run -m``), checked before Hydra makes its folder or starts its launcher: the sweep
folder, the launcher's package (and SLURM for submitit_slurm), and each value of each swept key; what
each job returns to the sweeper (:func:`objective`) and what the Optuna sweeper needs added
(:func:`optuna_settings`).
"""

from __future__ import annotations

import importlib
import shutil

from omegaconf import DictConfig, OmegaConf

from her_rl.errors import ConfigError, one_line
from her_rl.folder import rundir
from her_rl.rules import COUNT, SEED, Rule, check_path, choice, integer, optional, real

MULTIRUN_CHECKS = 64  # at most this many sweep variants are composed and checked up front
# the package each launcher plugin imports when it starts
LAUNCHER_PACKAGES = {"JoblibLauncher": "joblib", "SlurmLauncher": "submitit", "LocalLauncher": "submitit",
                     "RayLauncher": "ray"}
_DIRECTION = "hydra.sweeper.direction"
_ABSENT = object()
_SUBMITIT = {"timeout_min": COUNT, "cpus_per_task": optional(COUNT), "gpus_per_node": optional(integer(0)),
             "tasks_per_node": COUNT, "mem_gb": optional(real(0, lo_open=True)), "nodes": COUNT,
             "max_num_timeout": integer(0), "array_parallelism": COUNT, "signal_delay_s": integer(0)}
# what her-run passes on to each plugin, checked so that a bad value is one line before the sweep starts
SETTING_RULES: dict[str, dict[str, Rule]] = {
    "JoblibLauncher": {
        "n_jobs": Rule("a non-zero integer (-1: every core)", lambda v: isinstance(v, int) and not isinstance(v, bool)
                       and v != 0),
        "backend": optional(choice("loky", "multiprocessing", "threading", "sequential")),
        "prefer": optional(choice("processes", "threads")), "verbose": integer(0),
        "batch_size": Rule("auto or an integer >= 1", lambda v: v == "auto" or COUNT.ok(v))},
    "SlurmLauncher": _SUBMITIT, "LocalLauncher": _SUBMITIT,
    "RayLauncher": {"ray.init.num_cpus": optional(COUNT), "ray.init.num_gpus": optional(integer(0)),
                    "ray.remote.num_cpus": optional(real(0, lo_open=True)), "ray.remote.num_gpus": optional(real(0))},
    "BasicSweeper": {"max_batch_size": optional(COUNT)},
    "OptunaSweeper": {"n_trials": COUNT, "n_jobs": COUNT, "max_failure_rate": real(0, 1),
                      "sampler.seed": optional(SEED), "sampler.n_startup_trials": integer(0)},
}


def check_sweep(cfg: DictConfig) -> None:
    """The sweep folder (creatable, writable, new or a sweep's) and the launcher (its package, and
    SLURM for submitit_slurm) before Hydra makes the folder and starts the launcher."""
    sweep = rundir.folder_path(OmegaConf.select(cfg, "hydra.sweep.dir"), "hydra.sweep.dir")
    check_path("hydra.sweep.dir", sweep)
    rundir.folder_path(OmegaConf.to_container(cfg.hydra.sweep)["subdir"], "hydra.sweep.subdir")  # raw: job-time value
    rundir.check_folder(sweep, "sweep folder", rundir.is_sweep_folder)
    for job in sorted(sweep.glob(f"*/{rundir.LOCK}")) if sweep.is_dir() else ():  # another sweep still running here
        busy = rundir.RunLock.live_holder(job.parent)
        if busy is not None:
            raise ConfigError(f"sweep folder {sweep} is in use by a live sweep: {busy}")
    check_settings(cfg)
    name, target = cfg.hydra.runtime.choices.get("hydra/launcher"), str(cfg.hydra.launcher.get("_target_", ""))
    package = LAUNCHER_PACKAGES.get(target.rsplit(".", 1)[-1])
    try:
        if package:
            importlib.import_module(package)
    except ImportError as exc:
        raise ConfigError(f"hydra/launcher={name} cannot start: {one_line(exc)} (pip install {package})") from None
    missing = [cmd for cmd in ("sbatch", "srun") if shutil.which(cmd) is None]
    if target.endswith(".SlurmLauncher") and missing:
        raise ConfigError(f"hydra/launcher={name} needs SLURM, but this machine has no {' or '.join(missing)} "
                          "command: start the sweep on a SLURM login node, or use hydra/launcher=submitit_local "
                          "or joblib here")


def check_settings(cfg: DictConfig) -> None:
    """The launcher's and the sweeper's settings that :data:`SETTING_RULES` knows, one line for a bad one."""
    for part in ("launcher", "sweeper"):
        node = cfg.hydra[part]
        for key, rule in SETTING_RULES.get(str(node.get("_target_", "")).rsplit(".", 1)[-1], {}).items():
            value = OmegaConf.select(node, key, default=_ABSENT)
            if value is not _ABSENT:  # a key this launcher's config does not have is not passed on
                rule.check(f"hydra.{part}.{key}", value)


def sweep_variants(overrides: list[str]) -> list[list[str]]:
    """Each value of each swept key once (other sweeps at their first value): every value a sweep
    would use is checked without composing the whole product."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

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


def objective(results: dict, kind: str = "final_eval") -> float | None:
    """The number a sweeper (Optuna) maximises; ``load=`` evaluations return None."""
    if "env_steps" not in results:
        return None
    if kind == "steps_to_solve":
        solved = results.get("solved_at_env_steps")
        return -float(solved) if solved is not None else -2.0 * float(results["env_steps"])
    value = results.get("eval_success_rate", results.get("eval_return"))
    return float(value) if value is not None else float("nan")


def optuna_settings(argv: list[str]) -> list[str]:
    """The command with what the Optuna sweeper needs added when it is picked: the direction
    ``maximize`` (Optuna minimises by default, and every objective her-run returns is to be
    maximised; another direction is refused), and trial folders named by trial number
    (``trial-<n>``), since Optuna may sample the same setting twice and a folder holds one run."""
    keys = {a.lstrip("+~").split("=", 1)[0]: a.partition("=")[2] for a in argv if "=" in a}
    if keys.get("hydra/sweeper") != "optuna":
        return list(argv)
    if _DIRECTION in keys and keys[_DIRECTION].strip("'\"[] ").lower() != "maximize":
        raise ConfigError(f"{_DIRECTION}={keys[_DIRECTION]} is not accepted: her-run's objectives are to be "
                          "maximised (objective=final_eval: the last eval success rate or return; "
                          "steps_to_solve: minus the env steps to solve); leave it out or pass maximize")
    added = [f"{_DIRECTION}=maximize"] if _DIRECTION not in keys else []
    added += ["hydra.sweep.subdir=trial-${hydra.job.num}"] if "hydra.sweep.subdir" not in keys else []
    at = next(i for i, a in enumerate(argv) if a.lstrip("+~").startswith("hydra/sweeper=")) + 1
    return [*argv[:at], *added, *argv[at:]]  # next to the sweeper's override: after a flag's value it would not parse


__all__ = ["SETTING_RULES", "check_settings", "check_sweep", "objective", "optuna_settings", "sweep_variants"]
