"""Run logging: TensorBoard scalars under CleanRL-style tags, and a live progress bar.

Whenever the folder already holds events, the writer is opened with ``purge_step`` = the first
step this run will log (the checkpoint's step + 1 on resume, 0 for a fresh start in a folder whose
earlier run never reached a checkpoint), so TensorBoard drops anything logged after the state this
run continues from: no step is lost or shown twice.
"""

from __future__ import annotations

import sys
from pathlib import Path

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

    def flush(self) -> None:
        self.writer.flush()

    def close(self) -> None:
        self.bar.close()
        self.writer.close()
