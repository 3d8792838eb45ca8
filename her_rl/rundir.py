"""The run folder: unique default names, one live run per folder, and its history file.

A run holds an exclusive ``flock`` on ``<folder>/.her-run.lock`` for its whole life, so a second
run started on the same folder is refused instead of mixing its config and results with the
first one's. The lock file is never deleted (deleting it would let two runs lock two different
files of the same name); the kernel drops the lock when the process ends, even on SIGKILL.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import secrets
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from her_rl.registry import ConfigError

LOCK = ".her-run.lock"
HISTORY = "history.jsonl"
SUFFIX_RESOLVER = "run_suffix"


def suffix() -> str:
    """A short random tag that keeps folder names of runs started in the same instant apart."""
    return secrets.token_hex(3)


def register_resolvers() -> None:
    """``${run_suffix:}`` in the Hydra run/sweep folder names (cached: one value per config)."""
    if not OmegaConf.has_resolver(SUFFIX_RESOLVER):
        OmegaConf.register_new_resolver(SUFFIX_RESOLVER, suffix, use_cache=True)


def default_dir(algo: str, env: str, seed: int) -> Path:
    """``outputs/<algo>-<env>/<time>-s<seed>-<suffix>``, as the Hydra config names it."""
    stamp = datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
    return Path("outputs") / f"{algo}-{env}" / f"{stamp}-s{seed}-{suffix()}"


class RunLock:
    """An exclusive, non-blocking lock on a run folder, held until :meth:`release`."""

    def __init__(self, folder: Path, fd: int):
        self.folder, self._fd = folder, fd

    @staticmethod
    def _busy(folder: Path, fd: int) -> ConfigError:
        try:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
        except OSError:
            holder = "unknown"
        os.close(fd)
        return ConfigError(f"run folder {folder} is in use by another live her-run (pid {holder}); wait for it "
                           "to end or pick another hydra.run.dir")

    @classmethod
    def _take(cls, folder: Path, flags: int) -> RunLock:
        fd = os.open(folder / LOCK, flags, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise cls._busy(folder, fd) from None
            os.close(fd)
            raise
        return cls(folder, fd)

    @classmethod
    def probe(cls, folder: Path) -> RunLock | None:
        """Lock an existing folder's existing lock file without creating anything; None when there
        is no lock file (then no live run holds the folder). Refused if a live run holds it."""
        try:
            return cls._take(folder, os.O_RDWR)
        except FileNotFoundError:
            return None

    @classmethod
    def acquire(cls, folder: Path) -> RunLock:
        """Create the folder and its lock file if needed and lock it (refused if held)."""
        folder.mkdir(parents=True, exist_ok=True)
        return cls._take(folder, os.O_RDWR | os.O_CREAT)

    def mark_owner(self) -> None:
        """Write this process's pid into the lock file (read by a refused second run)."""
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, f"{os.getpid()}\n".encode(), 0)

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def record(folder: Path, event: str, **fields: Any) -> None:
    """Append one line to the folder's history: every start and resume with what it changed."""
    line = {"time": time.strftime("%Y-%m-%dT%H:%M:%S"), "event": event, "pid": os.getpid(), **fields}
    with open(folder / HISTORY, "a") as f:
        f.write(json.dumps(line, default=str) + "\n")


def remove_if_empty(folder: Path, stop_at: Path | None = None) -> None:
    """Remove ``folder`` if it is empty, then its parents up to (not including) ``stop_at`` while
    they are empty: the folder Hydra created for a command that was then refused."""
    folder, stop = folder.resolve(), (stop_at or Path.cwd()).resolve()
    try:
        folder.rmdir()  # only succeeds on an empty folder
    except OSError:
        return
    parent = folder.parent
    while stop in parent.parents:  # strictly below stop_at
        try:
            parent.rmdir()
        except OSError:
            return
        parent = parent.parent
