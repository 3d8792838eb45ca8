"""The Ray and submitit launchers, gathered job by job.

These launchers run a sweep's jobs in processes her-run does not start itself (Ray's workers,
submitit's jobs, on this machine or a cluster). A job whose process dies there (``os._exit`` or a
crash in the env or a library, a kill, the OOM killer, a lost node) hands back no result, and the
plugins' own ``launch`` then ends the whole sweep at the first such job with the launcher's traceback
(Ray's ``WorkerCrashedError``, submitit's ``UncompletedJobError``): no summary, the other jobs'
results never reach the sweeper. The launches here do what the plugins' do, up to their last step:
each job's result is got on its own, and a job that hands back none failed as any job does (one
line naming it and how it ended, ``failed.json`` in its folder, no objective), so the summary and
her-run's exit status follow as for any failed job. Ray also runs no job a second time after its
worker died (Ray's ``max_retries=0``): a second run would start over in the folder of the first,
three times by default, and end the same way.

:func:`gather_each_job` puts these launches in place of the plugins' own, in her-run's process (the
one that launches; the jobs' processes never do).
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path
from typing import Any, Callable, NamedTuple, Sequence

from hydra.core.hydra_config import HydraConfig
from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, configure_log, filter_overrides, setup_globals
from omegaconf import DictConfig, OmegaConf, open_dict

from her_rl.errors import one_line, outside
from her_rl.folder import failures, rundir
from her_rl.run.sweep import job_lost

# Lazy imports in this file are the optional extras (tagged `# optional extra`): Hydra's Ray and submitit
# launcher plugins, ray, submitit.

log = logging.getLogger(__name__)
_RETRIES = "max_retries"  # Ray's retries of a task whose worker died (3 by default)


def gather_each_job() -> None:
    """Replace the Ray and submitit plugins' ``launch`` (those installed) with the ones here."""
    with contextlib.suppress(ImportError):
        from hydra_plugins.hydra_ray_launcher.ray_launcher import RayLauncher  # optional extra

        RayLauncher.launch = _launch_on_ray
    with contextlib.suppress(ImportError):
        from hydra_plugins.hydra_submitit_launcher.submitit_launcher import BaseSubmititLauncher  # optional extra

        BaseSubmititLauncher.launch = _launch_on_submitit


class Lost(NamedTuple):
    """A job that handed back no result: how it ended, whether its process died, where to look."""

    how: str
    died: bool = True
    where: str = ""


def _gathered(config: Callable[[], DictConfig], result: Callable[[], Any]) -> Any:
    """A job's ``JobReturn``. For a job that handed back none (``result`` returns :class:`Lost`), its
    failure named and recorded, and a ``JobReturn`` without an objective (what a job that failed in
    its own process returns). ``config``: the job's config, composed only when needed."""
    outcome = result()
    if not isinstance(outcome, Lost):
        return outcome
    job = config()
    overrides, number = list(job.hydra.overrides.task), int(job.hydra.job.num)
    out = _folder(job)
    line = job_lost(outcome.how, out, overrides, number, outcome.died, outcome.where)
    failures.job_failed(out, failures.JobDied(line), overrides)
    return JobReturn(overrides=overrides, working_dir=str(out), task_name=str(job.hydra.job.name),
                     status=JobStatus.COMPLETED, _return_value=None)


def _folder(job: DictConfig) -> Path:
    """A job's folder, named as Hydra's run_job names it in the job's process (with the job's config
    as Hydra's config meanwhile, for ``${hydra:...}``); her-rl's own name for it if that fails."""
    hydra, held = job.hydra, HydraConfig.instance().cfg
    try:
        HydraConfig.instance().set_config(job)
        return Path(str(hydra.sweep.dir)) / str(hydra.sweep.subdir)
    except Exception:  # noqa: BLE001  (a name only the job's process could resolve)
        overrides = list(hydra.overrides.task)
        return Path(str(hydra.sweep.dir)) / rundir.swept_dirname(" ".join(overrides), overrides)
    finally:
        HydraConfig.instance().cfg = held


# ---- Ray --------------------------------------------------------------------------------------------

