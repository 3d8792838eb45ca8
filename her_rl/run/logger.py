"""Run logging: TensorBoard scalars under CleanRL-style tags, the config and the HParams tab, and
the same scalars in ``metrics.jsonl`` (:mod:`her_rl.folder.metrics`), which needs no TensorBoard to read.

Whenever the folder already holds events, the writer is opened with ``purge_step`` = the first
step this run will log (the checkpoint's step + 1 on resume, 0 for a fresh start in a folder whose
earlier run never reached a checkpoint), so TensorBoard drops anything logged after the state this
run continues from: no step is lost or shown twice. ``metrics.jsonl`` drops those lines on open.
The trainer flushes both (:meth:`RunLogger.flush`) before it writes each checkpoint, so what a
checkpoint covers is on disk even when the run is then SIGKILLed.

``logger=`` picks the loggers: TensorBoard (``tb/``, the default) and the experiment trackers of
:mod:`her_rl.run.trackers` (W&B, MLflow), which get each line of ``metrics.jsonl`` as it is written.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import yaml
from tensorboard.plugins.hparams.api_pb2 import DataType
from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData
from torch.utils.tensorboard import SummaryWriter
from torch.utils.tensorboard.summary import hparams as hparams_summary

from her_rl.config import saved
from her_rl.folder.metrics import MetricsWriter
from her_rl.run import trackers


class RunLogger:
    """``config``: the run's (``logger``, ``wandb``, ``mlflow``; None: TensorBoard alone); ``resumed``: the
    trackers continue the runs whose ids the folder keeps."""

    def __init__(self, out_dir: Path, start_step: int = 0, config: dict[str, Any] | None = None,
                 resumed: bool = False, warn: Any = None):
        log_dir = Path(out_dir) / "tb"
        purge = start_step if log_dir.exists() else None  # nothing to purge in a new folder
        self.metrics = MetricsWriter(Path(out_dir), start_step)
        self.writer = SummaryWriter(log_dir=str(log_dir), purge_step=purge) \
            if "tensorboard" in trackers.names(config) else None
        self.log_dir, self._held = log_dir, _identity(log_dir)
        self.events = _hold_event_file(self.writer) if self.writer is not None else None
        self.trackers = trackers.open_trackers(Path(out_dir), config, start_step, resumed, warn or print) \
            if config is not None else None
        if self.trackers is not None:
            self.metrics.on_line = self.trackers.line

    def lost(self) -> str | None:
        """How ``tb/`` stopped being the folder the event file was opened in (a link or another folder put
        in its place, or it is gone), or why its events could not be written; else None."""
        if self.writer is None:
            return None
        if _identity(self.log_dir) != self._held:
            return f"its TensorBoard folder {self.log_dir} was replaced or removed"
        if self.events is not None and self.events.error is not None:
            return f"its TensorBoard events could not be written ({self.events.error.strerror or self.events.error})"
        return None

    def scalars(self, values: dict[str, float], step: int) -> None:
        if self.writer is not None:
            for tag, value in values.items():
                self.writer.add_scalar(tag, value, step)
        self.metrics.add(values, step)

    def config(self, config_yaml: str, step: int = 0) -> None:
        """The resolved config as text (TensorBoard's Text tab), at the step it took effect (the trackers
        got it as they opened)."""
        if self.writer is not None:
            self.writer.add_text("config", "```\n" + config_yaml + "\n```", step)

    def results(self, results: dict[str, Any]) -> None:
        """The final results (``results.json``'s numbers), for the trackers."""
        if self.trackers is not None:
            self.trackers.results(results)

    def hparams(self, hparams: dict[str, Any], metrics: dict[str, float]) -> None:
        """The run's hyperparameters with its final metrics (TensorBoard's HParams tab), in this run's
        own event files, so a sweep's runs compare side by side under ``--logdir <sweep>``."""
        if self.writer is None:
            return
        clean = {k: v if isinstance(v, (bool, int, float, str)) else str(v) for k, v in hparams.items()}
        flags = {k: v for k, v in clean.items() if isinstance(v, bool)}
        for summary in hparams_summary(clean, metrics):
            self.writer.file_writer.add_summary(_with_bools(summary, flags))
        for tag, value in metrics.items():
            self.writer.add_scalar(tag, value, 0)

    def flush(self) -> None:
        if self.writer is not None:
            self.writer.flush()
        self.metrics.flush()

    def close(self, status: str = "FINISHED") -> None:
        """``status``: how the run ended, for the trackers (FINISHED, KILLED by a stop signal, FAILED)."""
        if self.writer is not None:
            self.writer.close()
        self.metrics.close()
        if self.trackers is not None:
            self.trackers.close(status)


class _HeldFile:
    """The event file written through a descriptor opened once: TensorBoard's own file appends by path at
    every flush, from its writer thread, so a link put in place of ``tb/`` mid-run would lead its events
    into another folder. A write that fails is kept, not raised in that thread: the run tells it."""

    def __init__(self, path: str):
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW)
        self.error: OSError | None = None
        self.closed = False

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view and self.error is None:
            try:
                view = view[os.write(self.fd, view):]
            except OSError as exc:
                self.error = exc

    def flush(self) -> None:
        pass

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            os.close(self.fd)


