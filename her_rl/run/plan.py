"""A checked training run: what to run, in which folder, from which checkpoint.

:func:`plan_run` makes every check of a run before anything is built or written (it only reads):
the values and the env's spaces, the run folder (creatable and writable; new, empty or a her-rl
run's; not held by a live run; holding a checkpoint only if ``resume`` asks for one), and the
checkpoint to resume with the saved config merged with this command's. :meth:`Plan.take_folder`
then locks the folder for the run (a sweep's folder and launcher: :mod:`her_rl.run.sweep`).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from her_rl.folder import checkpoint, rundir
from her_rl.config import video
from her_rl.run import requeue
from her_rl.run.signals import resume_command
from her_rl.config.checks import check, interpolations, resolved
from her_rl.envs.custom import import_given
from her_rl.envs.families import split_id
from her_rl.errors import ConfigError
from her_rl.config.registry import EnvSpaces
from her_rl.config.saved import check_saved, merge
from her_rl.folder.resume import check_resume, read_saved_config, stamp
from her_rl.folder.rundir import CHECKPOINT, CONFIG, RESULTS
from her_rl.rules import check_path
from her_rl.config.schema import TOP, check_required


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
    made_below: Path | None = None  # the folder under which take_folder made every folder it made

    @property
    def checkpoint(self) -> Path:
        return self.out / CHECKPOINT

    @cached_property
    def yaml(self) -> str:
        """The config as ``config.yaml`` and TensorBoard's Text tab show it."""
        return OmegaConf.to_yaml(self.config)

    def take_folder(self, env_steps: int = 0) -> None:
        """Lock the run folder (creating it) once every check passed, clear what killed writes left
        there, and write ``config.yaml`` and the history line of this start (or resume) at
        ``env_steps``; the folder is this run's from here on."""
        if self.lock is None:
            self.made_below = next((p.parent for p in [*reversed(self.out.parents), self.out] if not p.exists()),
                                    self.out.parent)  # a failed start removes the folders it made, no others
            try:
                self.lock = rundir.RunLock.acquire(self.out)
            except OSError as exc:
                self._abandon()
                raise ConfigError(f"cannot write in run folder {self.out}: {exc.strerror or exc}") from None
            if stamp(self.checkpoint) != self.ckpt_stamp:  # another run wrote there between our checks and the lock
                raise ConfigError(f"run folder {self.out} changed while this run was starting (another run wrote "
                                  "a checkpoint there); check it, then pass resume=true or pick another folder")
        try:
            self.lock.mark_owner()
        except OSError as exc:  # a full disk: not even the pid fits
            self._abandon()
            raise ConfigError(f"cannot write in run folder {self.out}: {exc.strerror or exc}") from None
        for name in (CHECKPOINT, CONFIG, RESULTS):  # temp files of writes a killed run left behind
            checkpoint.remove_stale_temps(self.out / name)
        try:
            checkpoint.write_atomic_text(self.out / CONFIG, self.yaml)
            rundir.record(self.out, "resume" if self.saved else "start", env_steps=env_steps,
                          overrides=self.overrides, changed=self.changes)
        except OSError as exc:
            self._abandon()
            raise ConfigError(f"cannot write in run folder {self.out}: {exc.strerror or exc}") from None

    def _abandon(self) -> None:
        """A fresh run that could not start: remove what it wrote (its lock file, config, history) and
        the folder if that leaves it empty, so a failed start leaves nothing behind."""
        if not self.fresh:
            return
        for name in (rundir.LOCK, CONFIG, rundir.HISTORY):
            try:
                (self.out / name).unlink(missing_ok=True)
            except OSError:
                pass
        self.release()
        rundir.remove_if_empty(self.out, stop_at=self.made_below or self.out.parent)

    def release(self) -> None:
        if self.lock is not None:
            self.lock.release()


def given_overrides(overrides: list[str] | None) -> list[str] | None:
    """The keys given on the command line: these, or Hydra's when called inside a Hydra job."""
    if overrides is None:
        from hydra.core.hydra_config import HydraConfig

        if HydraConfig.initialized():
            return list(HydraConfig.get().overrides.task)
    return None if overrides is None else list(overrides)


def _out_dir(cfg: dict[str, Any], out_dir: str | Path | None) -> Path:
    if out_dir is None:
        from hydra.core.hydra_config import HydraConfig

        if HydraConfig.initialized():
            return Path(HydraConfig.get().runtime.output_dir)
        return rundir.default_dir(cfg["algo"]["name"], cfg["env"]["name"], cfg["seed"])
    out = rundir.folder_path(out_dir, "out_dir")
    check_path("out_dir", out)
    return out


def _hydra_files() -> tuple[str, ...]:
    """What Hydra itself wrote into this job's folder before the run started (with
    ``hydra/job_logging=default``: its log file)."""
    from hydra.core.hydra_config import HydraConfig

    return (f"{HydraConfig.get().job.name}.log",) if HydraConfig.initialized() else ()


def plan_run(cfg: DictConfig | dict[str, Any], out_dir: str | Path | None = None,
             overrides: list[str] | None = None) -> Plan:
    """Every check of a training run, before anything is built or written (it only reads)."""
    check_required(OmegaConf.to_container(cfg) if isinstance(cfg, DictConfig) else cfg, overrides)
    current = resolved(cfg, overrides)
    TOP["resume"].check("resume", current.get("resume"))
    video.options(current, overrides)  # refuses video keys: training records none
    import_given(overrides)  # env.id=module:Env-v0 given by the user: import the module that registers it
    out = _out_dir(current, out_dir)
    rundir.check_folder(out, ignore=_hydra_files())  # creatable, writable, and empty or a run's own
    fresh = not out.is_dir() or not set(os.listdir(out)) - set(_hydra_files())
    lock = rundir.RunLock.probe(out) if out.is_dir() else None  # an existing folder: refuse at once if live
    try:
        ckpt = stamp(out / CHECKPOINT)
        check_resume(out, ckpt, current["resume"], requeue.requeued(out))
        if ckpt is None and current["resume"] == "auto" and (out / CONFIG).is_file():
            # killed before its first checkpoint: the folder's run keeps its identity (its saved config)
            saved_config = read_saved_config(out)
            _module_named(str(saved_config["env"].get("id") or ""), out, "auto")
            config, changes = merge(saved_config, current, overrides, verb="resume=auto",
                                    source="the run in that folder (stopped before its first checkpoint) has")
            return Plan(config, out, check(config), overrides, changes=changes, ckpt_stamp=None, lock=lock)
        if ckpt is None:
            return Plan(current, out, check(current, interpolations(cfg)), overrides, ckpt_stamp=None, lock=lock,
                        fresh=fresh)
        saved = checkpoint.load(out / CHECKPOINT)
        check_saved(saved, out / CHECKPOINT)
        _module_named(str(saved["config"]["env"]["id"]), out, "true")
        config, changes = merge(saved["config"], current, overrides)
        return Plan(config, out, check(config), overrides, saved, changes, ckpt, lock)
    except BaseException:
        if lock is not None:
            lock.release()
        raise


def _module_named(env_id: str, out: Path, mode: str) -> None:
    """A run folder is data: the module its saved ``env.id`` names is imported only where this command
    names it too (:func:`import_given` did that), as ``load=`` asks."""
    module = split_id(env_id)[0]
    if module is not None and module not in sys.modules:
        raise ConfigError(f"the run in {out} trains env.id '{env_id}', and her-rl imports a module only when the "
                          f"command names it: continue with {resume_command(out, env_id, mode)}")


__all__ = ["Plan", "given_overrides", "plan_run"]
