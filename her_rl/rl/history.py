"""Episode-return bookkeeping and a learning-curve plot."""
from __future__ import annotations

import os

import numpy as np

__all__ = ["RewardHistory"]


class RewardHistory:
    """Per-episode totals with windowed running statistics.

    ``append(total)`` once per episode; ``running_mean`` / ``running_std`` are over the
    last ``window`` episodes; ``plot(path)`` saves a PNG (raw points, running mean,
    +-std band) without needing a display.
    """

    def __init__(self, window: int = 100):
        if window <= 0:
            raise ValueError("window must be positive")
        self.window = int(window)
        self.totals: list[float] = []

    def append(self, total: float) -> None:
        """Record one episode's total reward."""
        self.totals.append(float(total))

    push = append

    def __len__(self) -> int:
        return len(self.totals)

    def __getitem__(self, key):
        return self.totals[key]

    @property
    def running_mean(self) -> float:
        """Mean of the last ``window`` totals (nan if empty)."""
        return float(np.mean(self.totals[-self.window:])) if self.totals else float("nan")

    @property
    def running_std(self) -> float:
        """Population std of the last ``window`` totals (nan if empty)."""
        return float(np.std(self.totals[-self.window:])) if self.totals else float("nan")

    def running_curves(self) -> tuple[np.ndarray, np.ndarray]:
        """Running mean and std after every episode (windows shorter at the start)."""
        x = np.asarray(self.totals, dtype=np.float64)
        n = np.minimum(np.arange(1, len(x) + 1), self.window)
        c1 = np.concatenate([[0.0], np.cumsum(x)])
        c2 = np.concatenate([[0.0], np.cumsum(x * x)])
        hi = np.arange(1, len(x) + 1)
        s1, s2 = c1[hi] - c1[hi - n], c2[hi] - c2[hi - n]
        mean = s1 / n
        std = np.sqrt(np.maximum(s2 / n - mean**2, 0.0))  # clamp tiny negative round-off
        return mean, std

    def plot(self, path: str | os.PathLike, title: str | None = None) -> str:
        """Save the learning curve to ``path`` (PNG) and return the path."""
        # Figure + Agg canvas directly: works headless and leaves pyplot's global backend alone.
        # lazy: matplotlib costs every importer of her_rl.rl (her_rl.load too) 0.6 s, and only a plot needs it
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure

        fig = Figure(figsize=(7, 4))
        FigureCanvasAgg(fig)
        ax = fig.add_subplot(111)
        ep = np.arange(1, len(self.totals) + 1)
        if len(ep):
            mean, std = self.running_curves()
            ax.plot(ep, self.totals, ".", ms=3, alpha=0.4, label="episode return")
            ax.plot(ep, mean, lw=2, label=f"running mean ({self.window})")
            ax.fill_between(ep, mean - std, mean + std, alpha=0.25, label="+-std")
            ax.legend(loc="best")
        ax.set_xlabel("episode")
        ax.set_ylabel("return")
        ax.set_title(title or "reward history")
        ax.grid(alpha=0.3)
        d = os.path.dirname(os.fspath(path))
        if d:
            os.makedirs(d, exist_ok=True)
        fig.savefig(path, dpi=100, bbox_inches="tight")
        return os.fspath(path)

    def __repr__(self) -> str:
        return f"RewardHistory(episodes={len(self)}, running_mean={self.running_mean:.2f})"
