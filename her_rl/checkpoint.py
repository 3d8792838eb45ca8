"""Atomic checkpoints, safe loading and RNG state capture.

A checkpoint is written to a temporary file in the same directory, flushed to disk and renamed
over the old one, so a crash (even SIGKILL) leaves either the previous or the new checkpoint,
never a torn file. Loading uses ``torch.load(weights_only=True)``: only tensors and plain
containers are unpickled, so a checkpoint from elsewhere cannot run code.
"""

from __future__ import annotations

import os
import random
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch


def save(obj: dict[str, Any], path: str | os.PathLike) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def load(path: str | os.PathLike, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}")
    return torch.load(path, map_location=map_location, weights_only=True)


def write_atomic_text(path: str | os.PathLike, text: str) -> None:
    """Replace a small text file (results.json, config) atomically."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def rng_state() -> dict[str, Any]:
    """The global RNG states of python, numpy and torch, as weights_only-loadable values."""
    kind, keys, pos, has_gauss, gauss = np.random.get_state()
    py_version, py_internal, py_gauss = random.getstate()
    return {
        "python": [py_version, list(py_internal), py_gauss],
        "numpy": [kind, torch.from_numpy(keys.astype(np.int64)), pos, has_gauss, gauss],
        "torch": torch.get_rng_state(),
    }


def set_rng_state(state: dict[str, Any]) -> None:
    py_version, py_internal, py_gauss = state["python"]
    random.setstate((py_version, tuple(py_internal), py_gauss))
    kind, keys, pos, has_gauss, gauss = state["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, gauss))
    torch.set_rng_state(state["torch"])
