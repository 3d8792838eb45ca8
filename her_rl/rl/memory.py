"""How much memory this process may still take, checked before a replay memory, a network or a batched
env (its copies and what one iteration collects from them) is allocated: a size that cannot fit is one
line naming the size, the limit and the key to lower, instead of numpy's or torch's allocation error
(or, past physical memory, the kernel killing the process later).

The limit is the smallest of the address-space limit (``ulimit -v``) less what the process has
mapped, the cgroup's memory limit (a container, a SLURM job; not less its use, which counts page cache
the kernel gives back), and the machine's physical memory.
"""

from __future__ import annotations

import math
import os
import resource
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from her_rl.errors import ConfigError

FLOAT_BYTES = 4
NETWORK_COPIES = 4  # weights, gradients and Adam's two moments
OBSERVATIONS_HELD = 2  # per env copy at least: the observation a step returns and the one the learner still acts on


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().split()[0]
    except (OSError, IndexError):
        return None
    return int(text) if text.isdigit() else None


def headroom() -> tuple[int, str] | None:
    """(bytes the process may still allocate, what sets it), or None where nothing can be read."""
    page = os.sysconf("SC_PAGE_SIZE")
    found = []
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    mapped = _read_int(Path("/proc/self/statm"))
    if soft != resource.RLIM_INFINITY:
        found.append((soft - (mapped or 0) * page, "its address-space limit, ulimit -v"))
    for limit in ("memory.max", "memory/memory.limit_in_bytes"):  # cgroup v2, then v1
        cap = _read_int(Path("/sys/fs/cgroup") / limit)
        if cap is not None and cap < 2**60:
            found.append((cap, "its cgroup's memory limit"))
            break
    try:
        found.append((os.sysconf("SC_PHYS_PAGES") * page, "the machine's physical memory"))
    except (ValueError, OSError):
        pass
    return min(found) if found else None


def gigabytes(n: int) -> str:
    return f"{n / 1e9:,.1f} GB" if n >= 1e8 else f"{n / 1e6:,.1f} MB"


def check_fits(nbytes: int, what: str, lower: str) -> None:
    """A ConfigError when ``nbytes`` for ``what`` cannot fit in what the process may still take."""
    room = headroom()
    if room is not None and nbytes > room[0]:
        raise ConfigError(f"{what} needs {gigabytes(nbytes)}, more than this process may still use "
                          f"({gigabytes(max(room[0], 0))}, {room[1]}): lower {lower}")


def check_layers(dims: Sequence[int], lower: str = "algo.hidden") -> None:
    """A network of Linear layers ``dims[0] -> ... -> dims[-1]``, trained with Adam."""
    params = sum(int(a) * int(b) + int(b) for a, b in zip(dims[:-1], dims[1:]))
    check_fits(params * FLOAT_BYTES * NETWORK_COPIES, f"a network of layers {list(map(int, dims))}", lower)


def space_bytes(space: Any, itemsize: int | None = None) -> int:
    """Bytes of one value of a gymnasium space, from its shape and dtype alone (nothing is sampled or
    allocated): a Dict or Tuple the sum of its parts, each element ``itemsize`` bytes where given (as
    a learner stores it), else its dtype's. A space of no fixed shape (Text, Graph) counts 0."""
    parts = getattr(space, "spaces", None)
    if parts is not None:
        return sum(space_bytes(part, itemsize) for part in (parts.values() if isinstance(parts, Mapping) else parts))
    shape, dtype = getattr(space, "shape", None), getattr(space, "dtype", None)
    if shape is None or dtype is None:
        return 0
    return math.prod(int(n) for n in shape) * (itemsize or np.dtype(dtype).itemsize)


def check_env_copies(copies: int, observation_space: Any, action_space: Any, what: str, lower: str,
                     collected: int = 0) -> None:
    """A batched env of ``copies``, each holding its observations and action, plus ``collected`` bytes of
    what one iteration gathers from them: a ConfigError before any copy is built when that cannot fit.
    A lower bound (an env's own state is not known without building it): only what surely cannot fit
    is refused."""
    per_copy = OBSERVATIONS_HELD * space_bytes(observation_space) + space_bytes(action_space)
    check_fits(int(copies) * per_copy + collected, what, lower)


__all__ = ["OBSERVATIONS_HELD", "check_env_copies", "check_fits", "check_layers", "gigabytes", "headroom",
           "space_bytes"]
