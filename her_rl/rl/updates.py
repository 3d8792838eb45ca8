"""Pieces of a gradient update outside any one learner: whether this CPU has bfloat16 units and the
trainer's warning when it has none (the hindsight learners' autocast), and the shuffled minibatches of an
on-policy epoch. The off-policy learners' own pieces (frozen modules, the TD target, Polyak targets,
return-range clipping, the autocast context) are in her_rl/algos/hindsight.py."""

from __future__ import annotations

import platform
from typing import Iterator

import torch


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


def minibatches(size: int, minibatch_size: int, generator: torch.Generator) -> Iterator[torch.Tensor]:
    """One epoch: the indices ``0 .. size - 1`` shuffled with ``generator``, in slices of ``minibatch_size``."""
    perm = torch.randperm(size, generator=generator, device=generator.device)
    for start in range(0, size, minibatch_size):
        yield perm[start:start + minibatch_size]


__all__ = ["cpu_has_bfloat16", "minibatches", "slow_precision"]
