"""Multi-layer perceptron factory used by policies, critics and RND."""
from __future__ import annotations

import math
from typing import Sequence

import torch
import torch.nn as nn

from her_rl.rl.memory import check_layers

__all__ = ["Critic", "ElementwiseDuelingQ", "ElementwiseQ", "EnsembleCritic", "mlp"]

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
