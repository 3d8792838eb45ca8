"""The gate: a command's overrides -> a checked :class:`Plan`, every check once, before anything is
built or written (it only reads).

:func:`gate` is the one way in, for ``her-run`` and ``her_rl.train`` alike, in this order:

1. overrides that would make Hydra run code or read configs from elsewhere are refused
   (:func:`her_rl.config.compose.check_overrides`), then unknown algo, env and tuned names;
2. the modules that ``env.id=module:Env-v0`` names are imported, the learner and tuned file the
   env calls for are chosen (:func:`her_rl.config.compose.choose`), and the config is composed;
3. every key the run needs is there (a ``~KEY`` that deleted one is named);
4. the run folder: creatable and writable; new, empty or a her-rl run's; not held by a live run;
   holding a checkpoint only if ``resume`` asks for one;
5. the checkpoint to resume, its saved config merged with this command's;
6. every value of the run's one config, then its env built once to read the spaces and the learner
   paired with them (:func:`her_rl.config.checks.check`).

Values come after the folder because on resume they are the merged config's, known only then.
:meth:`Plan.take_folder` then locks the folder for the run (:func:`her_rl.folder.rundir.take`).
``load=`` leaves the gate after step 3 (:class:`Evaluation`: the saved run's config is checked where
it is read); a sweep's variants are checked by :func:`gate_sweep` and each of its jobs, composed by
Hydra, by :func:`plan_run` from step 3.
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from her_rl.config import checks
from her_rl.config.checks import TOP, check, check_required, interpolations, resolved, validate
from her_rl.config.compose import (Choice, check_group_names, compose_command, hydra_message, single_job_dir,
                                   without_hydra)
from her_rl.config.saved import check_saved, merge
from her_rl.envs.families import import_given, split_id
from her_rl.envs.probe import EnvSpaces
from her_rl.errors import ConfigError, printable
from her_rl.folder import rundir
from her_rl.folder.rundir import CHECKPOINT, CONFIG, check_resume, read_saved_config, stamp
from her_rl.rules import check_path
from her_rl.run import requeue, trackers
from her_rl.run.signals import resume_command
from her_rl.run.sweep import check_sweep


@dataclass
class Plan:
    """A checked training run. ``config`` is the run's one config, resolved to plain containers
    (the saved one merged with this command's on resume); ``saved`` the checkpoint it resumes."""

    config: dict[str, Any]
    out: Path
    spaces: EnvSpaces
    overrides: list[str] | None
    saved: dict[str, Any] | None = None
    changes: dict[str, list] = field(default_factory=dict)
    ckpt_stamp: tuple[int, int] | None = None
    lock: rundir.RunLock | None = None
    fresh: bool = False  # the folder is new or empty: a start that fails to write leaves nothing there

    @property
    def checkpoint(self) -> Path:
        return self.out / CHECKPOINT

    @cached_property
    def yaml(self) -> str:
        """The config as ``config.yaml`` and TensorBoard's Text tab show it."""
        return OmegaConf.to_yaml(self.config)

    def take_folder(self, env_steps: int = 0) -> None:
        """The run folder locked and written for this start (or resume) at ``env_steps``
        (:func:`her_rl.folder.rundir.take`); it is this run's from here on."""
        self.lock = rundir.take(self.out, self.lock, self.ckpt_stamp, self.fresh, self.yaml,
                                "resume" if self.saved else "start", env_steps, self.overrides, self.changes)

    def release(self) -> None:
        if self.lock is not None:
            self.lock.release()


@dataclass(frozen=True)
class Evaluation:
    """``load=``: the command's config and overrides for the evaluation of a saved run, and the folder
    given for ``eval.json`` (None: next to the checkpoint). Its caller hands it to the saved side
    (:func:`her_rl.saved.evaluate.evaluate_checkpoint`), a :class:`Plan` to the training runner."""

    config: DictConfig | dict[str, Any]
    overrides: list[str] | None
    out: Path | None


def gate(overrides: list[str], out_dir: str | Path | None = None, command: bool = False) -> Plan | Evaluation:
    """The checked plan of the run these overrides ask for (see the module's docstring for the order).
    ``command``: her-run's, whose Hydra settings are accepted and whose default folder is
    ``hydra.run.dir``; else her_rl.train's, which runs one job in ``out_dir`` without Hydra's launcher."""
    overrides = list(overrides)
    with _one_line(overrides):
        check_group_names(overrides)  # 1: first, so that a Python caller is refused as her-run refuses
        if not command:
            out_dir = single_job_dir(overrides, out_dir)  # hydra.run.dir is out_dir; other Hydra keys refused
            overrides = [o for o in overrides if o.split("=", 1)[0] != "hydra.run.dir"]
        (cfg,), choice = compose_command(overrides)  # 2
    if choice.line:
        print(printable(f"her-run: {choice.line}"), flush=True)
    task, given = without_hydra(cfg), list(cfg.hydra.overrides.task)  # as the command gave them, Hydra's keys aside
    check_required(OmegaConf.to_container(task), given)  # 3: ~seed, before the folder's name reads it
    key, out_dir = ("hydra.run.dir", _hydra_run_dir(cfg, task)) if command else ("out_dir", out_dir)
    out = None if out_dir is None else _folder(out_dir, key)  # 4 (None: load= writes next to its checkpoint)
    if task.get("load"):
        if isinstance(task["load"], str):
            check_path("load", task["load"])
        return Evaluation(task, given, out)
    return _plan(task, out, given)  # 4-6


def gate_sweep(overrides: list[str]) -> Choice:
    """``her-run -m``: steps 1-3 and 6 of each value of each swept key, and the sweep folder and
    launcher (:func:`check_sweep`), before Hydra makes the folder and starts the launcher; returns what
    is added to the command for the learner (every job must see it)."""
    with _one_line(overrides):
        check_group_names(overrides)
        variants, choice = compose_command(overrides, multirun=True)
    if choice.line:
        print(printable(f"her-run: {choice.line}"), flush=True)
    check_sweep(variants[0])
    for cfg in variants:
        _check_values(cfg, list(cfg.hydra.overrides.task))
    return choice


def gate_shown(overrides: list[str], multirun: bool, values: bool) -> tuple[DictConfig, Choice]:
    """What ``--cfg``, ``--info`` or ``--help`` shows, composed (a sweep's first variant) after steps 1-2;
    ``values``: checked as a run is (steps 3 and 6), so the config shown is one her-run would accept.
    Nothing is printed but the config."""
    with _one_line(overrides):
        check_group_names(overrides)
        variants, choice = compose_command(overrides, multirun)
    if values:
        _check_values(variants[0], choice.apply(overrides))
    return variants[0], choice


@contextmanager
def _one_line(overrides: list[str]):
    """What Hydra or OmegaConf refuses while steps 1-2 parse and compose the overrides: one line."""
    try:
        yield
    except (HydraException, OmegaConfBaseException) as exc:
        raise ConfigError(hydra_message(exc, overrides)) from None


def _hydra_run_dir(cfg: DictConfig, task: DictConfig) -> Any:
    """her-run's run folder: hydra.run.dir when the command gives it, else its default (a new, unique
    folder) for a new run; None: load= writes next to its checkpoint."""
    if not any(o.split("=", 1)[0].lstrip("+") == "hydra.run.dir" for o in cfg.hydra.overrides.hydra):
        if task.get("load"):
            return None
        if task.get("resume") is True:
            raise ConfigError("resume=true needs the folder of the run to continue: add hydra.run.dir=<run folder>")
    return OmegaConf.select(cfg, "hydra.run.dir")


def _folder(value: Any, key: str) -> Path:
    """The run folder ``key`` names, as a path the file system can take."""
    out = rundir.folder_path(value, key)
    check_path(key, out)
    return out


def _check_values(cfg: DictConfig, overrides: list[str]) -> None:
    """Steps 3 and 6 of a composed config that names no run folder (a sweep's variant, a config shown);
    a load= command's values are checked by load."""
    task = without_hydra(cfg)
    check_required(OmegaConf.to_container(task), overrides)
    if not task.get("load"):
        validate(task, overrides, required=False)


def given_overrides(overrides: list[str] | None) -> list[str] | None:
    """The keys given on the command line: these, or Hydra's when called inside a Hydra job."""
    if overrides is None:
        if HydraConfig.initialized():
            return list(HydraConfig.get().overrides.task)
    return None if overrides is None else list(overrides)


def _hydra_files() -> tuple[str, ...]:
    """What Hydra itself wrote into this job's folder before the run started (with
    ``hydra/job_logging=default``: its log file)."""
    return (f"{HydraConfig.get().job.name}.log",) if HydraConfig.initialized() else ()


def plan_run(cfg: DictConfig | dict[str, Any], out_dir: str | Path | None = None,
             overrides: list[str] | None = None) -> Plan | Evaluation:
    """The gate from step 3 for a config composed already: a sweep's job (Hydra composed it), a config
    built in Python (``overrides`` None: every key counts as given). ``load=`` leaves at once, as it is."""
    if cfg.get("load"):
        return Evaluation(cfg, overrides, None if out_dir is None else Path(out_dir))
    import_given(overrides)  # env.id=module:Env-v0 given by the user: import the module that registers it
    check_required(OmegaConf.to_container(cfg) if isinstance(cfg, DictConfig) else cfg, overrides)
    return _plan(cfg, None if out_dir is None else _folder(out_dir, "out_dir"), overrides)


def _plan(cfg: DictConfig | dict[str, Any], out: Path | None, overrides: list[str] | None) -> Plan:
    """Steps 4-6: the run folder (None: a new one), the checkpoint to resume and its merged config, the
    values and the env."""
    current = resolved(cfg, overrides)
    TOP["resume"].check("resume", current.get("resume"))
    checks.options(current, overrides)  # refuses video keys: training records none
    if out is None:  # a sweep's job: the folder Hydra named; else a new one
        out = Path(HydraConfig.get().runtime.output_dir) if HydraConfig.initialized() else \
            rundir.default_dir(current["algo"]["name"], current["env"]["name"], current["seed"])
    rundir.check_folder(out, ignore=_hydra_files())  # creatable, writable, and empty or a run's own
    fresh = not out.is_dir() or not set(os.listdir(out)) - set(_hydra_files())
    lock = rundir.RunLock.probe(out) if out.is_dir() else None  # an existing folder: refuse at once if live
    try:
        ckpt = stamp(out / CHECKPOINT)
        check_resume(out, ckpt, current["resume"], requeue.requeued(out))
        if ckpt is None and not (current["resume"] == "auto" and (out / CONFIG).is_file()):
            config, spaces, saved, changes = current, check(current, interpolations(cfg)), None, {}
        else:
            config, saved, changes = _resumed(current, out, ckpt is not None, overrides)
            spaces = check(config)
        trackers.check_loggers(config)  # logger=[...,wandb,mlflow]: the package, where to log; before any write
        return Plan(config, out, spaces, overrides, saved, changes, ckpt, lock, fresh)
    except BaseException:
        if lock is not None:
            lock.release()
        raise


def _resumed(current: dict[str, Any], out: Path, from_checkpoint: bool, overrides: list[str] | None
             ) -> tuple[dict[str, Any], dict[str, Any] | None, dict[str, list]]:
    """The config a resume trains (the folder's saved one with this command's changes), the checkpoint
    it continues (None: the run stopped before its first, and resume=auto starts it afresh under its
    saved config) and the changes."""
    if from_checkpoint:
        from her_rl.folder import checkpoint  # lazy: torch, for a resume only: a refused command is told first

        saved = checkpoint.load(out / CHECKPOINT)
        check_saved(saved, out / CHECKPOINT)
        base, mode, said = saved["config"], "true", ("resume", "the checkpoint was trained with")
    else:  # killed before its first checkpoint: the folder's run keeps its identity (its saved config)
        saved, base, mode = None, read_saved_config(out), "auto"
        said = ("resume=auto", "the run in that folder (stopped before its first checkpoint) has")
    _module_named(str(base["env"].get("id") or ""), out, mode)
    config, changes = merge(base, current, overrides, verb=said[0], source=said[1])
    check_required(config, learner=False)  # a saved config may predate a hyperparameter, not a key of the run
    return config, saved, changes


def _module_named(env_id: str, out: Path, mode: str) -> None:
    """A run folder is data: the module its saved ``env.id`` names is imported only where this command
    names it too (:func:`import_given` did that), as ``load=`` asks."""
    module = split_id(env_id)[0]
    if module is not None and module not in sys.modules:
        raise ConfigError(f"the run in {out} trains env.id '{env_id}', and her-rl imports a module only when the "
                          f"command names it: continue with {resume_command(out, env_id, mode)}")


__all__ = ["Evaluation", "Plan", "gate", "gate_shown", "gate_sweep", "given_overrides", "plan_run"]
