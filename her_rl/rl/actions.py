"""Policy outputs as objects: discrete (categorical) and continuous (Gaussian) actions.

:class:`DiscreteAction` samples an action index when built from a policy's logits or probabilities and
keeps everything a policy-gradient loss needs (log-prob, entropy, ...) with the autograd graph intact;
steps can be concatenated (``+``, ``+=``, ``append``) into an episode or rollout and sliced back into
minibatches. :class:`ContinuousAction` is a diagonal Gaussian, optionally tanh-squashed, that samples
reparameterised actions and scores them (``log_prob`` with the tanh change of variables, ``entropy``,
``mode``); :class:`NormalPolicyHead` maps features to one, with a free (PPO) or state-dependent (SAC)
log-std. Both are an :class:`Action`, which ``losses.py`` and the concatenation checks test to accept
any policy output and refuse plain tensors with one clear message.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = ["Action", "DiscreteAction", "ContinuousAction", "NormalPolicyHead"]


class Action:
    """Marker base class of policy outputs (used for operand type checks)."""


# -- discrete ------------------------------------------------------------------------------------
def _to_tensor(x: Any) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        return x
    return torch.as_tensor(np.asarray(x), dtype=torch.float32)


def _looks_like_probs(x: torch.Tensor) -> bool:
    """Heuristic of ``DiscreteAction(x)``: non-negative rows that sum to one."""
    with torch.no_grad():
        if x.numel() == 0 or bool((x < 0).any()):
            return False
        return bool(torch.allclose(x.sum(-1), torch.ones((), dtype=x.dtype, device=x.device), atol=1e-5))


class DiscreteAction(Action):
    """Categorical action(s) sampled from a policy's ``logits`` or ``probs``.

    Shapes: ``logits``/``probs`` are ``[T, n]`` (a single row ``[n]`` is treated as
    ``[1, n]``); T is the number of steps (or parallel envs), n the action-space size.
    Attributes (tensors, graph kept): ``logits`` (log-softmax normalised), ``probs``,
    ``entropy`` ``[T]``, ``idx`` ``[T]`` (long), ``prob`` and ``log_prob`` ``[T]`` of the
    chosen indices, ``one_hot`` ``[T, n]``.

    ``DiscreteAction(x)`` guesses: non-negative rows summing to 1 are probs, anything
    else logits -- pass ``logits=``/``probs=`` explicitly when in doubt.
    ``idx`` selects given actions instead of sampling; ``greedy=True`` takes the argmax;
    ``generator`` is an optional ``torch.Generator`` for reproducible sampling.
    ``DiscreteAction([])`` is an empty container to accumulate steps into.
    """

    def __init__(self, x: Any = None, *, logits: Any = None, probs: Any = None, idx: Any = None,
                 greedy: bool = False, generator: torch.Generator | None = None):
        given = sum(v is not None for v in (x, logits, probs))
        if given > 1:
            raise ValueError("give only one of x, logits, probs")
        if x is not None:
            if isinstance(x, (list, tuple)) and len(x) == 0:
                x = None
            else:
                x = _to_tensor(x)
                if _looks_like_probs(x):
                    probs = x
                else:
                    logits = x
        self._parts: list[tuple[torch.Tensor, torch.Tensor]] = []  # pending appended steps
        self._logits: torch.Tensor | None = None
        self._idx: torch.Tensor | None = None
        if logits is None and probs is None:
            if idx is not None:
                raise ValueError("idx needs logits or probs")
            return  # empty accumulator
        if probs is not None:
            p = _to_tensor(probs)
            # log(0) -> most negative finite float so that 0 * log 0 stays 0 in the entropy.
            lg = torch.log(p).clamp_min(torch.finfo(p.dtype).min)
        else:
            lg = _to_tensor(logits)
        if lg.dim() == 0:
            raise ValueError("logits/probs need at least one dimension (the actions)")
        if lg.dim() == 1:
            lg = lg.unsqueeze(0)
        self._logits = torch.log_softmax(lg, -1)
        if idx is not None:
            i = torch.as_tensor(idx if not isinstance(idx, np.ndarray) else idx.astype(np.int64),
                                dtype=torch.long, device=lg.device).reshape(lg.shape[:-1])
        elif greedy:
            i = self._logits.detach().argmax(-1)
        else:
            # Gumbel-max: argmax(logits - log E), E ~ Exp(1); much cheaper than multinomial per step.
            with torch.no_grad():
                e = torch.empty_like(self._logits).exponential_(generator=generator)
                i = (self._logits.detach() - e.clamp_min(1e-20).log()).argmax(-1)
        self._idx = i

    # -- construction helpers -------------------------------------------------------
    @classmethod
    def _from(cls, logits: torch.Tensor | None, idx: torch.Tensor | None) -> "DiscreteAction":
        new = cls.__new__(cls)
        new._logits, new._idx, new._parts = logits, idx, []
        return new

    def _flush(self) -> None:
        # Appends are queued and concatenated once on first read: O(T) per episode, not O(T^2).
        if self._parts:
            lgs = ([self._logits] if self._logits is not None else []) + [p[0] for p in self._parts]
            ids = ([self._idx] if self._idx is not None else []) + [p[1] for p in self._parts]
            self._logits, self._idx = torch.cat(lgs), torch.cat(ids)
            self._parts = []

    def _check_other(self, other: Any) -> "DiscreteAction":
        if not isinstance(other, Action):
            raise TypeError(f"can only concatenate an Action, not {type(other).__name__}")
        if not isinstance(other, DiscreteAction):
            raise TypeError(f"cannot concatenate DiscreteAction with {type(other).__name__}")
        if self.n is not None and other.n is not None and self.n != other.n:
            raise ValueError(f"number of actions differs: {self.n} vs {other.n}")
        a, b = self._any_logits(), other._any_logits()
        if a is not None and b is not None and a.shape[1:-1] != b.shape[1:-1]:
            raise ValueError(f"batch shapes differ: {tuple(a.shape)} vs {tuple(b.shape)}")
        return other

    def _any_logits(self) -> torch.Tensor | None:
        """Some logits tensor of this action (without flushing), or None if empty."""
        if self._logits is not None:
            return self._logits
        return self._parts[0][0] if self._parts else None

    # -- properties -----------------------------------------------------------------
    @property
    def n(self) -> int | None:
        """Action-space size (None while empty)."""
        lg = self._any_logits()
        return None if lg is None else int(lg.shape[-1])

    def _need(self) -> torch.Tensor:
        self._flush()
        if self._logits is None:
            raise ValueError("empty DiscreteAction")
        return self._logits

    @property
    def logits(self) -> torch.Tensor:
        """Normalised logits (log-probabilities of every action), ``[T, n]``."""
        return self._need()

    @property
    def probs(self) -> torch.Tensor:
        """Action probabilities ``[T, n]``."""
        return self._need().exp()

    @property
    def idx(self) -> torch.Tensor:
        """Chosen action indices ``[T]`` (long)."""
        self._need()
        return self._idx

    @property
    def log_prob(self) -> torch.Tensor:
        """Log-probability of the chosen indices ``[T]`` (differentiable)."""
        return self.log_prob_of(self.idx)

    @property
    def prob(self) -> torch.Tensor:
        """Probability of the chosen indices ``[T]``."""
        return self.log_prob.exp()

    @property
    def entropy(self) -> torch.Tensor:
        """Entropy of each step's distribution ``[T]`` (differentiable)."""
        lg = self._need()
        return -(lg.exp() * lg).sum(-1)

    @property
    def one_hot(self) -> torch.Tensor:
        """Float one-hot encoding of the chosen indices ``[T, n]``."""
        return F.one_hot(self.idx, self.n).to(self._logits.dtype)

    @property
    def dist(self) -> torch.distributions.Categorical:
        """The equivalent ``torch.distributions.Categorical``."""
        return torch.distributions.Categorical(logits=self._need())

    def log_prob_of(self, idx: Any) -> torch.Tensor:
        """Log-probabilities of given indices under these logits (PPO re-evaluation)."""
        lg = self._need()
        i = torch.as_tensor(idx, device=lg.device).long().reshape(lg.shape[:-1])
        return lg.gather(-1, i.unsqueeze(-1)).squeeze(-1)

    def action(self, i: int = -1):
        """The ``i``-th sampled index (default: the last) as an int (array if batched)."""
        v = self.idx[i]
        return int(v) if v.numel() == 1 else v.cpu().numpy()

    def mode(self) -> torch.Tensor:
        """Most likely action per step ``[T]``."""
        return self._need().argmax(-1)

    # -- container protocol ----------------------------------------------------------
    def __len__(self) -> int:
        n = 0 if self._logits is None else int(self._logits.shape[0])
        return n + sum(int(p[0].shape[0]) for p in self._parts)

    def size(self, dim: int | None = None):
        """Like ``Tensor.size`` of the logits: ``size(0)`` steps, ``size(-1)`` actions."""
        self._flush()
        if self._logits is None:
            return (0,) if dim is None else 0
        return self._logits.size() if dim is None else self._logits.size(dim)

    def __getitem__(self, key) -> "DiscreteAction":
        lg = self._need()
        if isinstance(key, int):
            key = slice(key, key + 1 if key != -1 else None)  # keep the step dimension
        return DiscreteAction._from(lg[key], self._idx[key])

    def __add__(self, other: Any) -> "DiscreteAction":
        self._check_other(other)
        self._flush()
        other._flush()
        if other._logits is None:
            return DiscreteAction._from(self._logits, self._idx)
        if self._logits is None:
            return DiscreteAction._from(other._logits, other._idx)
        return DiscreteAction._from(torch.cat([self._logits, other._logits]),
                                    torch.cat([self._idx, other._idx]))

    def __radd__(self, other: Any) -> "DiscreteAction":
        if isinstance(other, int) and other == 0:  # lets sum([...]) work
            return self
        if isinstance(other, Action):
            return other.__add__(self)
        raise TypeError(f"can only concatenate an Action, not {type(other).__name__}")

    def __iadd__(self, other: Any) -> "DiscreteAction":
        self._check_other(other)
        other._flush()
        if other._logits is not None:
            self._parts.append((other._logits, other._idx))
        return self

    def append(self, other: Any) -> "DiscreteAction":
        """In-place concatenation of another DiscreteAction's steps (same as ``+=``)."""
        return self.__iadd__(other)

    push = append

    def detach(self) -> "DiscreteAction":
        """Copy without autograd history (e.g. to store the behaviour policy)."""
        self._flush()
        return DiscreteAction._from(None if self._logits is None else self._logits.detach(), self._idx)

    def to(self, device) -> "DiscreteAction":
        """Move to a device."""
        self._flush()
        if self._logits is None:
            return self
        return DiscreteAction._from(self._logits.to(device), self._idx.to(device))

    def __repr__(self) -> str:
        self._flush()
        if self._logits is None:
            return "DiscreteAction([])"
        return f"DiscreteAction(steps={len(self)}, n={self.n}, idx={self._idx.tolist()})"


# -- continuous ----------------------------------------------------------------------------------
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
