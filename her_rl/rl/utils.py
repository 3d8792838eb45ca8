"""Small helpers shared by the building blocks: tensor conversion and seeding."""
from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch

__all__ = ["np2torch", "to_numpy", "set_seed"]


def np2torch(x: Any, device=None, dtype: torch.dtype | None = torch.float32) -> Any:
    """Convert numpy arrays / scalars / lists / tensors to a torch tensor.

    Dicts (e.g. goal-conditioned observations) are converted recursively, keeping
    their keys. Tensors are moved/cast without copying when already matching.
    ``dtype=None`` keeps the source dtype (useful for integer action indices).
    """
    if isinstance(x, dict):
        return {k: np2torch(v, device=device, dtype=dtype) for k, v in x.items()}
    if isinstance(x, torch.Tensor):
        return x.to(device=device if device is not None else x.device,
                    dtype=dtype if dtype is not None else x.dtype)
    if isinstance(x, np.ndarray):
        # from_numpy shares memory; .to() copies only if dtype/device differ.
        t = torch.from_numpy(np.ascontiguousarray(x))
        return t.to(device=device, dtype=dtype if dtype is not None else t.dtype)
    if isinstance(x, (list, tuple)) and len(x) > 0 and isinstance(x[0], torch.Tensor):
        return torch.stack([np2torch(v, device=device, dtype=dtype) for v in x])
    return torch.as_tensor(np.asarray(x), dtype=dtype, device=device)


def to_numpy(x: Any) -> Any:
    """Inverse of :func:`np2torch`: tensors (or dicts of them) -> numpy arrays."""
    if isinstance(x, dict):
        return {k: to_numpy(v) for k, v in x.items()}
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().numpy()
    return np.asarray(x)


def set_seed(seed: int) -> None:
    """Seed python ``random``, numpy's global RNG and torch (CPU and CUDA)."""
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)
