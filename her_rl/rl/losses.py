"""Policy-gradient losses: vanilla PG (REINFORCE), PPO clipped surrogate, entropy bonus."""
from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn as nn

from .nets import Action, DiscreteAction
from .returns import Rewards

__all__ = ["PGLoss", "ClipLoss", "EntropyLoss"]


def _log_probs(x: Any) -> torch.Tensor:
    if isinstance(x, DiscreteAction):
        return x.log_prob
    if isinstance(x, torch.Tensor):
        return x
    raise TypeError(f"expected log-prob tensor or DiscreteAction, got {type(x).__name__}")


def _weights(x: Any, like: torch.Tensor, gamma: float | None = None) -> torch.Tensor:
    if isinstance(x, Rewards):
        # A Rewards container holds raw rewards; turn them into reward-to-go.
        x = x.discounted(1.0 if gamma is None else gamma)
    if not isinstance(x, torch.Tensor):
        x = torch.as_tensor(np.asarray(x), dtype=like.dtype)
    # Returns/advantages are targets: never backpropagate into them.
    return x.detach().to(device=like.device, dtype=like.dtype)


class PGLoss(nn.Module):
    """REINFORCE loss ``-(log_probs * returns)`` reduced by ``reduction`` ("mean" | "sum").

    ``log_probs`` may be a tensor or a :class:`DiscreteAction` (its ``log_prob`` is used);
    ``returns`` a tensor/array of returns or advantages, or a :class:`Rewards` container
    (converted with ``Rewards.discounted(gamma)``, ``gamma`` given here, default 1).
    """

    def __init__(self, reduction: str = "mean", gamma: float | None = None):
        super().__init__()
        if reduction not in ("mean", "sum"):
            raise ValueError(f"reduction must be 'mean' or 'sum', got {reduction!r}")
        self.reduction, self.gamma = reduction, gamma

    def forward(self, log_probs: Any, returns: Any) -> torch.Tensor:
        """Loss whose gradient is the REINFORCE estimator; ``returns`` get no gradient."""
        lp = _log_probs(log_probs)
        ret = _weights(returns, lp, self.gamma)
        if ret.shape != lp.shape:
            ret = ret.reshape(lp.shape)  # e.g. [T, 1] vs [T]: fail loudly on a true mismatch
        loss = -(lp * ret)
        return loss.mean() if self.reduction == "mean" else loss.sum()


class ClipLoss(nn.Module):
    """PPO clipped surrogate ``-mean(min(r A, clip(r, 1-eps, 1+eps) A))``, ``r = exp(lp - old_lp)``.

    ``eps`` passed to ``forward`` overrides the constructor's (for clip-range schedules).
    ``old_log_probs`` and ``advantages`` are treated as constants (detached).
    """

    def __init__(self, eps: float = 0.2):
        super().__init__()
        self.eps = float(eps)

    def forward(self, log_probs: Any, old_log_probs: Any, advantages: Any,
                eps: float | None = None) -> torch.Tensor:
        """Clipped surrogate loss (to minimise); zero gradient where the ratio is clipped."""
        lp = _log_probs(log_probs)
        old = _weights(_log_probs(old_log_probs) if isinstance(old_log_probs, Action) else old_log_probs, lp)
        adv = _weights(advantages, lp)
        e = self.eps if eps is None else float(eps)
        ratio = torch.exp(lp - old.reshape(lp.shape))
        adv = adv.reshape(lp.shape)
        surr = torch.min(ratio * adv, ratio.clamp(1.0 - e, 1.0 + e) * adv)
        return -surr.mean()

    @staticmethod
    def clip_fraction(log_probs: torch.Tensor, old_log_probs: torch.Tensor, eps: float) -> float:
        """Fraction of samples whose ratio lies outside ``[1-eps, 1+eps]`` (diagnostic)."""
        with torch.no_grad():
            r = torch.exp(_log_probs(log_probs) - _log_probs(old_log_probs))
            return float(((r - 1.0).abs() > eps).float().mean())


class EntropyLoss(nn.Module):
    """``-mean(entropy)``: minimising it maximises policy entropy (exploration bonus).

    Accepts an entropy tensor, a ``torch.distributions.Distribution`` or an :class:`Action`.
    """

    def forward(self, x: Any) -> torch.Tensor:
        """Negative mean entropy of ``x``."""
        if isinstance(x, torch.distributions.Distribution):
            ent = x.entropy()
        elif isinstance(x, Action):
            ent = x.entropy
            ent = ent() if callable(ent) else ent  # property on DiscreteAction, method on ContinuousAction
        elif isinstance(x, torch.Tensor):
            ent = x
        else:
            raise TypeError(f"expected entropy tensor, Distribution or Action, got {type(x).__name__}")
        return -ent.mean()
