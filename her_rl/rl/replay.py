"""Preallocated numpy ring buffer for transitions -- or whole episodes -- of any shape."""
from __future__ import annotations

import os
from typing import Any, Mapping

import numpy as np
import torch

from her_rl.rl.memory import check_fits

__all__ = ["ReplayBuffer"]

_SEP = "/"  # joins nested field names in flat save/state_dict keys ("obs/observation")


def _is_leaf(v: Any) -> bool:
    return isinstance(v, (tuple, list)) and len(v) == 2 and not isinstance(v[0], Mapping)


def _leaf(v: Any) -> tuple[tuple[int, ...], np.dtype]:
    shape, dtype = v
    return ((int(shape),) if isinstance(shape, (int, np.integer)) else tuple(shape)), np.dtype(dtype)


def _nbytes(capacity: int, spec: Mapping) -> int:
    """What ``_alloc`` would allocate, without allocating it."""
    total = 0
    for v in spec.values():
        if isinstance(v, Mapping):
            total += _nbytes(capacity, v)
        elif _is_leaf(v):
            shape, dtype = _leaf(v)
            total += capacity * int(np.prod(shape, dtype=object)) * dtype.itemsize
    return total


def _alloc(capacity: int, spec: Mapping) -> dict:
    out = {}
    for name, v in spec.items():
        if isinstance(v, Mapping):
            out[name] = _alloc(capacity, v)
        elif _is_leaf(v):
            shape, dtype = _leaf(v)
            out[name] = np.zeros((capacity, *shape), dtype=dtype)
        else:
            raise ValueError(f"spec entry {name!r} must be (shape, dtype) or a dict, got {v!r}")
    return out


def _flatten(tree: Mapping, prefix: str = "") -> dict:
    flat = {}
    for k, v in tree.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            flat.update(_flatten(v, key + _SEP))
        else:
            flat[key] = v
    return flat


def _map(tree: Mapping, fn) -> dict:
    return {k: _map(v, fn) if isinstance(v, Mapping) else fn(v) for k, v in tree.items()}


