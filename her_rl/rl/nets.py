"""Networks and what a policy head outputs.

Networks: :func:`mlp`, the ``Linear -> activation -> ... -> Linear`` factory that policies, critics and
RND build on; the continuous learners' critics Q(x, a) (:class:`Critic`, and :class:`EnsembleCritic`, n
of them evaluated as one batched product); and Q-networks shared by every element of a bit vector
(:class:`ElementwiseQ`, :class:`ElementwiseDuelingQ`).

Policy outputs as objects, each an :class:`Action` (which ``losses.py`` and the concatenation checks
test, to accept any policy output and refuse plain tensors with one clear message):
:class:`DiscreteAction` samples an index from a policy's logits or probabilities and keeps what a
policy-gradient loss needs (log-prob, entropy, ...) with the autograd graph intact, concatenated into an
episode (``+``, ``+=``, ``append``) and sliced back into minibatches; :class:`ContinuousAction` is a
diagonal Gaussian, optionally tanh-squashed, that samples reparameterised actions and scores them
(``log_prob`` with the tanh change of variables, ``entropy``, ``mode``); :class:`NormalPolicyHead` maps
features to one, with a free (PPO) or state-dependent (SAC) log-std.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from her_rl.rl.memory import check_layers

__all__ = ["Action", "ContinuousAction", "Critic", "DiscreteAction", "ElementwiseDuelingQ", "ElementwiseQ",
           "EnsembleCritic", "NormalPolicyHead", "mlp"]

_ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU, "elu": nn.ELU, "gelu": nn.GELU,
                "leaky_relu": nn.LeakyReLU, "silu": nn.SiLU}
ACTIVATIONS = tuple(sorted(_ACTIVATIONS))  # the names mlp() takes (the on-policy learners' config rule)


def _activation_cls(activation) -> type:
    if isinstance(activation, str):
        try:
            return _ACTIVATIONS[activation.lower()]
        except KeyError as e:
            raise ValueError(f"unknown activation {activation!r}; "
                             f"choose from {sorted(_ACTIVATIONS)} or pass an nn.Module class") from e
    if isinstance(activation, type) and issubclass(activation, nn.Module):
        return activation
    raise TypeError(f"activation must be a name or an nn.Module class, got {activation!r}")


def mlp(in_dim: int, out_dim: int, hidden: Sequence[int] = (64, 64), activation="tanh",
        ortho_init: bool = False, out_gain: float = 1.0, layer_norm: bool = False) -> nn.Sequential:
    """Build ``Linear -> act -> ... -> Linear`` (no activation on the output).

    With ``layer_norm`` each hidden Linear is followed by a LayerNorm before its activation (what
    keeps critics stable at many updates per env step).

    With ``ortho_init`` the hidden layers get orthogonal weights with gain sqrt(2)
    and the output layer gain ``out_gain`` (biases zero) -- the usual PPO recipe;
    a small out_gain (e.g. 0.01) on a policy head keeps the initial policy near uniform.
    """
    act = _activation_cls(activation)
    dims = [int(in_dim), *[int(h) for h in hidden], int(out_dim)]
    check_layers(dims)
    layers: list[nn.Module] = []
    for i in range(len(dims) - 1):
        lin = nn.Linear(dims[i], dims[i + 1])
        last = i == len(dims) - 2
        if ortho_init:
            nn.init.orthogonal_(lin.weight, gain=out_gain if last else math.sqrt(2))
            nn.init.zeros_(lin.bias)
        layers.append(lin)
        if not last:
            layers += [nn.LayerNorm(dims[i + 1]), act()] if layer_norm else [act()]
    return nn.Sequential(*layers)


def is_bits(pairs: torch.Tensor) -> bool:
    """Whether every input is a bit as bit-flip feeds them (+-1): then an element is one of four patterns."""
    return bool((pairs.abs() == 1).all())


def bit_patterns(pairs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """For +-1 pairs ``[B, 2, n]`` (observations, goals): each element's pattern ``[B, n]`` (an index into the
    four (bit, goal bit) patterns), the patterns ``[4, 2]``, and each row's share of each pattern ``[B, 4]``."""
    code = (pairs[:, 0] > 0).long() * 2 + (pairs[:, 1] > 0).long()
    patterns = torch.tensor([[-1., -1.], [-1., 1.], [1., -1.], [1., 1.]], dtype=pairs.dtype, device=pairs.device)
    rows = torch.arange(len(code), device=code.device).unsqueeze(1) * 4
    counts = torch.bincount((rows + code).flatten(), minlength=4 * len(code)).view(len(code), 4)
    return code, patterns, counts.to(pairs.dtype) / pairs.shape[-1]


