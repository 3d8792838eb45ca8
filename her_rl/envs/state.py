"""Snapshots of a vector env's in-progress episodes, so a resumed run continues them exactly.

:func:`env_state` walks the vector env, its copies and their wrappers and records every attribute
that holds state: numbers, strings, numpy arrays and scalars, ``np.random.Generator`` s (as their
bit-generator state) and deques; objects of these modules are walked into too. The snapshot is
made of tensors and plain containers, so a checkpoint holding it loads with
``torch.load(weights_only=True)``; :func:`restore_env_state` writes it back into a freshly built
env of the same config (arrays in place, so views into them, as the table envs keep, stay views).

Only envs whose whole state lives in such attributes are snapshotted: the project's envs,
gymnasium's classic-control envs (CartPole's batched one among them) and gymnasium's wrappers in a
synchronous vector env. Anything else (a copy in another process, a physics engine, a user's env
class) may keep state elsewhere: :func:`env_state` returns None for it and its episodes restart.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import gymnasium as gym
import numpy as np
import torch

KNOWN_MODULES = ("her_rl.envs.", "gymnasium.envs.classic_control.", "gymnasium.wrappers.",
                 "gymnasium.vector.sync_vector_env.", "gymnasium.core.")
"""Classes defined here keep their state in attributes (the modules' own envs, wrappers and helpers)."""

PLAIN = (type(None), bool, int, float, str)


class NotSaveable(Exception):
    """The env holds state outside what a snapshot records."""


def _known(obj: Any) -> bool:
    return (type(obj).__module__ + ".").startswith(KNOWN_MODULES)


def _is_env(obj: Any) -> bool:
    return isinstance(obj, (gym.Env, gym.vector.VectorEnv))


def _array(value: np.ndarray) -> tuple:
    if value.dtype.kind not in "biuf":
        raise NotSaveable(f"an array of dtype {value.dtype}")
    scalar = isinstance(value, np.generic)  # np.float32(...) comes back as a scalar, not a 0-d array
    return ("a", torch.from_numpy(np.array(value, copy=True)), str(value.dtype), scalar)


def _encode(value: Any, depth: int = 0) -> tuple | None:
    """One attribute as a tagged tuple; None for what holds no episode state (spaces, specs,
    renderers, callables), which is left as the fresh env has it."""
    if isinstance(value, (np.generic, np.ndarray)):  # first: np.float64 is also a float
        return _array(value)
    if isinstance(value, PLAIN):
        return ("v", value)
    if isinstance(value, np.random.Generator):
        return ("g", value.bit_generator.state)
    if isinstance(value, (list, tuple, deque)):
        return _sequence(value, depth)
    if _is_env(value):
        return _object(value, depth + 1)  # an env inside: it must be snapshotted whole
    if _known(value) and depth < 8:  # a helper of a known env (the table envs' core, running stats)
        return _object(value, depth + 1)
    return None


def _sequence(value: list | tuple | deque, depth: int) -> tuple | None:
    """Lists, tuples (MountainCar's state) and deques (episode statistics) of what encodes,
    env copies among them; None if an item encodes to nothing (a list of other objects)."""
    items = [_encode(v, depth + 1) for v in value]
    if any(item is None for item in items):
        return None
    kind = "deque" if isinstance(value, deque) else type(value).__name__
    return ("s", kind, items, value.maxlen if kind == "deque" else None)


def _object(obj: Any, depth: int) -> tuple:
    if not _known(obj):
        raise NotSaveable(type(obj).__qualname__)
    attrs = {}
    for name, value in getattr(obj, "__dict__", {}).items():
        encoded = _encode(value, depth)
        if encoded is not None:
            attrs[name] = encoded
    return ("o", type(obj).__qualname__, attrs)


def env_state(envs: gym.vector.VectorEnv) -> dict | None:
    """A snapshot of ``envs`` (see the module docstring), or None where it cannot be taken."""
    try:
        return {"env": _object(envs, 0)}
    except NotSaveable:
        return None


def _decode(saved: tuple, current: Any) -> Any:
    """The value a saved attribute is restored to, written into ``current`` (what the fresh env
    holds there) where that keeps other references to it valid."""
    tag = saved[0]
    if tag == "v":
        return saved[1]
    if tag == "a":
        _, tensor, dtype, scalar = saved
        value = tensor.numpy().astype(np.dtype(dtype))
        if scalar:
            return value[()]
        if (isinstance(current, np.ndarray) and current.shape == value.shape and current.dtype == value.dtype
                and current.flags.writeable):
            current[...] = value  # in place: views of it (the table envs' named rows) follow
            return current
        return value
    if tag == "g":
        generator = current if isinstance(current, np.random.Generator) else np.random.default_rng()
        generator.bit_generator.state = saved[1]
        return generator
    if tag == "s":
        _, kind, items, maxlen = saved
        if not isinstance(current, (list, tuple, deque)) or len(current) != len(items):
            current = [None] * len(items)  # env copies are restored into those built, other items replaced
        values = [_decode(item, old) for item, old in zip(items, current)]
        return deque(values, maxlen=maxlen) if kind == "deque" else tuple(values) if kind == "tuple" else values
    if tag == "o":
        _restore_object(current, saved)
        return current
    raise ValueError(f"unknown env state entry {tag!r}")


def _restore_object(obj: Any, saved: tuple) -> None:
    _, qualname, attrs = saved
    if type(obj).__qualname__ != qualname:
        raise ValueError(f"the saved env state is of {qualname}, this env is {type(obj).__qualname__}")
    fresh = getattr(obj, "__dict__", {})
    for name, value in attrs.items():
        if name not in fresh:  # a snapshot only sets what the env built from the same config has
            raise ValueError(f"{qualname} has no attribute {name!r} to restore")
        setattr(obj, name, _decode(value, fresh[name]))


def restore_env_state(envs: gym.vector.VectorEnv, state: dict) -> None:
    """Write a snapshot of :func:`env_state` back into ``envs`` (built from the same config).
    A snapshot of another env is a ValueError."""
    _restore_object(envs, state["env"])


__all__ = ["env_state", "restore_env_state"]
