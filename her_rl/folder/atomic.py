"""Atomic writes of small files, without torch (:mod:`her_rl.folder.checkpoint` writes checkpoints with them).

A file is written to a temporary file in the same folder, flushed to disk and renamed over the old
one, so a crash (even SIGKILL) leaves either the previous or the new file, never a torn one. Kept apart
from the checkpoint module so her-summary, her-tune and the run folder's own files need no torch.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def remove_stale_temps(path: Path) -> list[Path]:
    """Delete ``<name>.*.tmp`` files that killed saves left beside ``path``. Safe only while this
    process is the folder's one writer (the runner holds the run folder's lock)."""
    removed = []
    for tmp in path.parent.glob(path.name + ".*.tmp"):
        if tmp.is_symlink() or tmp.is_file():  # a folder of that name is not ours to remove; new temps avoid it
            tmp.unlink(missing_ok=True)
            removed.append(tmp)
    return removed


def write_atomic(path: Path, write) -> None:
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)  # the rename itself survives a power cut


def write_atomic_text(path: str | os.PathLike, text: str) -> None:
    """Replace a small text file (results.json, config) atomically, through a unique temp file."""
    write_atomic_bytes(path, text.encode())


def write_atomic_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically: a temp file in the same folder, fsync, rename. A
    symlink at ``path`` is replaced by the file, never written through; on OSError (a full disk) the
    previous file is untouched and no temp file is left."""
    write_atomic(Path(path), lambda f: f.write(data))
