"""A sweep (``her-run -m``), checked before Hydra makes its folder or starts its launcher: the sweep
folder, the launcher's package (and SLURM for submitit_slurm), and each value of each swept key.
"""

from __future__ import annotations

import importlib
import shutil

from omegaconf import DictConfig, OmegaConf

from her_rl.errors import ConfigError, one_line
from her_rl.folder import rundir
from her_rl.rules import check_path

MULTIRUN_CHECKS = 64  # at most this many sweep variants are composed and checked up front
# the package each launcher plugin imports when it starts
LAUNCHER_PACKAGES = {"JoblibLauncher": "joblib", "SlurmLauncher": "submitit", "LocalLauncher": "submitit",
                     "RayLauncher": "ray"}


def check_sweep(cfg: DictConfig) -> None:
    """The sweep folder (creatable, writable, new or a sweep's) and the launcher (its package, and
    SLURM for submitit_slurm) before Hydra makes the folder and starts the launcher."""
    sweep = rundir.folder_path(OmegaConf.select(cfg, "hydra.sweep.dir"), "hydra.sweep.dir")
    check_path("hydra.sweep.dir", sweep)
    rundir.folder_path(OmegaConf.to_container(cfg.hydra.sweep)["subdir"], "hydra.sweep.subdir")  # raw: job-time value
    rundir.check_folder(sweep, "sweep folder", rundir.is_sweep_folder)
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


__all__ = ["check_sweep", "sweep_variants"]
