"""Multi-layer perceptron factory used by policies, critics and RND."""
from __future__ import annotations

import math
from typing import Sequence

import torch.nn as nn

__all__ = ["mlp"]

_ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU, "elu": nn.ELU, "gelu": nn.GELU,
                "leaky_relu": nn.LeakyReLU, "silu": nn.SiLU}


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
        ortho_init: bool = False, out_gain: float = 1.0) -> nn.Sequential:
    """Build ``Linear -> act -> ... -> Linear`` (no activation on the output).

    With ``ortho_init`` the hidden layers get orthogonal weights with gain sqrt(2)
    and the output layer gain ``out_gain`` (biases zero) -- the usual PPO recipe;
    a small out_gain (e.g. 0.01) on a policy head keeps the initial policy near uniform.
    """
    act = _activation_cls(activation)
    dims = [int(in_dim), *[int(h) for h in hidden], int(out_dim)]
    layers: list[nn.Module] = []
    for i in range(len(dims) - 1):
        lin = nn.Linear(dims[i], dims[i + 1])
        last = i == len(dims) - 2
        if ortho_init:
            nn.init.orthogonal_(lin.weight, gain=out_gain if last else math.sqrt(2))
            nn.init.zeros_(lin.bias)
        layers.append(lin)
        if not last:
            layers.append(act())
    return nn.Sequential(*layers)