def _hold_event_file(writer: SummaryWriter) -> _HeldFile | None:
    """Swap the event file TensorBoard writes by path for :class:`_HeldFile` (its first event, written
    by path as the writer opened, is on disk); None where TensorBoard's internals differ."""
    try:
        events = writer.file_writer.event_writer
        records, lock = events._async_writer._writer, events._async_writer._lock
        with lock:
            records._writer.flush()
            held = _HeldFile(events._file_name)
            records._writer.close()
            records._writer = events._general_file_writer = held
        return held
    except (AttributeError, OSError):
        return None


def _identity(folder: Path) -> tuple[int, int] | None:
    try:
        st = os.lstat(folder)
    except OSError:
        return None
    return (st.st_dev, st.st_ino) if stat.S_ISDIR(st.st_mode) else None


def _with_bools(summary, flags: dict[str, bool]):
    """torch's ``hparams`` logs a bool as a number (``isinstance(True, int)``): mark it a bool."""
    for value in summary.value:
        data = HParamsPluginData.FromString(value.metadata.plugin_data.content)
        if data.HasField("session_start_info"):
            for key, flag in flags.items():
                data.session_start_info.hparams[key].bool_value = flag
        elif data.HasField("experiment"):
            for info in data.experiment.hparam_infos:
                if info.name in flags:
                    info.type = DataType.Value("DATA_TYPE_BOOL")
        value.metadata.plugin_data.content = data.SerializeToString()
    return summary


def hparams_of(config: dict[str, Any], overrides: list[str] | None) -> dict[str, Any]:
    """What defines a run for the HParams tab: algo, env, seed, every scalar algo key, and the keys
    given on the command line (the swept ones among them), typed so TensorBoard sorts and plots
    numbers as numbers: the run's own value of the key, else the override read as YAML."""
    out: dict[str, Any] = {"algo": config["algo"]["name"], "env": config["env"]["name"],
                           "env_id": config["env"]["id"], "seed": config["seed"]}
    out.update({f"algo.{k}": v for k, v in config["algo"].items() if k not in ("name", "_target_")})
    for item in overrides or []:
        key, _, value = item.lstrip("+~").partition("=")
        if saved.is_setting(key):  # bookkeeping overrides are not hyperparameters
            out.setdefault(key, _typed(config, key, value))
    return out


def _typed(config: dict[str, Any], key: str, text: str) -> Any:
    node: Any = config
    for part in key.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    if isinstance(node, (bool, int, float, str)):  # the value the run used (``lr=1e-3``: a float there)
        return node
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        return text
    return value if isinstance(value, (bool, int, float, str)) else text


def final_metrics(results: dict[str, Any]) -> dict[str, float]:
    """The numbers a sweep is compared by (unsolved: solved_at_env_steps = -1)."""
    metrics = {"hparams/env_steps": float(results["env_steps"]), "hparams/wall_time_s": float(results["wall_time_s"]),
               "hparams/solved": float(bool(results["solved"])),
               "hparams/solved_at_env_steps": float(results["solved_at_env_steps"] or -1)}
    for key in ("eval_success_rate", "eval_return"):
        if results.get(key) is not None:
            metrics[f"hparams/{key}"] = float(results[key])
    return metrics
