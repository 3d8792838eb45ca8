"""Exploration noise for continuous actions (DDPG/TD3 style)."""
from __future__ import annotations

import numpy as np

__all__ = ["OUNoise", "GaussianNoise", "with_random_actions"]


class OUNoise:
    """Ornstein-Uhlenbeck process ``dx = theta (mu - x) dt + sigma sqrt(dt) dW`` (Euler-Maruyama).

    Temporally correlated noise; ``sample()`` advances one step and returns the state
    (float64 array of shape ``size``). Stationary law: mean ``mu``, std
    ``sigma / sqrt(2 theta)`` (in continuous time; the discrete scheme is within O(theta dt)).
    ``reset()`` puts the state back to ``mu`` (call at episode start).
    """

    def __init__(self, size, theta: float = 0.15, sigma: float = 0.2, mu: float = 0.0,
                 dt: float = 1e-2, seed: int | None = None):
        self.size = (size,) if isinstance(size, (int, np.integer)) else tuple(size)
        self.theta, self.sigma, self.dt = float(theta), float(sigma), float(dt)
        self.mu = np.broadcast_to(np.asarray(mu, dtype=np.float64), self.size).copy()
        self.rng = np.random.default_rng(seed)
        self.reset()

    def reset(self) -> None:
        """Restart the process at its mean ``mu``."""
        self.state = self.mu.copy()

    def sample(self) -> np.ndarray:
        """Advance one step of length ``dt`` and return (a copy of) the new state."""
        dx = self.theta * (self.mu - self.state) * self.dt \
            + self.sigma * np.sqrt(self.dt) * self.rng.standard_normal(self.size)
        self.state = self.state + dx
        return self.state.copy()

    __call__ = sample

    def __repr__(self) -> str:
        return f"OUNoise(size={self.size}, theta={self.theta}, sigma={self.sigma}, dt={self.dt})"


class GaussianNoise:
    """Independent ``N(0, sigma^2)`` noise of shape ``size`` per ``sample()`` call."""

    def __init__(self, size, sigma: float = 0.1, seed: int | None = None):
        self.size = (size,) if isinstance(size, (int, np.integer)) else tuple(size)
        self.sigma = float(sigma)
        self.rng = np.random.default_rng(seed)

    def reset(self) -> None:
        """No state to reset (kept for interface parity with :class:`OUNoise`)."""

    def sample(self) -> np.ndarray:
        """Draw one noise vector."""
        return self.sigma * self.rng.standard_normal(self.size)

    __call__ = sample

    def __repr__(self) -> str:
        return f"GaussianNoise(size={self.size}, sigma={self.sigma})"


def with_random_actions(a: np.ndarray, generator: np.random.Generator, share: float) -> np.ndarray:
    """``a`` (a batch of actions in [-1, 1], one per row) with each row replaced, with probability
    ``share``, by a uniformly random action (the HER paper's exploration), in place."""
    random = generator.random(len(a)) < share
    a[random] = generator.uniform(-1.0, 1.0, size=(int(random.sum()), a.shape[1]))
    return a