class ReplayBuffer:
    """Fixed-capacity FIFO ring buffer over numpy arrays, described by a ``spec``.

    ``spec`` maps a field name to ``(shape, dtype)`` or to a nested dict of those
    (dict observations), e.g.::

        ReplayBuffer(10_000, {"obs": {"observation": ((8,), np.int8), "desired_goal": ((8,), np.int8)},
                              "action": ((), np.int64), "reward": ((), np.float32)})

    An item can be anything from one transition to a whole episode (shape ``(T+1, n)``).
    ``add(**fields)`` writes a batch (leading dim B) at ``pos`` with wraparound, overwriting
    the oldest items; ``sample(batch_size, rng)`` draws uniformly over stored items.
    """

    def __init__(self, capacity: int, spec: Mapping):
        if int(capacity) <= 0:
            raise ValueError("capacity must be positive")
        self.capacity = int(capacity)
        self.spec = spec
        check_fits(_nbytes(self.capacity, spec), f"a replay memory of {self.capacity:,} items",
                   "the replay size (algo.buffer_size)")
        self.data = _alloc(self.capacity, spec)
        self._flat = _flatten(self.data)  # same arrays, flat view for fast iteration
        self.pos = 0    # next slot to write
        self.size = 0   # number of valid items

    @property
    def full(self) -> bool:
        """Whether the buffer holds ``capacity`` items (new adds overwrite the oldest)."""
        return self.size == self.capacity

    def __len__(self) -> int:
        return self.size

    def add(self, **fields: Any) -> np.ndarray:
        """Add a batch of items; every field must be given with shape ``(B, *field_shape)``.

        If B > capacity only the last ``capacity`` items are kept (as if written one by
        one). Returns the slot indices the (kept) items were written to.
        """
        flat = _flatten(fields)
        missing, extra = set(self._flat) - set(flat), set(flat) - set(self._flat)
        if missing or extra:
            raise KeyError(f"fields mismatch spec: missing {sorted(missing)}, unexpected {sorted(extra)}")
        flat = {k: np.asarray(v) for k, v in flat.items()}
        sizes = {v.shape[0] if v.ndim else None for v in flat.values()}
        if len(sizes) != 1 or None in sizes:
            raise ValueError(f"all fields need the same leading batch dim, got {sizes}")
        b = sizes.pop()
        for k, v in flat.items():
            if v.shape[1:] != self._flat[k].shape[1:]:
                raise ValueError(f"field {k!r}: expected item shape {self._flat[k].shape[1:]}, got {v.shape[1:]}")
        if b == 0:
            return np.zeros(0, dtype=np.int64)
        keep = min(b, self.capacity)
        # Item j of the batch lands in (pos + j) % capacity; keep only the last `keep`.
        idx = (self.pos + np.arange(b - keep, b)) % self.capacity
        for k, v in flat.items():
            self._flat[k][idx] = v[b - keep:]
        self.pos = int((self.pos + b) % self.capacity)
        self.size = int(min(self.size + b, self.capacity))
        return idx

    def get(self, idx: Any) -> dict:
        """Fields at integer index array ``idx`` (nested like the spec; copies)."""
        idx = np.asarray(idx, dtype=np.int64)
        return _map(self.data, lambda a: a[idx])

    def sample(self, batch_size: int, rng: np.random.Generator) -> dict:
        """Uniformly sample ``batch_size`` stored items (with replacement)."""
        if self.size == 0:
            raise ValueError("cannot sample from an empty buffer")
        return self.get(rng.integers(0, self.size, size=batch_size))

    def clear(self) -> None:
        """Forget all items (storage stays allocated)."""
        self.pos = self.size = 0

    # -- persistence -------------------------------------------------------------------
    def _check_and_fill(self, arrays: Mapping, pos: int, size: int, capacity: int) -> None:
        if capacity != self.capacity:
            raise ValueError(f"capacity mismatch: saved {capacity}, buffer {self.capacity}")
        if set(arrays) != set(self._flat):
            raise KeyError(f"saved fields {sorted(arrays)} differ from spec {sorted(self._flat)}")
        for k, a in arrays.items():
            a = np.asarray(a)
            if a.shape != (size, *self._flat[k].shape[1:]) or a.dtype != self._flat[k].dtype:
                raise ValueError(f"field {k!r}: saved {a.shape} {a.dtype} incompatible with spec")
            self._flat[k][:size] = a
        self.pos, self.size = int(pos), int(size)

    def save(self, path: str | os.PathLike) -> None:
        """Write stored items and ring state to an ``.npz`` file (np.savez adds the suffix if missing)."""
        # Valid items always occupy slots [0, size): before wraparound pos == size.
        arrays = {k: v[: self.size] for k, v in self._flat.items()}
        np.savez(path, __pos__=self.pos, __size__=self.size, __capacity__=self.capacity, **arrays)

    def load(self, path: str | os.PathLike) -> None:
        """Restore what :meth:`save` wrote into this (same-spec) buffer, exactly."""
        path = os.fspath(path)
        if not os.path.exists(path) and os.path.exists(path + ".npz"):
            path += ".npz"
        with np.load(path, allow_pickle=False) as f:
            arrays = {k: f[k] for k in f.files if not k.startswith("__")}
            self._check_and_fill(arrays, int(f["__pos__"]), int(f["__size__"]), int(f["__capacity__"]))

    def state_dict(self) -> dict:
        """Torch tensors and ints only (``torch.load(weights_only=True)``-safe)."""
        return {"capacity": self.capacity, "pos": self.pos, "size": self.size,
                "data": {k: torch.from_numpy(v[: self.size].copy()) for k, v in self._flat.items()}}

    def load_state_dict(self, state: Mapping) -> None:
        """Restore from :meth:`state_dict`."""
        arrays = {k: (v.numpy() if isinstance(v, torch.Tensor) else np.asarray(v)) for k, v in state["data"].items()}
        self._check_and_fill(arrays, int(state["pos"]), int(state["size"]), int(state["capacity"]))

    def __repr__(self) -> str:
        return f"ReplayBuffer(size={self.size}/{self.capacity}, fields={sorted(self._flat)})"
