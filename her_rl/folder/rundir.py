"""The run folder: unique default names, which folders a run may write in, one live run per
folder, its history file, and its side of resuming (whether it holds a checkpoint this command may
resume, the config a run saved before its first checkpoint, keys an earlier version saved).

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
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Iterable

from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf

from her_rl.config.checks import by_size
from her_rl.config.saved import exclude_keys
from her_rl.errors import ConfigError, FolderBusy, one_line, outside
from her_rl.folder.atomic import remove_stale_temps, write_atomic_text
from her_rl.folder.parse import YAML_MAX_CHARS, json_value, yaml_checked

# What a run folder holds (besides tb/ and, after load=, eval.json or videos/).
CHECKPOINT = "checkpoint.pt"
CONFIG = "config.yaml"
RESULTS = "results.json"
LOCK = ".her-run.lock"
FAILED = "failed.json"  # a sweep job that failed: its one-line reason (her_rl/folder/failures.py)
HISTORY = "history.jsonl"
HISTORY_MAX = 64 * 2**20  # bytes: one line of a few kB per start or resume
SWEEP_FILE = "multirun.yaml"  # Hydra writes it first into every sweep folder
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
    (the suffix is cached: one value per config), ``${bookkeeping_keys:}`` and ``${by_size:...}``."""
    if not OmegaConf.has_resolver(SUFFIX_RESOLVER):
        OmegaConf.register_new_resolver(SUFFIX_RESOLVER, suffix, use_cache=True)
    if not OmegaConf.has_resolver(SWEPT_RESOLVER):
        OmegaConf.register_new_resolver(SWEPT_RESOLVER, swept_dirname)
    if not OmegaConf.has_resolver("bookkeeping_keys"):  # left out of folder names: her_rl/config/saved.py
        OmegaConf.register_new_resolver("bookkeeping_keys", exclude_keys)
    if not OmegaConf.has_resolver("by_size"):  # settings by task size (the bit-flip tuned file)
        OmegaConf.register_new_resolver("by_size", by_size)


class SweptKeys:
    """Hydra callback: at the start of a multirun, note which keys the sweep varies (sweep syntax on
    the command line, or an experiment's ``hydra.sweeper.params``) for :func:`swept_dirname`."""

    def on_multirun_start(self, config: Any, **kwargs: Any) -> None:
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


def folder_path(value: Any, key: str) -> Path:
    """``value`` as a folder path; an empty one (``hydra.run.dir=``) would mean the current folder."""
    if value is None or not str(value).strip():
        raise ConfigError(f"{key} is empty: name the folder to write in ({key}=PATH)")
    return Path(str(value))


def is_run_folder(folder: Path, ignore: Iterable[str] = ()) -> bool:
    """Whether an existing folder is empty or holds a her-rl run: its lock file, a checkpoint, or
    ``config.yaml`` with ``history.jsonl`` (a run that stopped before its first checkpoint), or the
    ``failed.json`` of a sweep job that failed.
    ``ignore``: names Hydra itself wrote there for this run (its job log)."""
    names = {p.name for p in folder.iterdir()} - set(ignore)
    return not names or bool(names & {LOCK, CHECKPOINT, FAILED}) or {CONFIG, HISTORY} <= names


TRACKERS = "trackers.json"  # the W&B / MLflow run ids of logger=[...,wandb,mlflow], for resume (her_rl/run/trackers.py)
RUN_FILES = (CHECKPOINT, CONFIG, RESULTS, HISTORY, "metrics.jsonl", TRACKERS)  # what a run writes (and tb/, a folder)