def _launch_on_ray(launcher: Any, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> list:
    """hydra_ray_launcher's ``_core.launch`` (1.2), with Ray's retries off unless asked for and each
    job's result got on its own."""
    from hydra_plugins.hydra_ray_launcher._launcher_util import launch_job_on_ray, start_ray  # optional extra

    setup_globals()
    configure_log(launcher.config.hydra.hydra_logging, launcher.config.hydra.verbose)
    sweep_dir = Path(str(launcher.config.hydra.sweep.dir))
    sweep_dir.mkdir(parents=True, exist_ok=True)
    log.info(f"Ray Launcher is launching {len(job_overrides)} jobs, sweep output dir: {sweep_dir}")
    launcher.ray_cfg.init.setdefault("object_store_memory", 78643200)  # as the plugin does
    start_ray(launcher.ray_cfg.init)
    remote = OmegaConf.merge({_RETRIES: 0}, launcher.ray_cfg.get("remote") or {})
    jobs = []
    for idx, overrides in enumerate(job_overrides, initial_job_idx):
        log.info(f"\t#{idx} : {' '.join(filter_overrides(overrides))}")
        sweep_config = launcher.hydra_context.config_loader.load_sweep_config(launcher.config, list(overrides))
        with open_dict(sweep_config):
            sweep_config.hydra.job.id, sweep_config.hydra.job.num = f"job_id_for_{idx}", idx
            jobs.append((sweep_config, launch_job_on_ray(launcher.hydra_context, remote, sweep_config,
                                                         launcher.task_function, Singleton.get_state())))
    return [_gathered(lambda config=config: config, lambda ref=ref: _ray_result(ref)) for config, ref in jobs]


def _ray_result(ref: Any) -> Any:
    import ray  # optional extra
    from ray import exceptions as rex  # optional extra

    try:
        return ray.get(ref)
    except rex.RayTaskError as exc:  # raised in the job's process, past the job's own handling
        cause = exc.cause if isinstance(exc.cause, BaseException) else exc
        return Lost(f"it ended with {failures.describe(cause)[0]} in its Ray worker", died=False)
    except rex.OutOfMemoryError:
        return Lost("Ray's memory monitor killed its worker process before the job ended (out of memory)", died=False)
    except rex.WorkerCrashedError:
        return Lost("its Ray worker process died before the job ended")
    except rex.RayError as exc:  # a lost node, a cancelled task, ...
        return Lost(f"Ray lost it before it ended ({type(exc).__name__}: {outside(one_line(exc)[:200])})")


# ---- submitit ---------------------------------------------------------------------------------------

def _launch_on_submitit(launcher: Any, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> list:
    """hydra_submitit_launcher's ``BaseSubmititLauncher.launch`` (1.2), with each job's result got on
    its own."""
    import submitit  # optional extra
    from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf  # optional extra

    kind, params = launcher._EXECUTOR, launcher.params
    specific_init_keys = {"max_num_timeout"}
    init_params = {"folder": params["submitit_folder"],
                   **{f"{kind}_{k}": v for k, v in params.items() if k in specific_init_keys}}
    executor = submitit.AutoExecutor(cluster=kind, **init_params)
    base = set(OmegaConf.structured(BaseQueueConf).keys())
    executor.update_parameters(**{k if k in base else f"{kind}_{k}": v for k, v in params.items()
                                  if k not in specific_init_keys | {"submitit_folder"}})
    log.info(f"Submitit '{kind}' sweep output dir : {launcher.config.hydra.sweep.dir}")
    sweep_dir = Path(str(launcher.config.hydra.sweep.dir))
    sweep_dir.mkdir(parents=True, exist_ok=True)
    if "mode" in launcher.config.hydra.sweep:
        os.chmod(sweep_dir, mode=int(str(launcher.config.hydra.sweep.mode), 8))
    job_params = []
    for idx, overrides in enumerate(job_overrides, initial_job_idx):
        log.info(f"\t#{idx} : {' '.join(filter_overrides(overrides))}")
        job_params.append((list(overrides), "hydra.sweep.dir", idx, f"job_id_for_{idx}", Singleton.get_state()))
    jobs = executor.map_array(launcher, *zip(*job_params))
    return [_gathered(lambda p=p: _sweep_config(launcher, p[0], p[2]), lambda job=job: _submitit_result(job))
            for job, p in zip(jobs, job_params)]


def _sweep_config(launcher: Any, overrides: list[str], idx: int) -> DictConfig:
    """A job's config as its process composes it (for its folder's name)."""
    config = launcher.hydra_context.config_loader.load_sweep_config(launcher.config, overrides)
    with open_dict(config):
        config.hydra.job.num = idx
    return config


def _submitit_result(job: Any) -> Any:
    from submitit import LocalJob  # optional extra
    from submitit.core.utils import FailedJobError, UncompletedJobError  # optional extra

    job.wait()
    local = isinstance(job, LocalJob)
    where = f"submitit job {job.job_id}{'' if local else f', state {job.state}'}, log {_shown(job.paths.stderr)}"
    lost = Lost("its process ended before the job did, handing back no result", where=where)
    if local and not job.paths.result_pickle.exists():  # on this machine: no file system to wait for
        return lost
    try:
        return job.results()[0]
    except FailedJobError as exc:  # raised in the job's process, past the job's own handling: its last line
        lines = [ln.strip() for ln in str(exc).split("You can check full logs")[0].splitlines()
                 if ln.strip() and set(ln.strip()) != {"-"}]
        return Lost(f"it ended with {outside(lines[-1][:300]) if lines else 'an error'}", died=False, where=where)
    except UncompletedJobError:  # (FailedJobError is one too)
        return lost


def _shown(path: Path) -> str:
    """A path relative to the current folder when it lies below it."""
    where = os.path.relpath(path)
    return str(path) if where.startswith("..") else where


__all__ = ["Lost", "gather_each_job"]
