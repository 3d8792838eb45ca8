"""Continuous policy outputs: a diagonal Gaussian, optionally tanh-squashed, and the head that makes it.

:class:`ContinuousAction` samples reparameterised actions and scores them (``log_prob`` with the
tanh change of variables, ``entropy``, ``mode``); :class:`NormalPolicyHead` maps features to one,
with a free (PPO) or state-dependent (SAC) log-std.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from .action_base import Action

__all__ = ["ContinuousAction", "NormalPolicyHead"]


_LOG2 = math.log(2.0)


class ContinuousAction(Action):
    """Diagonal Gaussian policy output, optionally tanh-squashed into ``(-1, 1)``.

    ``sample()`` draws a reparameterised action, ``log_prob(a)`` sums over action dims
    (with the tanh change-of-variables correction when squashed), ``entropy()`` is the
    Gaussian entropy (for a squashed policy this is the entropy of the pre-tanh Gaussian,
    the usual PPO surrogate; use ``-log_prob`` of samples for an estimate of the true one),
    ``mode()`` the deterministic action.
    """

    def __init__(self, mean: torch.Tensor, std: torch.Tensor, squash: bool = False):
        self.mean, self.std, self.squash = mean, std, bool(squash)
        self.dist = torch.distributions.Normal(mean, std)

    def sample(self, generator: torch.Generator | None = None) -> torch.Tensor:
        """Reparameterised sample (gradients flow into mean/std); with ``generator``, the action
        :meth:`sample_with_log_prob` would draw, without scoring it (acting needs no log-probability)."""
        u = self._pre_tanh(generator)
        return torch.tanh(u) if self.squash else u

    def sample_with_log_prob(self, generator: torch.Generator | None = None,
                             noise: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """``(action, log_prob)`` computed from the pre-tanh sample (no atanh round trip); reparameterised,
        drawn with ``generator`` when given (an algorithm's own, so its runs do not share torch's global one).
        ``noise``: standard normal draws of the mean's shape, already made, used instead of drawing (an
        update that draws on one thread and samples on another keeps one order of draws)."""
        u = self._pre_tanh(generator, noise)
        return (torch.tanh(u) if self.squash else u), self._log_prob_pre(u)

    def _pre_tanh(self, generator: torch.Generator | None, noise: torch.Tensor | None = None) -> torch.Tensor:
        if noise is not None:
            if noise.shape != self.mean.shape:
                raise ValueError(f"noise of shape {tuple(noise.shape)} for actions of shape {tuple(self.mean.shape)}")
            return self.mean + self.std * noise.to(self.mean.dtype)
        if generator is None:
            return self.dist.rsample()
        return self.mean + self.std * torch.randn(self.mean.shape, generator=generator, device=self.mean.device,
                                                  dtype=self.mean.dtype)

    def _log_prob_pre(self, u: torch.Tensor) -> torch.Tensor:
        lp = self.dist.log_prob(u).sum(-1)
        if self.squash:
            # log(1 - tanh(u)^2) = 2 * (log 2 - u - softplus(-2u)); exact and stable for large |u|.
            lp = lp - (2.0 * (_LOG2 - u - F.softplus(-2.0 * u))).sum(-1)
        return lp

    def log_prob(self, a: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
        """Log-density of actions ``a`` (``[..., act_dim]`` -> ``[...]``)."""
        if self.squash:
            a = a.clamp(-1.0 + eps, 1.0 - eps)  # atanh(+-1) is infinite
            return self._log_prob_pre(torch.atanh(a))
        return self._log_prob_pre(a)

    def entropy(self) -> torch.Tensor:
        """Gaussian entropy summed over action dims ``[...]``."""
        return self.dist.entropy().sum(-1)

    def mode(self) -> torch.Tensor:
        """Deterministic action: the mean (squashed if ``squash``)."""
        return torch.tanh(self.mean) if self.squash else self.mean

    def __repr__(self) -> str:
        return f"ContinuousAction(shape={tuple(self.mean.shape)}, squash={self.squash})"


class NormalPolicyHead(nn.Module):
    """Maps features ``[B, in_dim]`` to a :class:`ContinuousAction` over ``act_dim`` dims.

    The log-std is a free parameter (``state_dependent_std=False``, PPO style) or a
    linear function of the features (SAC style); it is clamped to ``[-20, 2]``.
    """

    LOG_STD_MIN, LOG_STD_MAX = -20.0, 2.0

    def __init__(self, in_dim: int, act_dim: int, state_dependent_std: bool = False,
                 squash: bool = False, log_std_init: float = 0.0):
        super().__init__()
        self.squash = bool(squash)
        self.mean = nn.Linear(in_dim, act_dim)
        nn.init.orthogonal_(self.mean.weight, gain=0.01)  # start near a zero-mean policy
        nn.init.zeros_(self.mean.bias)
        self.state_dependent_std = bool(state_dependent_std)
        if self.state_dependent_std:
            self.log_std = nn.Linear(in_dim, act_dim)
            nn.init.zeros_(self.log_std.weight)
            nn.init.constant_(self.log_std.bias, log_std_init)
        else:
            self.log_std = nn.Parameter(torch.full((act_dim,), float(log_std_init)))

    def forward(self, features: torch.Tensor) -> ContinuousAction:
        """Action distribution for a batch of features."""
        mean = self.mean(features)
        log_std = self.log_std(features) if self.state_dependent_std else self.log_std.expand_as(mean)
        std = log_std.clamp(self.LOG_STD_MIN, self.LOG_STD_MAX).exp()
        return ContinuousAction(mean, std, squash=self.squash)
