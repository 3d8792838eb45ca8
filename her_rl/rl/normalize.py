"""Running mean / variance statistics (observation and reward whitening)."""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

__all__ = ["RunningMeanStd"]


class RunningMeanStd:
    """Streaming mean and variance of vectors of a fixed ``shape``.

    ``update(batch)`` merges a batch (leading dim = samples) with the parallel-variance
    formula (Chan et al.), so the result equals the statistics of all data seen, up to
    the ``epsilon`` pseudo-count used to avoid division by zero before any update.
    Stats are kept in float64 numpy; ``normalize`` returns the input's type.
    """

    def __init__(self, shape=(), epsilon: float = 1e-4):
        self.shape = tuple(shape) if not isinstance(shape, int) else (shape,)
        self.mean = np.zeros(self.shape, dtype=np.float64)
        self.var = np.ones(self.shape, dtype=np.float64)
        self.count = float(epsilon)

    @staticmethod
    def _np(x: Any) -> np.ndarray:
        if isinstance(x, torch.Tensor):
            return x.detach().cpu().to(torch.float64).numpy()
        return np.asarray(x, dtype=np.float64)

    def update(self, batch: Any) -> None:
        """Merge the statistics of ``batch`` (shape ``[B, *shape]``) into the running ones."""
        x = self._np(batch).reshape((-1, *self.shape))
        if x.shape[0] == 0:
            return
        self.update_from_moments(x.mean(axis=0), x.var(axis=0), x.shape[0])

    def update_from_moments(self, batch_mean, batch_var, batch_count: int) -> None:
        """Parallel-variance merge given a batch's mean, (population) var and count."""
        batch_mean = np.asarray(batch_mean, dtype=np.float64)
        batch_var = np.asarray(batch_var, dtype=np.float64)
        delta = batch_mean - self.mean
        tot = self.count + batch_count
        new_mean = self.mean + delta * batch_count / tot
        m2 = self.var * self.count + batch_var * batch_count + delta**2 * self.count * batch_count / tot
        # Keep ndarray type even for shape () so state_dict/torch.from_numpy always work.
        self.mean = np.asarray(new_mean, dtype=np.float64).reshape(self.shape)
        self.var = np.asarray(m2 / tot, dtype=np.float64).reshape(self.shape)
        self.count = float(tot)

    def forget(self, factor: float) -> None:
        """Weigh the data seen so far by ``factor`` in (0, 1] in later merges: applied once per
        update, it turns all-history statistics into exponentially weighted ones."""
        if not 0.0 < factor <= 1.0:
            raise ValueError(f"forget factor must lie in (0, 1], got {factor}")
        self.count *= float(factor)

    @property
    def std(self) -> np.ndarray:
        """Standard deviation ``sqrt(var)`` (float64 numpy)."""
        return np.sqrt(self.var)

    def normalize(self, x: Any, clip: float | None = None, eps: float = 1e-8) -> Any:
        """Whiten ``(x - mean) / sqrt(var + eps)``, optionally clipped to ``[-clip, clip]``.

        numpy in -> numpy out (float32), torch in -> torch out (same dtype/device as x).
        """
        if isinstance(x, torch.Tensor):
            dt = x.dtype if x.is_floating_point() else torch.float32
            mean = torch.as_tensor(self.mean, dtype=dt, device=x.device)
            std = torch.as_tensor(np.sqrt(self.var + eps), dtype=dt, device=x.device)
            y = (x.to(dt) - mean) / std
            return y.clamp(-clip, clip) if clip is not None else y
        y = ((np.asarray(x, dtype=np.float64) - self.mean) / np.sqrt(self.var + eps)).astype(np.float32)
        return np.clip(y, -clip, clip) if clip is not None else y

    def state_dict(self) -> dict:
        """Tensors and floats only, so checkpoints load with ``torch.load(weights_only=True)``."""
        return {"mean": torch.from_numpy(self.mean.copy()), "var": torch.from_numpy(self.var.copy()),
                "count": float(self.count)}

    def load_state_dict(self, state: dict) -> None:
        """Restore statistics saved by :meth:`state_dict`."""
        self.mean = self._np(state["mean"]).reshape(self.shape).copy()
        self.var = self._np(state["var"]).reshape(self.shape).copy()
        self.count = float(state["count"])

    def __repr__(self) -> str:
        return f"RunningMeanStd(shape={self.shape}, count={self.count:.1f})"