class ElementwiseQ(nn.Module):
    """Q-values for envs whose action i acts on element i of the observation and of the goal (bit-flip:
    action i flips bit i), shared over the elements (a Deep Sets-style equivariant network).

    Input: ``[obs (n), goal (n)]`` concatenated, as an MLP gets it. Each element's pair
    ``(obs_i, goal_i)`` goes through the same layers; after each layer the mean over the elements is
    added back through its own weights, so every element also sees a summary of all of them (how far
    the goal is). Output: Q for the action on each element, plus a shared term of the summary. The
    weights do not depend on n, so the network is the same size for 10 bits or 1,000.
    """

    def __init__(self, n: int, hidden: Sequence[int] = (64, 64)):
        super().__init__()
        if not hidden:
            raise ValueError("ElementwiseQ needs at least one hidden layer")
        self.n = int(n)
        dims = [2, *[int(h) for h in hidden]]
        self.local = nn.ModuleList(nn.Linear(a, b) for a, b in zip(dims[:-1], dims[1:]))
        self.pooled = nn.ModuleList(nn.Linear(a, b, bias=False) for a, b in zip(dims[:-1], dims[1:]))
        self.head = nn.Linear(dims[-1], 1)
        self.pooled_head = nn.Linear(dims[-1], 1, bias=False)

    def forward(self, x):
        pairs = x.view(len(x), 2, self.n)
        if is_bits(pairs):
            return self._bits(pairs)
        h = pairs.transpose(1, 2)  # [B, n, 2]: (obs_i, goal_i)
        for local, pooled in zip(self.local, self.pooled):
            h = nn.functional.relu(local(h) + pooled(h.mean(1, keepdim=True)))
        return self.head(h).squeeze(-1) + self.pooled_head(h.mean(1))

    def _bits(self, pairs: torch.Tensor) -> torch.Tensor:
        """The same Q for +-1 inputs at the cost of 4 elements a row instead of n: within a row, elements of one
        pattern stay equal through every layer (each adds the same row mean), so each row carries four hidden
        vectors and its mean over elements weighs them by their share."""
        code, patterns, share = bit_patterns(pairs)
        h, share = patterns.expand(len(code), 4, 2), share.unsqueeze(1)  # [B, 4, 2], [B, 1, 4]
        for local, pooled in zip(self.local, self.pooled):
            h = nn.functional.relu(local(h) + pooled(share @ h))
        return self.head(h).squeeze(-1).gather(1, code) + self.pooled_head((share @ h).squeeze(1))


