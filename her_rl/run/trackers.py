"""Experiment trackers beside TensorBoard: Weights & Biases and MLflow, behind one interface.

``logger=[tensorboard,wandb,mlflow]`` names where a run's scalars go besides ``metrics.jsonl`` (which
every run writes). Each tracker gets the resolved config when it opens, every line of ``metrics.jsonl``
as it is written (the same tags at the same env steps; a non-finite value, ``null`` there, is left
out), the final results (``results.json``'s numbers, under ``results/``) and the videos ``load=... video=true``
records into the run folder. Their packages are imported only when named, so ``her-run`` starts
without them.

Resume: ``trackers.json`` in the run folder (written atomically) keeps each tracker's run id, so
``resume=true`` (or ``auto``) continues the same W&B run and MLflow run. A killed run may have sent
steps past its last checkpoint, and may have died before a tracker got steps its checkpoint covers,
so on resume each tracker is asked for the last step it holds (MLflow: its metric history; W&B
online: the resumed run's step; W&B offline: the earlier run files in the folder, read with
``wandb leet inspect``): the lines of ``metrics.jsonl`` after that step which the resumed run will
not log again are sent first, and the steps it does hold are not sent again. Every step once, none
missing.

A sweep's jobs share a W&B group (``wandb.group``, else the sweep folder's name) and, in MLflow, a
parent run (created by :class:`SweepParent` as the multirun starts, found again by its tag when the
sweep is rerun in the same folder) and the tag ``her_rl.sweep``.

A tracker that fails (no server, no network, a refused login) is one warning line; the run goes on
without it, its own files intact. Trackers send from a thread of their own, so a slow server never
slows training; the run waits for them at its end for at most :data:`CLOSE_WAIT_S` seconds.
"""

from __future__ import annotations

import importlib
import json
import os
import queue
import secrets
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import OmegaConf

from her_rl.errors import ConfigError, one_line, printable
from her_rl.folder.atomic import remove_stale_temps, write_atomic_text
from her_rl.folder.metrics import METRICS, _lines
from her_rl.folder.rundir import TRACKERS
from her_rl.run.progress import warn

# Lazy imports in this file are the optional extras wandb and mlflow (tagged `# optional extra`).

NAMES = ("tensorboard", "wandb", "mlflow")
REMOTE = ("wandb", "mlflow")
DEFAULT = ["tensorboard"]  # what a config saved before ``logger`` existed logs to
IDS = TRACKERS  # trackers.json: each tracker's run id, for resume
CLOSE_WAIT_S = 60.0  # at its end, a run waits this long at most for a tracker to send what it has
QUEUE_MAX = 100_000  # lines a tracker may fall behind before it is dropped
PARENT_ENV = "HER_RL_MLFLOW_PARENT"  # the MLflow parent run of a sweep, set by SweepParent for its jobs
MLFLOW_HTTP = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
               "MLFLOW_HTTP_REQUEST_TIMEOUT": "10"}  # a server that is down fails in seconds, not minutes


def names(config: dict[str, Any] | None) -> list[str]:
    """The loggers a config names (a config saved before ``logger`` existed: TensorBoard)."""
    value = (config or {}).get("logger")
    return list(DEFAULT if value is None else value)


def check_loggers(config: dict[str, Any]) -> None:
    """Before anything is written: each tracker's package imports (else one line naming the extra) and
    MLflow knows where to log."""
    for name in names(config):
        if name in REMOTE:
            _import(name)
    if "mlflow" in names(config) and not _mlflow_uri(config):
        raise ConfigError("logger=mlflow: mlflow.tracking_uri is not set (nor MLFLOW_TRACKING_URI): name the tracking "
                          "server (mlflow.tracking_uri=http://HOST:5000) or a store (mlflow.tracking_uri=sqlite:///PATH)")


def _import(name: str) -> Any:
    if name == "mlflow":
        for key, value in MLFLOW_HTTP.items():
            os.environ.setdefault(key, value)
    try:
        return importlib.import_module(name)
    except Exception as exc:  # noqa: BLE001  (missing, or broken on import)
        why = "is not installed" if isinstance(exc, ImportError) else f"cannot be imported ({one_line(exc)[:120]})"
        raise ConfigError(f"logger={name} needs the {name} package, which {why}: pip install -e \".[{name}]\"") from None


