"""Non-finite guard: after every training iteration, look for NaN/inf in its metrics and in the
agent's networks (parameters, buffers and gradients), and keep a copy of the last good state.

The networks are found by walking the agent's attributes (and those of its own her_rl helper
objects, such as RND) for ``nn.Module``s and optimisers, instead of calling
``agent.state_dict()``: that would also copy the whole replay memory every iteration.
"""

from __future__ import annotations

import copy
import math
from typing import Any

import torch
from torch import nn

from her_rl.errors import NonFiniteError  # noqa: F401  (also importable from here)


def _components(agent: Any, depth: int = 3) -> tuple[list[tuple[str, nn.Module]], list[tuple[str, Any]]]:
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
        self.modules, self.optimizers = _components(agent)
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
