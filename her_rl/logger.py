"""Run logging: TensorBoard scalars under CleanRL-style tags, and a live progress bar.

On resume the writer is opened with ``purge_step`` = the checkpoint's step, so TensorBoard drops
anything a killed run logged after its last checkpoint: no step is lost or shown twice.
"""

from __future__ import annotations

import sys
from pathlib import Path

from torch.utils.tensorboard import SummaryWriter
from tqdm import tqdm


class RunLogger:
    def __init__(self, out_dir: Path, total_steps: int, start_step: int = 0, progress: bool = True, desc: str = ""):
        self.writer = SummaryWriter(log_dir=str(Path(out_dir) / "tb"), purge_step=start_step if start_step > 0 else None)
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
