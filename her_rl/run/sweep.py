"""A sweep (``her-run -m``), checked before Hydra makes its folder or starts its launcher: the sweep
folder, the launcher's package (and SLURM for submitit_slurm) and settings (each value of each swept key
is the gate's: :func:`her_rl.run.plan.gate_sweep`); what
each job returns to the sweeper (:func:`objective`) and what the Optuna sweeper needs added
(:func:`optuna_settings`); a job in a worker process of joblib run in a process of its own
(:func:`run_isolated`), so one that dies ends only itself (Ray and submitit, whose jobs run in
processes of their own: :mod:`her_rl.run.launchers`); the line for a job that handed back no result
(:func:`job_lost`).
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import pickle
import re
import shutil
import signal
import sys
from pathlib import Path
from typing import Any, Callable

from omegaconf import DictConfig, OmegaConf

from her_rl.errors import ConfigError, Interrupt, one_line
from her_rl.folder import failures, rundir
from her_rl.rules import COUNT, MAX_ENVS, SEED, Rule, check_path, choice, integer, optional, real
from her_rl.run.signals import CAUGHT, Stopped

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
        "n_jobs": Rule(f"a non-zero integer in [-{MAX_ENVS}, {MAX_ENVS}] (-1: every core)",  # loky starts them all
                       lambda v: isinstance(v, int) and not isinstance(v, bool) and v != 0 and abs(v) <= MAX_ENVS),
        "pre_dispatch": Rule("all, an integer >= 1 or K*n_jobs", lambda v: COUNT.ok(v) or (
            isinstance(v, str) and re.fullmatch(r"\s*(all|([1-9][0-9]*\s*\*\s*)?n_jobs)\s*", v) is not None)),
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
    raw = OmegaConf.to_container(cfg.hydra.sweep)["subdir"]  # raw: its value is the job's
    subdir = rundir.folder_path(raw, "hydra.sweep.subdir")
    if subdir.is_absolute() or ".." in subdir.parts:  # jobs elsewhere: outside the sweep's summary and failures
        raise ConfigError(f"hydra.sweep.subdir={subdir} is not allowed: hydra.sweep.subdir names each job's folder "
                          "inside the sweep folder (a relative name without '..'); put the sweep elsewhere with "
                          "hydra.sweep.dir")
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


_CAUSES = "an os._exit or a crash in the env or a library, or a kill: out of memory?"  # what ends a job's process
ISOLATING_LAUNCHERS = ("JoblibLauncher",)  # process pools that end every job of a sweep when one worker dies


def isolates(launcher: DictConfig, sweep_pid: int | None) -> bool:
    """Whether a job runs in a child process of its own: in a worker process of a launcher whose pool
    dies with one worker (joblib's loky), not in her-run's own process (joblib with one job at a time
    runs the jobs there, as the basic launcher does)."""
    target = str(launcher.get("_target_", "")).rsplit(".", 1)[-1]
    return target in ISOLATING_LAUNCHERS and os.getpid() != sweep_pid and hasattr(os, "fork")


def run_isolated(job: Callable[[], Any], out: Path, overrides: list[str], number: int) -> Any:
    """``job()``, a sweep job, in a forked child of this worker process; what it returns (or the stop
    it ends with: SystemExit, KeyboardInterrupt) is handed back through a pipe. A child that ends without
    handing anything back (``os._exit`` or a crash in the env or a library, SIGKILL, the kernel's OOM
    killer) failed as any job does: one line naming the job and how its process ended, ``failed.json``,
    no objective; the worker lives on, so joblib's pool runs the other jobs."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: whatever happens, it never returns into the launcher's code
        code = 0
        try:
            os.close(read_fd)
            try:
                outcome: tuple = ("value", job())
            except SystemExit as exc:
                outcome = ("exit", exc.code)
            except KeyboardInterrupt as exc:
                outcome = ("interrupt", type(exc).__name__, getattr(exc, "signum", None), str(exc))
            except BaseException as exc:  # noqa: BLE001  (anything else is the job's failure, named)
                outcome = ("value", failures.job_failed(out, exc, overrides))
            with os.fdopen(write_fd, "wb") as pipe:
                pipe.write(pickle.dumps(outcome))
        except BaseException:  # noqa: BLE001  (nothing handed back: the worker names the job)
            code = 1
        finally:
            _flush()
            os._exit(code)
    os.close(write_fd)
    data, status = _wait(pid, read_fd)
    if data:
        kind, *rest = pickle.loads(data)  # this process's own child wrote it
        if kind == "value":
            return rest[0]
        if kind == "exit":
            raise SystemExit(rest[0])
        name, signum, message = rest
        if signum is not None:
            raise Stopped(signum)
        raise (KeyboardInterrupt if name == "KeyboardInterrupt" else Interrupt)(message)
    return failures.job_failed(out, failures.JobDied(_died(status, out, overrides, number)), overrides)


def _wait(pid: int, read_fd: int) -> tuple[bytes, int]:
    """What the child handed back and its wait status. A stop signal meanwhile is the child's to handle:
    SIGTERM or SIGHUP sent to this process is passed on (a second one there is only noted); a Ctrl-C
    reaches the child from the terminal itself, in the same process group, so it is not sent twice."""
    def pass_on(signum: int, frame: object) -> None:
        if signum != signal.SIGINT:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)

    previous = {}
    for sig in CAUGHT:
        with contextlib.suppress(ValueError):  # not the main thread: signals stay as they are
            if signal.getsignal(sig) is not signal.SIG_IGN:
                previous[sig] = signal.signal(sig, pass_on)
    try:
        status = os.waitpid(pid, 0)[1]
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
    # read after the child ended, without waiting for EOF: a process it started (a vector env's worker)
    # may still hold the pipe open; what the child hands back is far smaller than the pipe's buffer
    os.set_blocking(read_fd, False)
    chunks = []
    try:
        while chunk := os.read(read_fd, 1 << 16):
            chunks.append(chunk)
    except BlockingIOError:
        pass
    finally:
        os.close(read_fd)
    return b"".join(chunks), status


def _died(status: int, out: Path, overrides: list[str], number: int) -> str:
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        name = signal.Signals(-code).name if -code in signal.valid_signals() else "?"
        how = f"was killed by signal {-code} ({name})"
    else:
        how = f"exited with status {code}"
    return job_lost(f"its process {how} before the job ended", out, overrides, number)


def job_lost(how: str, out: Path, overrides: list[str], number: int, died: bool = True, where: str = "") -> str:
    """The line for a sweep job that handed back no result: which job (its number and the overrides the
    sweep varies), how it ended (``how``; for a process that ``died``, what ends one; ``where`` to look),
    whether its folder keeps a checkpoint to continue from."""
    kept = "its folder keeps its last checkpoint" if (out / rundir.CHECKPOINT).is_file() else \
        "no checkpoint had been written"
    swept = rundir.swept_dirname(" ".join(overrides), overrides)
    said = "; ".join(filter(None, (_CAUSES if died else "", where)))
    return f"job #{number} ({swept}): {how}{f' ({said})' if said else ''}; {kept}"


def _flush() -> None:
    """What the child printed or logged reaches its files before ``os._exit`` skips Python's own exit."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    for handler in logging.getLogger().handlers:
        with contextlib.suppress(Exception):
            handler.flush()


__all__ = ["ISOLATING_LAUNCHERS", "SETTING_RULES", "check_settings", "check_sweep", "isolates", "job_lost",
           "objective", "optuna_settings", "run_isolated"]