def check_run_files(folder: Path) -> None:
    """Refuse a run folder whose own files a run would fail to write or append to, after training:
    each must be a regular file (``tb`` a folder), and ``history.jsonl`` one JSON object per line
    (a last line cut short by a crash or a full disk is allowed)."""
    for name in RUN_FILES:
        path = folder / name
        if path.is_symlink() or (path.exists() and not path.is_file()):
            raise ConfigError(f"cannot use run folder {folder}: its {name} is not a regular file; move it away")
    tb = folder / "tb"
    if tb.exists() and (tb.is_symlink() or not tb.is_dir()):
        raise ConfigError(f"cannot use run folder {folder}: its tb is not a folder; move it away")
    history = folder / HISTORY
    if not history.exists():
        return
    try:
        size = history.stat().st_size
        if size > HISTORY_MAX:  # read whole here and at each start: gigabytes would fill memory
            raise ConfigError(f"cannot use run folder {folder}: its {HISTORY} has {size:,} bytes, more than any "
                              f"her-rl writes ({HISTORY_MAX:,}); move the file away to continue")
        text = history.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not UTF-8 text"
        raise ConfigError(f"cannot use run folder {folder}: its {HISTORY} cannot be read ({why})") from None
    lines = text.split("\n")
    for number, line in enumerate(lines, 1):
        torn = number == len(lines)  # after the last newline: a line a killed write left unfinished
        try:
            ok = isinstance(json_value(line), dict) if line.strip() else True
        except ValueError:
            ok = torn
        if not ok:
            raise ConfigError(f"cannot use run folder {folder}: line {number} of its {HISTORY} is not a JSON object "
                              "(the file is damaged or not her-rl's); move the file away to continue")


def is_sweep_folder(folder: Path, ignore: Iterable[str] = ()) -> bool:
    """Whether an existing folder is empty or holds a Hydra sweep (its ``multirun.yaml``)."""
    names = {p.name for p in folder.iterdir()} - set(ignore)
    return not names or SWEEP_FILE in names


def cannot_write_in(folder: Path) -> str | None:
    """Why nothing can be created in ``folder`` (None if it can): tried with an empty temporary
    folder, removed at once, since permission bits alone do not tell (root, /proc, read-only mounts)."""
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".her-run-probe-", dir=folder))
    except OSError as exc:
        return f"cannot write in {folder} ({exc.strerror or exc})"
    return None


def check_folder(folder: Path, what: str = "run folder",
                 belongs: Callable[..., bool] = is_run_folder, ignore: Iterable[str] = ()) -> None:
    """Refuse, before anything is written, a folder a run (or sweep) must not write in: one that
    cannot be created or written, a file, or an existing folder of other files than her-rl's."""
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"cannot use {what} {folder}: it is a file, not a folder")
    parent = folder if folder.exists() else next(p for p in folder.absolute().parents if p.exists())
    why = f"{parent} is not a folder" if not parent.is_dir() else cannot_write_in(parent)
    if why:
        raise ConfigError(f"cannot use {what} {folder}: {why}")
    if folder.exists() and not belongs(folder, ignore):
        kind = "a her-rl run (checkpoint.pt, .her-run.lock, config.yaml with history.jsonl)" \
            if belongs is is_run_folder else f"a sweep ({SWEEP_FILE})"
        raise ConfigError(f"{what} {folder} already holds other files than {kind}; pick a new or empty folder")
    if folder.exists() and belongs is is_run_folder:
        check_run_files(folder)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except PermissionError:  # another user's process
        return pid > 0
    except (ProcessLookupError, OverflowError, ValueError):
        return False
    return pid > 0


