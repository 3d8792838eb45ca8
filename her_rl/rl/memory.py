"""How much memory this process may still take, checked before a replay memory or a network is allocated:
a size that cannot fit is one line naming the size, the limit and the key to lower, instead of numpy's
or torch's allocation error (or, past physical memory, the kernel killing the process later).

The limit is the smallest of the address-space limit (``ulimit -v``) less what the process has
mapped, the cgroup's memory limit (a container, a SLURM job; not less its use, which counts page cache
the kernel gives back), and the machine's physical memory.
"""

from __future__ import annotations

import os
import resource
from pathlib import Path
from typing import Sequence

from her_rl.errors import ConfigError

FLOAT_BYTES = 4
NETWORK_COPIES = 4  # weights, gradients and Adam's two moments


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


__all__ = ["check_fits", "check_layers", "gigabytes", "headroom"]
