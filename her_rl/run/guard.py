"""Non-finite guard: after every training iteration, look for NaN/inf in its metrics, in the
agent's networks (parameters, buffers and gradients) and in its optimisers' state (Adam's moment
estimates), and keep a copy of the last good state. A policy whose distribution parameters went
non-finite inside the iteration makes torch.distributions refuse them before the iteration ends;
:func:`failure_in_iteration` recognises that error (and an optimiser step that overflows), so it
ends the run the same way, in the iteration it appears.

The networks are found by walking the agent's attributes (and those of its own her_rl helper
objects, such as RND) for ``nn.Module``s and optimisers, instead of calling
``agent.state_dict()``: that would also copy the whole replay memory every iteration.
"""

from __future__ import annotations

import copy
import math
import os
import re
import traceback
from typing import Any

import torch
from torch import nn


def components(agent: Any, depth: int = 3) -> tuple[list[tuple[str, nn.Module]], list[tuple[str, Any]]]:
    """The agent's networks and optimisers by name: its attributes, and those of its own her_rl helper
    objects (RND, say), down to ``depth`` levels."""
    modules: list[tuple[str, nn.Module]] = []
    optimizers: list[tuple[str, Any]] = []
    seen: set[int] = set()

    def visit(obj: Any, name: str, level: int) -> None:
        if id(obj) in seen:
            return
        seen.add(id(obj))
        if isinstance(obj, nn.Module):
            modules.append((name, obj))
        elif isinstance(obj, torch.optim.Optimizer):
            optimizers.append((name, obj))
        elif level > 0 and hasattr(obj, "__dict__") and (level == depth or type(obj).__module__.startswith("her_rl")):
            for attr, value in vars(obj).items():
                visit(value, f"{name}.{attr}" if name else attr, level - 1)

    visit(agent, "", depth)
    return modules, optimizers


class Guard:
    def __init__(self, agent: Any, keep_last_good: bool):
        self.modules, self.optimizers = components(agent)
        self.keep_last_good = keep_last_good
        self._good: list[tuple[Any, dict]] | None = None
        if keep_last_good:
            self.remember_good()

    def find_nonfinite(self, metrics: dict[str, float]) -> str | None:
        """A description of the first non-finite metric or tensor, or None if all are finite."""
        for tag, value in metrics.items():
            try:
                number = float(value)
            except (TypeError, ValueError):
                continue
            if not math.isfinite(number):
                return f"{tag} = {number}"
        for name, module in self.modules:
            for kind, tensors in (("parameter", module.named_parameters()), ("buffer", module.named_buffers())):
                for pname, t in tensors:
                    if t.is_floating_point() and not bool(torch.isfinite(t).all()):
                        return f"{kind} {name}.{pname}"
                    grad = getattr(t, "grad", None)
                    if grad is not None and grad.is_floating_point() and not bool(torch.isfinite(grad).all()):
                        return f"gradient of {name}.{pname}"
        for name, optimizer in self.optimizers:
            for i, state in enumerate(optimizer.state.values()):
                for key, t in state.items():
                    if torch.is_tensor(t) and t.is_floating_point() and not bool(torch.isfinite(t).all()):
                        return f"optimiser state {name}.{key} (parameter {i})"
        return None

    def remember_good(self) -> None:
        if self.keep_last_good:
            self._good = ([(m, copy.deepcopy(m.state_dict())) for _, m in self.modules]
                          + [(o, copy.deepcopy(o.state_dict())) for _, o in self.optimizers])

    def restore_good(self) -> None:
        for owner, state in self._good or []:
            owner.load_state_dict(copy.deepcopy(state))
        for _, module in self.modules:  # gradients of the bad update would leak into the next one
            for p in module.parameters():
                p.grad = None


_DISTRIBUTIONS = os.path.join("torch", "distributions") + os.sep
_OPTIMIZERS = os.path.join("torch", "optim") + os.sep


def failure_in_iteration(exc: BaseException) -> str | None:
    """What went non-finite when ``exc`` is torch refusing a value mid-iteration, else None:
    torch.distributions refusing a parameter (a NaN mean, an inf scale, NaN logits), or an
    optimiser step whose size overflows float32 (a learning rate near 1e38)."""
    files = [frame.filename for frame in traceback.extract_tb(exc.__traceback__)]
    if isinstance(exc, ValueError) and any(_DISTRIBUTIONS in f for f in files):
        found = re.search(r"Expected parameter (\w+) .*? of distribution (\w+)", str(exc), flags=re.S)
        return f"parameter {found.group(1)} of the policy's {found.group(2)} distribution" if found else \
            "a parameter of the policy's distribution"
    if isinstance(exc, RuntimeError) and "overflow" in str(exc) and any(_OPTIMIZERS in f for f in files):
        return "optimiser step (its size overflows float32; is the learning rate finite but huge?)"
    return None