class RunLock:
    """An exclusive, non-blocking lock on a run folder, held until :meth:`release`."""

    def __init__(self, folder: Path, fd: int):
        self.folder, self._fd = folder, fd

    @staticmethod
    def _busy(folder: Path, fd: int) -> FolderBusy:
        try:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip()
        except OSError:
            holder = ""
        os.close(fd)
        # the pid in the file is the last run's to write it: the live holder may still be starting (or checking)
        who = f"pid {holder}" if holder.isdigit() and _alive(int(holder)) else "it is starting or checking the folder"
        return FolderBusy(f"run folder {folder} is in use by another live her-run ({who}); wait for it "
                           "to end or pick another hydra.run.dir")

    @classmethod
    def _take(cls, folder: Path, flags: int) -> RunLock:
        try:  # O_NOFOLLOW: a link named like the lock must not make the run truncate another file
            fd = os.open(folder / LOCK, flags | os.O_NOFOLLOW, 0o644)
        except (IsADirectoryError, NotADirectoryError, PermissionError) as exc:
            raise ConfigError(f"cannot use run folder {folder}: cannot open its lock file {LOCK} "
                              f"({exc.strerror}); remove it if it is not a file") from None
        except OSError as exc:
            if exc.errno != errno.ELOOP:
                raise
            raise ConfigError(f"cannot use run folder {folder}: its lock file {LOCK} is a symbolic link; "
                              "remove it") from None
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
    def live_holder(cls, folder: Path) -> FolderBusy | None:
        """The refusal a live her-run holding ``folder`` means, else None (no lock file, or one that is a
        folder, a link or unreadable: no live run can be proven); the lock is not kept."""
        try:
            lock = cls.probe(folder)
        except FolderBusy as busy:
            return busy
        except (ConfigError, OSError):
            return None
        if lock is not None:
            lock.release()
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

    def lost(self) -> tuple[str, Path | None] | None:
        """How the folder's path stopped being the folder this lock holds (deleted, moved, replaced by a
        link or another folder) and where the held folder is now (None: deleted), or None while it
        still is: checked before each write by its path. The lock file's open descriptor knows where
        the held folder went."""
        if self._fd < 0:
            return None
        held = os.fstat(self._fd)
        try:
            here = os.lstat(self.folder / LOCK)
            if not os.path.islink(self.folder) and (here.st_dev, here.st_ino) == (held.st_dev, held.st_ino):
                return None
        except OSError:  # gone, or a path through a link that leads nowhere
            pass
        try:
            now = Path(os.readlink(f"/proc/self/fd/{self._fd}")).parent
        except OSError:
            now = None
        if held.st_nlink == 0 or now is None or str(now).endswith("(deleted)"):
            return "was deleted", None
        return f"was moved to {now}" + (" and a link put in its place" if os.path.islink(self.folder) else ""), now

    def holds(self, dir_fd: int) -> bool:
        """Whether the folder open as ``dir_fd`` is the one this lock holds: its lock file is this one."""
        if self._fd < 0:
            return False
        try:
            there = os.stat(LOCK, dir_fd=dir_fd, follow_symlinks=False)
        except OSError:
            return False
        held = os.fstat(self._fd)
        return (there.st_dev, there.st_ino) == (held.st_dev, held.st_ino)

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def record(folder: Path, event: str, **fields: Any) -> None:
    """Append one line to the folder's history: every start and resume with what it changed. A last
    line cut short (a kill or a full disk mid-write) is dropped first, so the file stays one JSON
    object per line and the folder keeps resuming."""
    line = {"time": time.strftime("%Y-%m-%dT%H:%M:%S"), "event": event, "pid": os.getpid(), **fields}
    fd = os.open(folder / HISTORY, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "r+b") as f:  # O_NOFOLLOW: never append to the file a link points at
        text = f.read()
        end = text.rfind(b"\n") + 1  # the end of the last complete line (0: none)
        if end != len(text):
            f.truncate(end)
        f.seek(end)
        f.write((json.dumps(line, default=str) + "\n").encode())
        f.flush()
        os.fsync(f.fileno())


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


def take(out: Path, lock: RunLock | None, checked_stamp: tuple[int, int] | None, fresh: bool, config_text: str,
         event: str, env_steps: int, overrides: list[str] | None, changed: dict[str, list]) -> RunLock:
    """Lock the run folder ``out`` (creating it) once every check passed, clear what killed writes left
    there, and write ``config.yaml`` and the history line of this ``event`` (start or resume) at
    ``env_steps``; returns the lock the run holds from here on. ``lock``: the one the checks took on an
    existing folder; ``checked_stamp``: the checkpoint as the checks saw it (another run's checkpoint
    written since is refused). A ``fresh`` folder (new or empty) that cannot be written is left as it was."""
    made_below = next((p.parent for p in [*reversed(out.parents), out] if not p.exists()), out.parent)
    given = lock  # the caller releases the lock it gave; one taken here is released here if the start fails

    def fail(exc: OSError) -> ConfigError:
        if fresh:  # remove what this start wrote, and the folders it made if that leaves them empty
            for name in (LOCK, CONFIG, HISTORY):
                try:
                    (out / name).unlink(missing_ok=True)
                except OSError:
                    pass
        if lock is not None and (fresh or lock is not given):
            lock.release()
        if fresh:
            remove_if_empty(out, stop_at=made_below)
        return ConfigError(f"cannot write in run folder {out}: {exc.strerror or exc}")

    if lock is None:
        try:
            lock = RunLock.acquire(out)
        except OSError as exc:
            raise fail(exc) from None
        if stamp(out / CHECKPOINT) != checked_stamp:  # another run wrote there between our checks and the lock
            lock.release()
            raise ConfigError(f"run folder {out} changed while this run was starting (another run wrote "
                              "a checkpoint there); check it, then pass resume=true or pick another folder")
    try:
        lock.mark_owner()  # a full disk: not even the pid fits
        for name in (CHECKPOINT, CONFIG, RESULTS):  # temp files of writes a killed run left behind
            remove_stale_temps(out / name)
        write_atomic_text(out / CONFIG, config_text)
        record(out, event, env_steps=env_steps, overrides=overrides, changed=changed)
    except OSError as exc:
        raise fail(exc) from None
    return lock


