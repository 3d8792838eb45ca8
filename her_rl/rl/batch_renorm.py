"""Batch renormalisation (Ioffe 2017) and the critic CrossQ builds from it (Bhatt et al., ICLR 2024).

Batch normalisation standardises a layer by the batch's own mean and deviation while training and by
running estimates at inference, so a network trained on one batch distribution acts differently on
another. Batch renormalisation corrects the batch statistics towards the running ones while training:

    x_hat = (x - mean_B) / std_B * r + d,   r = clip(std_B / std, 1/r_max, r_max),
                                            d = clip((mean_B - mean) / std, -d_max, d_max)

with r and d held constant in the backward pass, so training and inference see the same
standardisation once the running estimates settle. For the first ``warmup`` training steps r = 1 and
d = 0 (plain batch normalisation) while the running estimates form. The running mean and variance
move by ``momentum`` towards each batch's.
"""

from __future__ import annotations

from typing import Sequence

import torch
import torch.nn as nn

from her_rl.rl.memory import check_layers

__all__ = ["BatchRenorm", "RenormCritic"]


class _Standardise(torch.autograd.Function):
    """x_hat = (x - mean_B) / std_B over the batch, with the batch mean and (biased) variance as outputs
    without gradient. Written out because autograd's version of these few lines costs the CrossQ update
    more than its matrix products: ``Tensor.var`` over the batch dimension is a slow strided reduction
    on CPU, and autograd's chain of elementwise backward nodes makes more passes over the batch than the
    closed form below."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        mean = x.mean(0)
        centred = x - mean
        var = (centred * centred).mean(0)
        inv_std = torch.rsqrt(var + eps)
        x_hat = centred * inv_std
        ctx.save_for_backward(x_hat, inv_std)
        ctx.mark_non_differentiable(mean, var)
        return x_hat, mean, var

    @staticmethod
    def backward(ctx, grad: torch.Tensor, _mean: torch.Tensor, _var: torch.Tensor) -> tuple[torch.Tensor, None]:
        # d x_hat / d x through the batch's own mean and variance: (g - mean(g) - x_hat mean(g x_hat)) / std
        x_hat, inv_std = ctx.saved_tensors
        centred_grad = grad - grad.mean(0)
        return torch.addcmul(centred_grad, x_hat, (grad * x_hat).mean(0), value=-1) * inv_std, None


class BatchRenorm(nn.Module):
    """Batch renormalisation over the features of a [batch, features] input (see the module docstring)."""

    def __init__(self, features: int, momentum: float = 0.01, eps: float = 1e-3, r_max: float = 3.0,
                 d_max: float = 5.0, warmup: int = 100_000):
        super().__init__()
        self.momentum, self.eps, self.r_max, self.d_max, self.warmup = momentum, eps, r_max, d_max, int(warmup)
        self.weight = nn.Parameter(torch.ones(features))
        self.bias = nn.Parameter(torch.zeros(features))
        self.register_buffer("running_mean", torch.zeros(features))
        self.register_buffer("running_var", torch.ones(features))
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training:  # x * scale + shift: the running standardisation and the affine map in one pass
            scale = self.weight * torch.rsqrt(self.running_var + self.eps)
            return torch.addcmul(self.bias - self.running_mean * scale, x, scale)
        x_hat, mean, var = _Standardise.apply(x, self.eps)
        scale, shift = self.weight, self.bias
        if self.steps >= self.warmup:  # weight * (x_hat r + d) + bias, r and d constants of the backward pass
            with torch.no_grad():
                running_std = torch.sqrt(self.running_var + self.eps)
                r = (torch.sqrt(var + self.eps) / running_std).clamp(1.0 / self.r_max, self.r_max)
                d = ((mean - self.running_mean) / running_std).clamp(-self.d_max, self.d_max)
            scale, shift = self.weight * r, torch.addcmul(self.bias, self.weight, d)
        with torch.no_grad():
            self.running_mean.lerp_(mean.float(), self.momentum)
            self.running_var.lerp_(var.float(), self.momentum)
            self.steps += 1
        return torch.addcmul(shift, x_hat, scale)


class RenormCritic(nn.Module):
    """Q(x, a) as CrossQ builds it: batch renormalisation of the input and after every hidden layer
    (before its ReLU), no normalisation of the output. ``forward`` returns [batch]."""

    def __init__(self, in_dim: int, act_dim: int, hidden: Sequence[int], momentum: float = 0.01,
                 warmup: int = 100_000):
        super().__init__()
        dims = [int(in_dim) + int(act_dim), *[int(h) for h in hidden]]
        check_layers([*dims, 1])
        layers: list[nn.Module] = [BatchRenorm(dims[0], momentum, warmup=warmup)]
        for a, b in zip(dims[:-1], dims[1:]):
            layers += [nn.Linear(a, b), BatchRenorm(b, momentum, warmup=warmup), nn.ReLU()]
        layers.append(nn.Linear(dims[-1], 1))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([x, a], dim=1)).squeeze(1)
