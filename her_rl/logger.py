"""Run logging: TensorBoard scalars under CleanRL-style tags, and a live progress bar.

Whenever the folder already holds events, the writer is opened with ``purge_step`` = the first
step this run will log (the checkpoint's step + 1 on resume, 0 for a fresh start in a folder whose
earlier run never reached a checkpoint), so TensorBoard drops anything logged after the state this
run continues from: no step is lost or shown twice.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from torch.utils.tensorboard import SummaryWriter
from tqdm import tqdm


class RunLogger:
    def __init__(self, out_dir: Path, total_steps: int, start_step: int = 0, progress: bool = True, desc: str = ""):
        log_dir = Path(out_dir) / "tb"
        purge = start_step if log_dir.exists() else None  # nothing to purge in a new folder
        self.writer = SummaryWriter(log_dir=str(log_dir), purge_step=purge)
        self.bar = tqdm(
            total=total_steps, initial=start_step, desc=desc, unit="step", unit_scale=True,
            disable=not progress, file=sys.stderr, dynamic_ncols=True, smoothing=0.1,
        )
        self.postfix: dict[str, str] = {}

    def scalars(self, values: dict[str, float], step: int) -> None:
        for tag, value in values.items():
            self.writer.add_scalar(tag, value, step)

    def advance(self, steps: int, **postfix: float) -> None:
        self.postfix.update({k: f"{v:.3g}" for k, v in postfix.items()})
        self.bar.set_postfix(self.postfix, refresh=False)
        self.bar.update(steps)

    def config(self, config_yaml: str) -> None:
        """The resolved config as text (TensorBoard's Text tab)."""
        self.writer.add_text("config", "```\n" + config_yaml + "\n```", 0)

    def hparams(self, hparams: dict[str, Any], metrics: dict[str, float]) -> None:
        """The run's hyperparameters with its final metrics (TensorBoard's HParams tab), in this run's
        own event files, so a sweep's runs compare side by side under ``--logdir <sweep>``."""
        from torch.utils.tensorboard.summary import hparams as hparams_summary

        clean = {k: v if isinstance(v, (bool, int, float, str)) else str(v) for k, v in hparams.items()}
        for summary in hparams_summary(clean, metrics):
            self.writer.file_writer.add_summary(summary)
        for tag, value in metrics.items():
            self.writer.add_scalar(tag, value, 0)

    def flush(self) -> None:
        self.writer.flush()

    def close(self) -> None:
        self.bar.close()
        self.writer.close()


def hparams_of(config: dict[str, Any], overrides: list[str] | None) -> dict[str, Any]:
    """What defines a run for the HParams tab: algo, env, seed, every scalar algo key, and the keys
    given on the command line (the swept ones among them)."""
    out: dict[str, Any] = {"algo": config["algo"]["name"], "env": config["env"]["name"],
                           "env_id": config["env"]["id"], "seed": config["seed"]}
    out.update({f"algo.{k}": v for k, v in config["algo"].items() if k not in ("name", "_target_")})
    for item in overrides or []:
        key, _, value = item.lstrip("+~").partition("=")
        if not key.startswith("hydra"):
            out.setdefault(key, value)
    return out


def final_metrics(results: dict[str, Any]) -> dict[str, float]:
    """The numbers a sweep is compared by (unsolved: solved_at_env_steps = -1)."""
    metrics = {"hparams/env_steps": float(results["env_steps"]), "hparams/wall_time_s": float(results["wall_time_s"]),
               "hparams/solved": float(bool(results["solved"])),
               "hparams/solved_at_env_steps": float(results["solved_at_env_steps"] or -1)}
    for key in ("eval_success_rate", "eval_return"):
        if results.get(key) is not None:
            metrics[f"hparams/{key}"] = float(results[key])
    return metrics