# Resuming, the folder's side: what it holds, whether this command may resume it (how the saved config
# and this command's overrides merge is her_rl/config/saved.py's).

RETIRED: dict[str, dict[str, Any]] = {
    "her_redq": {"simultaneous": False, "critic_threads": 1, "actor_half": "thread"},
    "her_crossq": {"simultaneous": False, "actor_half": "thread"},
}
"""Algo -> keys it once declared but never took, each with the one value it allowed: runs saved before
they went hold them, and nothing the learner reads (any other value stays, for the key check to refuse)."""


def without_retired(config: dict[str, Any]) -> dict[str, Any]:
    """A saved config (``config.yaml`` or a checkpoint's) without the :data:`RETIRED` keys of its algo."""
    algo = config.get("algo")
    retired = RETIRED.get(algo.get("name"), {}) if isinstance(algo, dict) and isinstance(algo.get("name"), str) else {}
    gone = [k for k, v in retired.items() if k in algo and type(algo[k]) is type(v) and algo[k] == v]
    if not gone:
        return config
    return {**config, "algo": {k: v for k, v in algo.items() if k not in gone}}


def stamp(path: Path) -> tuple[int, int] | None:
    """(mtime, size) of a file, None if absent: a checkpoint written between a check and the lock shows."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_mtime_ns, st.st_size


def read_saved_config(out: Path) -> dict[str, Any]:
    """The ``config.yaml`` of a run that stopped before its first checkpoint; one line if unreadable."""
    try:
        with open(out / CONFIG, "rb") as f:
            data = f.read(YAML_MAX_CHARS + 1)  # no more than the limit is read
        if len(data) > YAML_MAX_CHARS:
            raise ValueError(f"more than {YAML_MAX_CHARS:,} bytes, larger than any her-rl config")
        saved = OmegaConf.to_container(OmegaConf.create(yaml_checked(data.decode("utf-8"))), resolve=False)
    except Exception as exc:  # noqa: BLE001  (unreadable, not YAML, not UTF-8)
        raise ConfigError(f"resume=auto: cannot read {out / CONFIG} ({outside(one_line(exc)[:200])}); move it away to start "
                          "a new run there") from None
    if not isinstance(saved, dict) or not isinstance(saved.get("algo"), dict) or not isinstance(saved.get("env"), dict):
        raise ConfigError(f"resume=auto: {out / CONFIG} is not a her-rl run's config; move it away to start a new "
                          "run there")
    return without_retired(saved)


def check_resume(out: Path, stamp: tuple[int, int] | None, mode: Any, requeued: bool = False) -> None:
    """A checkpoint in the folder only with resume (or a requeued job); resume=true needs one."""
    if stamp is not None and mode is False and not requeued:  # a requeued job resumes
        raise ConfigError(f"{out} already holds a checkpoint; pass resume=true to continue that run "
                          "(resume=auto: continue if there is one), or use a new folder")
    if stamp is None and mode is True:
        what = "does not exist" if not out.is_dir() else (
            "holds no checkpoint (the run stopped before its first one; resume=auto starts it afresh)"
            if (out / CONFIG).exists() else "holds no checkpoint")
        raise ConfigError(f"resume=true: run folder {out} {what}")