def _mlflow_uri(config: dict[str, Any]) -> str | None:
    return (config.get("mlflow") or {}).get("tracking_uri") or os.environ.get("MLFLOW_TRACKING_URI") or None


def sweep_folder() -> Path | None:
    """The sweep folder of this job when it runs in a Hydra multirun, else None."""
    try:
        if HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN:
            return Path(str(HydraConfig.get().sweep.dir)).absolute()
    except Exception:  # noqa: BLE001  (no sweep is known: a job on its own)
        pass
    return None


def _flat(tree: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(tree, dict):
        out: dict[str, Any] = {}
        for key, value in tree.items():
            out.update(_flat(value, f"{prefix}{key}."))
        return out
    return {prefix.rstrip("."): tree}


def _numbers(results: dict[str, Any]) -> dict[str, float]:
    """results.json's numbers (a bool as 0/1), under ``results/``."""
    return {f"results/{k}": float(v) for k, v in results.items()
            if isinstance(v, (int, float)) and v is not None}


# ---- the trackers -------------------------------------------------------------------------

class Tracker:
    """One tracker's run. ``last_step``: the last env step it already held when opened (None: none)."""

    name = ""
    last_step: int | None = None
    ids: dict[str, Any] = {}

    def log(self, values: dict[str, float], step: int, wall_time: float) -> None:
        raise NotImplementedError

    def results(self, numbers: dict[str, float], step: int) -> None:
        raise NotImplementedError

    def video(self, path: Path, step: int) -> None:
        raise NotImplementedError

    def close(self, status: str) -> None:
        """``status``: FINISHED, KILLED (a stop signal) or FAILED."""
        raise NotImplementedError


class WandbTracker(Tracker):
    name = "wandb"

    def __init__(self, out: Path, config: dict[str, Any], saved: dict[str, Any], run_name: str):
        wandb = _import("wandb")
        settings = config.get("wandb") or {}
        sweep = sweep_folder()
        run_id = saved.get("id") or secrets.token_hex(6)
        self.run = wandb.init(
            project=settings.get("project"), entity=settings.get("entity"),
            group=settings.get("group") or (sweep.name if sweep else None), tags=list(settings.get("tags") or []),
            mode=settings.get("mode"), dir=str(out), id=run_id, resume="allow", name=run_name,
            settings=wandb.Settings(console="off", quiet=True, save_code=False, x_disable_stats=True,
                                    x_save_requirements=False, disable_git=True))
        self.run.config.update(config, allow_val_change=True)
        self.ids = {"id": run_id}
        self.offline = bool(getattr(self.run.settings, "_offline", False))
        if saved.get("id") == run_id:
            self.last_step = _wandb_last_step(out, run_id, self.run) if self.offline else \
                (self.run.starting_step - 1 if self.run.resumed and self.run.starting_step > 0 else None)

    def log(self, values: dict[str, float], step: int, wall_time: float) -> None:
        self.run.log(values, step=step)

    def results(self, numbers: dict[str, float], step: int) -> None:
        self.run.summary.update(numbers)

    def video(self, path: Path, step: int) -> None:
        import wandb  # optional extra

        self.run.log({f"videos/{path.stem}": wandb.Video(str(path), format=path.suffix.lstrip("."))})

    def close(self, status: str) -> None:
        self.run.finish(exit_code=0 if status == "FINISHED" else 1)


def _wandb_last_step(out: Path, run_id: str, run: Any) -> int | None:
    """The last history step of this run's earlier offline run files in ``out/wandb/`` (``wandb leet
    inspect --json``, W&B's own reader of its ``.wandb`` files); the file this run writes now is not read."""
    current = Path(str(run.settings.sync_file)).resolve() if getattr(run.settings, "sync_file", None) else None
    last = None
    for path in sorted((out / "wandb").glob(f"offline-run-*-{run_id}/run-{run_id}.wandb")):
        if path.is_symlink() or (current is not None and path.resolve() == current):
            continue
        for record in wandb_records(path):
            step = (record.get("history") or {}).get("step", {}).get("num")
            if record.get("type") == "history" and step is not None:
                last = int(step) if last is None else max(last, int(step))
    return last


def wandb_records(path: Path) -> list[dict[str, Any]]:
    """Every record of a ``.wandb`` file, as ``wandb leet inspect --json`` prints them."""
    done = subprocess.run([sys.executable, "-m", "wandb", "leet", "inspect", "--json", str(path)],
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        raise RuntimeError(f"wandb leet inspect {path.name} failed: {one_line(done.stderr)[-200:]}")
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip().startswith("{")]


class MlflowTracker(Tracker):
    name = "mlflow"

    def __init__(self, out: Path, config: dict[str, Any], saved: dict[str, Any], run_name: str):
        _import("mlflow")
        from mlflow.entities import Param  # optional extra
        from mlflow.exceptions import MlflowException  # optional extra
        from mlflow.tracking import MlflowClient  # optional extra

        settings = config.get("mlflow") or {}
        uri = _mlflow_uri(config)
        self.client = client = MlflowClient(tracking_uri=uri)
        run_id = saved.get("run_id") if saved.get("tracking_uri") == uri else None
        run = None
        if run_id:
            try:
                run = client.get_run(run_id)
            except MlflowException:  # gone from this server: a new run
                run = None
        if run is None:
            experiment = settings.get("experiment") or "her-rl"
            found = client.get_experiment_by_name(experiment)
            experiment_id = found.experiment_id if found is not None else client.create_experiment(experiment)
            tags = {"her_rl.run_folder": str(out.absolute()), "her_rl.algo": config["algo"]["name"],
                    "her_rl.env": config["env"]["name"], "her_rl.seed": str(config["seed"])}
            sweep = sweep_folder()
            if sweep is not None:
                tags["her_rl.sweep"] = str(sweep)
                if os.environ.get(PARENT_ENV):
                    tags["mlflow.parentRunId"] = os.environ[PARENT_ENV]
            run = client.create_run(experiment_id, run_name=run_name, tags=tags)
        else:
            client.update_run(run.info.run_id, status="RUNNING")
            self.last_step = _mlflow_last_step(client, run)
        self.run_id = run.info.run_id
        self.ids = {"run_id": self.run_id, "tracking_uri": uri, "experiment_id": run.info.experiment_id}
        # params cannot change in MLflow: a resume that changed a bookkeeping key keeps the first value
        # (config.yaml and history.jsonl in the run folder say what changed)
        params = [Param(k, str(v)[:6000]) for k, v in _flat(config).items() if k not in run.data.params]
        for start in range(0, len(params), 100):
            client.log_batch(self.run_id, params=params[start:start + 100], synchronous=True)

    def log(self, values: dict[str, float], step: int, wall_time: float) -> None:
        from mlflow.entities import Metric  # optional extra

        stamp = int(wall_time * 1000) or int(time.time() * 1000)
        metrics = [Metric(k, float(v), stamp, int(step)) for k, v in values.items()]
        for start in range(0, len(metrics), 1000):
            self.client.log_batch(self.run_id, metrics=metrics[start:start + 1000], synchronous=True)

    def results(self, numbers: dict[str, float], step: int) -> None:
        self.log(numbers, step, time.time())

    def video(self, path: Path, step: int) -> None:
        self.client.log_artifact(self.run_id, str(path), artifact_path="videos")

    def close(self, status: str) -> None:
        self.client.set_terminated(self.run_id, status=status)


def _mlflow_last_step(client: Any, run: Any) -> int | None:
    last = None
    for key in run.data.metrics:
        if key.startswith("results/"):
            continue
        for metric in client.get_metric_history(run.info.run_id, key):
            last = metric.step if last is None else max(last, metric.step)
    return last


TRACKERS: dict[str, Callable[..., Tracker]] = {"wandb": WandbTracker, "mlflow": MlflowTracker}


# ---- the set a run logs to ------------------------------------------------------------------

class _Sender:
    """A tracker fed from a thread of its own, in order; its first failure is kept for the run to tell."""

    def __init__(self, tracker: Tracker, skip_through: int | None):
        self.tracker, self.skip_through = tracker, skip_through
        self.error: str | None = None
        self.jobs: queue.Queue = queue.Queue(QUEUE_MAX)
        self.thread = threading.Thread(target=self._work, daemon=True, name=f"her-rl {tracker.name}")
        self.thread.start()

    def _work(self) -> None:
        while True:
            job = self.jobs.get()
            if job is None:
                return
            if self.error is None:
                try:
                    job()
                except BaseException as exc:  # noqa: BLE001  (whatever a tracker raises ends only that tracker)
                    self.error = one_line(f"{type(exc).__name__}: {exc}")[:300]

    def put(self, job: Callable[[], Any]) -> None:
        if self.error is None:
            try:
                self.jobs.put_nowait(job)
            except queue.Full:
                self.error = f"it fell {QUEUE_MAX:,} lines behind"


class Trackers:
    """The trackers of one run (:func:`open_trackers`); every call returns, whatever a tracker does."""

    def __init__(self, out: Path, senders: dict[str, _Sender], warn: Callable[[str], None]):
        self.out, self.senders, self.warn = out, senders, warn
        self.told: set[str] = set()

    def line(self, line: dict[str, Any]) -> None:
        """One line of ``metrics.jsonl`` (``step``, ``wall_time`` and the tags) as it is written."""
        step, wall = int(line["step"]), float(line.get("wall_time") or 0.0)
        values = {k: float(v) for k, v in line.items() if k not in ("step", "wall_time") and v is not None}
        for sender in self._live():
            if sender.skip_through is None or step > sender.skip_through:
                sender.put(lambda t=sender.tracker: t.log(values, step, wall))

    def results(self, results: dict[str, Any]) -> None:
        numbers, step = _numbers(results), int(results.get("env_steps") or 0)
        for sender in self._live():
            sender.put(lambda t=sender.tracker: t.results(numbers, step))

    def video(self, path: Path, step: int = 0) -> None:
        for sender in self._live():
            sender.put(lambda t=sender.tracker: t.video(path, step))

    def _live(self) -> list[_Sender]:
        self._tell()
        return [s for s in self.senders.values() if s.error is None]

    def _tell(self) -> None:
        for name, sender in self.senders.items():
            if sender.error is not None and name not in self.told:
                self.told.add(name)
                self.warn(f"logger {name} failed ({sender.error}); the run goes on without it, its files intact")

    def close(self, status: str = "FINISHED") -> None:
        """Send what is left, end each tracker's run, and wait for them (CLOSE_WAIT_S at most in all)."""
        deadline = time.monotonic() + CLOSE_WAIT_S
        for sender in self._live():
            sender.put(lambda t=sender.tracker: t.close(status))
        for sender in self.senders.values():
            try:
                sender.jobs.put_nowait(None)
            except queue.Full:
                pass
        for name, sender in self.senders.items():
            sender.thread.join(max(0.0, deadline - time.monotonic()))
            if sender.thread.is_alive() and sender.error is None:
                sender.error = f"it had not sent everything after {CLOSE_WAIT_S:.0f} s"
        self._tell()


def _read_ids(out: Path) -> dict[str, Any]:
    path = out / IDS
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > 65536:
            return {}
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def open_trackers(out: Path, config: dict[str, Any], start_step: int, resumed: bool,
                  warn: Callable[[str], None]) -> Trackers | None:
    """Open the trackers ``config["logger"]`` names (None if it names none), keep their ids in
    ``trackers.json`` and, on resume, send each the lines of ``metrics.jsonl`` it lacks (the file
    holds the lines before ``start_step`` by now). A tracker that cannot open is one warning."""
    wanted = [name for name in names(config) if name in REMOTE]
    if not wanted:
        return None

    saved = _read_ids(out) if resumed else {}
    run_name = out.name
    senders, ids = {}, {}
    for name in wanted:
        try:
            tracker = TRACKERS[name](out, config, saved.get(name) if isinstance(saved.get(name), dict) else {},
                                     run_name)
        except BaseException as exc:  # noqa: BLE001  (no server, no login, offline: the run goes on)
            if isinstance(exc, KeyboardInterrupt):
                raise
            warn(f"logger {name} could not start ({one_line(f'{type(exc).__name__}: {exc}')[:300]}); the run goes on "
                 "without it, its files intact")
            continue
        senders[name], ids[name] = _Sender(tracker, tracker.last_step), tracker.ids
    if ids:
        remove_stale_temps(out / IDS)
        write_atomic_text(out / IDS, json.dumps({**saved, **ids}, indent=2) + "\n")
    trackers = Trackers(out, senders, warn)
    if resumed and (out / METRICS).is_file():  # the lines a tracker lacks below the step this run continues from
        lines = [line for _, line in _lines(out / METRICS, skip_bad=[]) if line["step"] < start_step]
        for sender in senders.values():
            backfill = [line for line in lines if sender.skip_through is None or line["step"] > sender.skip_through]
            for line in backfill:
                values = {k: float(v) for k, v in line.items() if k not in ("step", "wall_time") and v is not None}
                sender.put(lambda t=sender.tracker, v=values, s=line["step"], w=float(line.get("wall_time") or 0):
                           t.log(v, s, w))
    return trackers


def send_videos(out: Path, config: dict[str, Any], paths: list[Path], lock: Any = None) -> None:
    """``her-run load=RUN video=true``: the recorded videos to the run's tracker runs (ids in its
    ``trackers.json``); a tracker that fails is one warning, the videos stay in the folder."""
    if not any(name in REMOTE for name in names(config)) or not (out / IDS).is_file():
        return

    if lock is not None and hasattr(lock, "lost") and lock.lost() is not None:
        return
    opened = open_trackers(out, config, 0, True, warn)
    if opened is not None:
        for path in paths:
            opened.video(Path(path))
        opened.close("FINISHED")


# ---- a sweep's MLflow parent run -------------------------------------------------------------

class SweepParent:
    """Hydra callback: as a multirun that logs to MLflow starts, find (by its tag, when the sweep is rerun
    in the same folder) or create the parent run of its jobs, and name it to them (``HER_RL_MLFLOW_PARENT``);
    end it with the multirun. A failure is one warning: the jobs still share the tag ``her_rl.sweep``."""

    def __init__(self) -> None:
        self.client, self.run_id = None, None

    def on_multirun_start(self, config: Any, **kwargs: Any) -> None:
        os.environ.pop(PARENT_ENV, None)
        try:
            cfg = OmegaConf.to_container(config, resolve=False)
            if "mlflow" not in names(cfg) or not isinstance(cfg.get("logger"), list):
                return
            settings = OmegaConf.to_container(config.mlflow, resolve=True) if "mlflow" in config else {}
            uri = _mlflow_uri({"mlflow": settings})
            if not uri:
                return  # each job refuses the run with one line
            sweep = str(Path(str(config.hydra.sweep.dir)).absolute())
            _import("mlflow")
            from mlflow.tracking import MlflowClient  # optional extra

            client = MlflowClient(tracking_uri=uri)
            experiment = settings.get("experiment") or "her-rl"
            found = client.get_experiment_by_name(experiment)
            experiment_id = found.experiment_id if found is not None else client.create_experiment(experiment)
            sweep_tag = sweep.replace("'", "")
            runs = client.search_runs([experiment_id], f"tags.`her_rl.sweep_parent` = '{sweep_tag}'", max_results=1)
            run = runs[0] if runs else client.create_run(
                experiment_id, run_name=Path(sweep).name, tags={"her_rl.sweep_parent": sweep_tag, "her_rl.sweep": sweep})
            if runs:
                client.update_run(run.info.run_id, status="RUNNING")
            self.client, self.run_id = client, run.info.run_id
            os.environ[PARENT_ENV] = self.run_id
        except Exception as exc:  # noqa: BLE001  (the sweep runs without a parent run)

            print(printable(f"her-run: warning: no MLflow parent run for this sweep ({one_line(exc)[:200]}); its jobs "
                            "share the tag her_rl.sweep"), file=sys.stderr, flush=True)

    def on_multirun_end(self, config: Any, **kwargs: Any) -> None:
        if self.client is not None:
            try:
                self.client.set_terminated(self.run_id, status="FINISHED")
            except Exception:  # noqa: BLE001
                pass
        os.environ.pop(PARENT_ENV, None)

    def __getattr__(self, name: str):  # Hydra calls every hook; the others do nothing here
        if name.startswith("on_"):
            return lambda *args, **kwargs: None
        raise AttributeError(name)


__all__ = ["IDS", "NAMES", "SweepParent", "Trackers", "check_loggers", "names", "open_trackers", "send_videos"]
