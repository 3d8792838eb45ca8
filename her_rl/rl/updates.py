"""Pieces of a gradient update that learners share: modules frozen for an actor's step, the bootstrapped
TD target, Polyak-averaged targets, mixed precision, targets clipped to the range a sparse reward allows,
and the shuffled minibatches of an on-policy epoch."""

from __future__ import annotations

import platform
from contextlib import contextmanager
from typing import Iterator

import torch


@contextmanager
def frozen(*modules: torch.nn.Module) -> Iterator[None]:
    """The modules' weights take no gradient inside: an actor's step needs dQ/da, not the critics' weights."""
    for module in modules:
        module.requires_grad_(False)
    try:
        yield
    finally:
        for module in modules:
            module.requires_grad_(True)


def td_target(reward: torch.Tensor, discount: torch.Tensor, not_done: torch.Tensor,
              q_next: torch.Tensor) -> torch.Tensor:
    """``reward + discount * not_done * q_next``: the one-step (``discount`` = gamma) or n-step (gamma^m)
    bootstrapped target; ``not_done`` is 0 where the env terminated, so truncation is bootstrapped."""
    return reward + discount * not_done * q_next


@torch.no_grad()
def polyak_update(net: torch.nn.Module, target: torch.nn.Module, decay: float) -> None:
    """target <- decay * target + (1 - decay) * net (the HER paper's target update, decay 0.95)."""
    for p, p_target in zip(net.parameters(), target.parameters()):
        p_target.mul_(decay).add_(p, alpha=1.0 - decay)


def update_precision(precision: str, device: torch.device) -> torch.autocast:
    """Context for an update's forward (and so backward) passes. ``bfloat16`` runs the matrix
    products through ``torch.autocast``: faster on CPUs with AMX / AVX512-BF16, slower on others.
    Parameters, Adam's state and the loss stay float32."""
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision == "bfloat16")


def cpu_has_bfloat16() -> bool:
    """Whether this CPU multiplies bfloat16 natively: AMX or AVX512-BF16 on x86 (plain AVX512 only
    emulates it, slower than float32); elsewhere what oneDNN reports (Arm's BF16). True when torch
    cannot tell, so that no warning is given on a guess."""
    try:
        if platform.machine().lower() in ("x86_64", "amd64"):
            return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return True


def slow_precision(precision: str, device: torch.device | None) -> str | None:
    """One line when ``precision`` will make updates slower than float32 on ``device`` (None: the CPU):
    bfloat16 on a CPU without bfloat16 units, where autocast emulates it; None otherwise."""
    if precision != "bfloat16" or (device is not None and device.type != "cpu") or cpu_has_bfloat16():
        return None
    return ("algo.precision=bfloat16: this CPU has no bfloat16 units (AMX or AVX512-BF16), so updates run "
            "slower than with algo.precision=float32")


def clip_to_return_range(target: torch.Tensor, gamma: float,
                         reward_range: tuple[float, float] | None = (-1.0, 0.0)) -> torch.Tensor:
    """Clamp to the range of discounted returns of rewards in ``reward_range`` (a -1/0 goal reward:
    [-1/(1-gamma), 0], the HER paper's bound; 0/1: [0, 1/(1-gamma)]); None: an unknown range, no clamp."""
    if reward_range is None:
        return target
    low, high = reward_range
    horizon = 1.0 / (1.0 - gamma) if gamma < 1.0 else float("inf")  # undiscounted: only the sign is bounded
    lowest = 0.0 if low >= 0 else low * horizon
    highest = 0.0 if high <= 0 else high * horizon
    return target.clamp(lowest, highest)


def minibatches(size: int, minibatch_size: int, generator: torch.Generator) -> Iterator[torch.Tensor]:
    """One epoch: the indices ``0 .. size - 1`` shuffled with ``generator``, in slices of ``minibatch_size``."""
    perm = torch.randperm(size, generator=generator, device=generator.device)
    for start in range(0, size, minibatch_size):
        yield perm[start:start + minibatch_size]


__all__ = ["clip_to_return_range", "frozen", "minibatches", "polyak_update", "td_target", "update_precision"]