class ElementwiseDuelingQ(nn.Module):
    """:class:`ElementwiseQ` split into an advantage that sees only its own element and a value of the whole:
    Q_i = A(obs_i, goal_i) + V(mean over elements). A start far from its goal has Q-values that differ by
    about 2 gamma^d between a right and a wrong flip, too little to learn once d is in the hundreds; here A
    cannot see d, so what it learns near the goal (flip a bit that differs from its goal bit) holds at
    every distance, while V carries how far the goal is.
    """

    def __init__(self, n: int, hidden: Sequence[int] = (64, 64)):
        super().__init__()
        if not hidden:
            raise ValueError("ElementwiseDuelingQ needs at least one hidden layer")
        self.n = int(n)
        self.local = mlp(2, int(hidden[-1]), [int(h) for h in hidden[:-1]], activation="relu")
        self.advantage = nn.Linear(int(hidden[-1]), 1)
        self.value = mlp(int(hidden[-1]), 1, [int(hidden[-1])], activation="relu")

    def forward(self, x):
        pairs = x.view(len(x), 2, self.n)
        if is_bits(pairs):  # four distinct (obs_i, goal_i), so four rows through the layers
            return self._bits(pairs)
        h = torch.relu(self.local(pairs.transpose(1, 2)))  # [B, n, H]: each (obs_i, goal_i) alone
        return self.advantage(h).squeeze(-1) + self.value(h.mean(1))

    def _bits(self, pairs: torch.Tensor) -> torch.Tensor:
        """The same Q for +-1 inputs at the cost of four elements instead of B x n: each element's hidden
        vector is one of the four patterns', and the mean over elements weighs those four by their share."""
        code, patterns, share = bit_patterns(pairs)
        h = torch.relu(self.local(patterns))  # [4, H]
        return self.advantage(h).squeeze(-1)[code] + self.value(share @ h)


class Critic(nn.Module):
    """Q(x, a): one MLP over the normalised (observation, goal) input and the action in [-1, 1]."""

    def __init__(self, in_dim: int, act_dim: int, hidden: Sequence[int], layer_norm: bool = False):
        super().__init__()
        self.net = mlp(in_dim + act_dim, 1, hidden, activation="relu", layer_norm=layer_norm)

    def forward(self, x: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([x, a], dim=1)).squeeze(1)


class EnsembleCritic(nn.Module):
    """``n`` independent critics Q_i(x, a), evaluated together: each layer is one batched matrix
    product over the members (weights [n, in, out]) instead of n small ones, which is what makes an
    ensemble of ten affordable on a CPU. ``layer_norm`` normalises each hidden layer (each member
    with its own gain and bias). ``forward`` returns [n, batch]."""

    def __init__(self, n: int, in_dim: int, act_dim: int, hidden: Sequence[int], layer_norm: bool = False):
        super().__init__()
        dims = [int(in_dim) + int(act_dim), *[int(h) for h in hidden], 1]
        self.n, self.layer_norm = int(n), layer_norm
        self.weights = nn.ParameterList()
        self.biases = nn.ParameterList()
        for d_in, d_out in zip(dims[:-1], dims[1:]):
            bound = 1.0 / math.sqrt(d_in)  # nn.Linear's default initialisation, member by member
            self.weights.append(nn.Parameter(torch.empty(self.n, d_in, d_out).uniform_(-bound, bound)))
            self.biases.append(nn.Parameter(torch.empty(self.n, 1, d_out).uniform_(-bound, bound)))
        self.gains = nn.ParameterList(nn.Parameter(torch.ones(self.n, 1, h)) for h in dims[1:-1]) if layer_norm else None
        self.shifts = nn.ParameterList(nn.Parameter(torch.zeros(self.n, 1, h)) for h in dims[1:-1]) if layer_norm else None

    def forward(self, x: torch.Tensor, a: torch.Tensor, members: torch.Tensor | None = None) -> torch.Tensor:
        """Q of every member, [n, batch]; with ``members`` (indices) only theirs, [len(members), batch]."""
        def pick(p: torch.Tensor) -> torch.Tensor:
            return p if members is None else p[members]

        h = torch.cat([x, a], dim=1)
        h = h.unsqueeze(0).expand(self.n if members is None else len(members), -1, -1)
        last = len(self.weights) - 1
        for i, (w, b) in enumerate(zip(self.weights, self.biases)):
            h = torch.baddbmm(pick(b), h, pick(w))
            if i < last:
                if self.layer_norm:
                    h = nn.functional.layer_norm(h, h.shape[-1:]) * pick(self.gains[i]) + pick(self.shifts[i])
                h = torch.relu(h)
        return h.squeeze(-1)


# -- what a policy head outputs ------------------------------------------------------------------
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
