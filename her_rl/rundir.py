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

from her_rl.errors import ConfigError

# What a run folder holds (besides tb/ and, after load=, eval.json or videos/).
CHECKPOINT = "checkpoint.pt"
CONFIG = "config.yaml"
RESULTS = "results.json"
LOCK = ".her-run.lock"
HISTORY = "history.jsonl"
SUFFIX_RESOLVER = "run_suffix"
SWEPT_RESOLVER = "swept_dirname"
SWEPT_ENV = "HER_RL_SWEPT_KEYS"  # set by SweptKeys at the start of a multirun; jobs inherit it


def suffix() -> str:
    """A short random tag that keeps folder names of runs started in the same instant apart."""
    return secrets.token_hex(3)


def swept_dirname(fallback: str, task: Any) -> str:
    """A sweep job's folder name: only the overrides whose key the sweep varies (``n=20,algo.strategy=
    future``, not every override given); Hydra's full ``override_dirname`` when the swept keys are
    unknown (a job started outside a multirun) or none vary."""
    keys = set(filter(None, os.environ.get(SWEPT_ENV, "").split(",")))
    parts = sorted(str(o) for o in (task or []) if str(o).lstrip("+~").split("=", 1)[0] in keys)
    return ",".join(parts) if keys and parts else fallback


def register_resolvers() -> None:
    """``${run_suffix:}`` and ``${swept_dirname:...}`` in the Hydra run/sweep folder names
    (the suffix is cached: one value per config)."""
    from omegaconf import OmegaConf  # here: her_rl.load reads this module's names without OmegaConf

    if not OmegaConf.has_resolver(SUFFIX_RESOLVER):
        OmegaConf.register_new_resolver(SUFFIX_RESOLVER, suffix, use_cache=True)
    if not OmegaConf.has_resolver(SWEPT_RESOLVER):
        OmegaConf.register_new_resolver(SWEPT_RESOLVER, swept_dirname)
    if not OmegaConf.has_resolver("bookkeeping_keys"):  # left out of folder names: her_rl/bookkeeping.py
        from her_rl.bookkeeping import exclude_keys

        OmegaConf.register_new_resolver("bookkeeping_keys", exclude_keys)


class SweptKeys:
    """Hydra callback: at the start of a multirun, note which keys the sweep varies (sweep syntax on
    the command line, or an experiment's ``hydra.sweeper.params``) for :func:`swept_dirname`."""

    def on_multirun_start(self, config: Any, **kwargs: Any) -> None:
        from hydra.core.override_parser.overrides_parser import OverridesParser

        given = [str(o) for o in config.hydra.overrides.task]
        params = config.hydra.sweeper.get("params") or {}
        given += [f"{key}={value}" for key, value in params.items()]
        try:
            parsed = OverridesParser.create().parse_overrides(given)
        except Exception:  # noqa: BLE001  (Hydra itself reports a malformed override)
            return
        keys = sorted({o.key_or_group for o in parsed if o.is_sweep_override()})
        os.environ[SWEPT_ENV] = ",".join(keys)

    def __getattr__(self, name: str):  # Hydra calls every hook; the others do nothing here
        if name.startswith("on_"):
            return lambda *args, **kwargs: None
        raise AttributeError(name)


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
