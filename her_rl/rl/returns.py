"""Discounted returns, a per-episode reward container, GAE(lambda) and advantage whitening."""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

__all__ = ["discounted_returns", "Rewards", "gae", "whiten"]


def _as_tensor(x: Any, dtype=torch.float32) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        return x.to(dtype)
    return torch.as_tensor(np.asarray(x), dtype=dtype)


def discounted_returns(rewards: Any, gamma: float, dones: Any = None, normalize: bool = False) -> Any:
    """Reward-to-go ``G_t = r_t + gamma * (1 - done_t) * G_{t+1}`` with ``G_T = 0``.

    ``rewards`` is ``[T]`` or ``[T, N]`` (N parallel envs). ``dones[t]`` True means the
    episode ended after step t, so no return flows back across it. With ``normalize``
    the returns are standardised over all elements (a common REINFORCE baseline).
    torch in -> torch out (float32); anything else -> numpy float32.
    """
    is_torch = isinstance(rewards, torch.Tensor)
    r = _as_tensor(rewards)
    keep = torch.ones_like(r) if dones is None else 1.0 - _as_tensor(dones).reshape(r.shape)
    out = torch.empty_like(r)
    running = torch.zeros_like(r[0]) if r.shape[0] > 0 else None
    for t in range(r.shape[0] - 1, -1, -1):  # reverse-time recursion; vectorised over N
        running = r[t] + gamma * keep[t] * running
        out[t] = running
    if normalize and out.numel() > 1:
        out = (out - out.mean()) / (out.std() + 1e-8)
    return out if is_torch else out.numpy()


class Rewards:
    """Collects the rewards (and optional done flags) of one or more episodes.

    >>> rw = Rewards(); rw.append(1.0); rw.append(1.0, done=True)
    >>> rw.sum(), len(rw), rw.discounted(0.5)
    Each step's reward may be a scalar or an ``[N]`` array (vectorised envs).
    """

    def __init__(self, rewards=None, dones=None):
        self._r: list = list(rewards) if rewards is not None else []
        self._d: list = list(dones) if dones is not None else [False] * len(self._r)
        if len(self._d) != len(self._r):
            raise ValueError("rewards and dones must have the same length")

    def append(self, r, done=False) -> None:
        """Add the reward of one step; ``done`` marks the last step of an episode."""
        if isinstance(r, torch.Tensor):
            r = r.detach().cpu().numpy()
        if isinstance(done, torch.Tensor):
            done = done.detach().cpu().numpy()
        self._r.append(r)
        self._d.append(done)

    push = append

    def __len__(self) -> int:
        return len(self._r)

    def __getitem__(self, key):
        if isinstance(key, slice):
            return Rewards(self._r[key], self._d[key])
        return self._r[key]

    def __iter__(self):
        return iter(self._r)

    def numpy(self) -> np.ndarray:
        """Rewards as a float32 array ``[T]`` or ``[T, N]``."""
        return np.asarray(self._r, dtype=np.float32)

    def dones(self) -> np.ndarray:
        """Done flags as a bool array shaped like :meth:`numpy`."""
        r = self.numpy()
        if not len(r):
            return np.zeros(r.shape, dtype=bool)
        # A scalar done for a step applies to every env of that step.
        return np.stack([np.broadcast_to(np.asarray(d, dtype=bool), r.shape[1:]) for d in self._d])

    def sum(self) -> float:
        """Undiscounted total (summed over all steps and envs)."""
        return float(self.numpy().sum()) if self._r else 0.0

    def discounted(self, gamma: float, normalize: bool = False) -> torch.Tensor:
        """Done-aware discounted returns as a float32 tensor (see :func:`discounted_returns`)."""
        if not self._r:
            return torch.zeros(0)
        return discounted_returns(torch.from_numpy(self.numpy()), gamma,
                                  dones=torch.from_numpy(self.dones().copy()), normalize=normalize)

    def clear(self) -> None:
        """Forget all stored steps."""
        self._r.clear()
        self._d.clear()

    def __repr__(self) -> str:
        return f"Rewards(len={len(self)}, sum={self.sum():.3f})"


def gae(rewards, values, next_values, terminated, dones, gamma: float, lam: float):
    """Generalised Advantage Estimation over a ``[T, N]`` rollout.

    ``next_values[t]`` is V of the TRUE next observation of step t (for a truncated
    step: the final observation before the auto-reset). Then
    ``delta_t = r_t + gamma * (1 - terminated_t) * next_values_t - values_t`` and
    ``A_t = delta_t + gamma * lam * (1 - dones_t) * A_{t+1}`` where
    ``dones = terminated | truncated`` stops the recursion at episode boundaries.
    Truncation is therefore bootstrapped, termination is not.
    Returns ``(advantages, returns = advantages + values)`` as float32 tensors
    (numpy inputs accepted); no gradient flows through them.
    """
    with torch.no_grad():
        r = _as_tensor(rewards)
        v = _as_tensor(values).reshape(r.shape)
        nv = _as_tensor(next_values).reshape(r.shape)
        term = _as_tensor(terminated).reshape(r.shape)
        cont = 1.0 - _as_tensor(dones).reshape(r.shape)
        delta = r + gamma * (1.0 - term) * nv - v  # vectorised over all T, N
        adv = torch.empty_like(r)
        last = torch.zeros_like(r[0]) if r.shape[0] > 0 else None
        for t in range(r.shape[0] - 1, -1, -1):
            last = delta[t] + gamma * lam * cont[t] * last
            adv[t] = last
        return adv, adv + v


def whiten(x: torch.Tensor) -> torch.Tensor:
    """``x`` standardised over its elements (advantages over a batch); one element is left as it is."""
    return (x - x.mean()) / (x.std() + 1e-8) if len(x) > 1 else x
