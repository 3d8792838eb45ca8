"""Atomic checkpoints, safe loading, RNG state capture, and the run's counters (:class:`RunState`).

A checkpoint is written to a temporary file in the same directory, flushed to disk and renamed
over the old one, so a crash (even SIGKILL) leaves either the previous or the new checkpoint,
never a torn file; temporary files a killed save left behind are removed by the next save.
Loading uses ``torch.load(weights_only=True)``: only tensors and plain containers are unpickled,
so a checkpoint from elsewhere cannot run code. A file that cannot be loaded that way (empty,
truncated, foreign, or holding other objects) is a :class:`CheckpointError` of one line.
"""

from __future__ import annotations

import errno
import math
import numbers
import os
import random
import re
import warnings
import zipfile
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch

from her_rl.errors import CheckpointError
from her_rl.folder.atomic import remove_stale_temps, write_atomic
from her_rl.folder.rundir import CHECKPOINT, without_retired

KEYS = ("agent", "runner", "rng", "config")
"""What a her-rl checkpoint dict holds."""


# The run's counters (a checkpoint's ``runner``): read back from a file the user may have edited or
# damaged, so every entry is checked, and a resumed run never starts from counters it cannot trust.

def _count(v: Any) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool) and v >= 0


def _seconds(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v) and v >= 0


def _scores(v: Any) -> bool:
    return v is None or (isinstance(v, dict) and all(isinstance(k, str) and isinstance(x, numbers.Real)
                                                      and not isinstance(x, bool) for k, x in v.items()))


_CHECKS = {  # entry -> (test, what it must be)
    "env_steps": (_count, "an integer >= 0"),
    "iteration": (_count, "an integer >= 0"),
    "wall_time_s": (_seconds, "a finite number >= 0"),
    "episodes": (_count, "an integer >= 0"),
    "eval": (_scores, "null or a mapping of names to numbers"),
    "solved": (lambda v: isinstance(v, bool), "true or false"),
    "solved_at_env_steps": (lambda v: v is None or _count(v), "null or an integer >= 0"),
}


REQUIRED = ("env_steps", "iteration")  # every her-rl checkpoint has had these; the others have defaults


@dataclass
class RunState:
    """The run's counters: saved in every checkpoint (as ``runner``), restored on resume."""

    env_steps: int = 0
    iteration: int = 0
    wall_time_s: float = 0.0
    episodes: int = 0
    eval: dict[str, float] | None = None
    """The last greedy evaluation."""
    solved: bool = False
    """Solved with ``eval.stop_when_solved``: the loop ends."""
    solved_at_env_steps: int | None = None
    """The env step of the first evaluation that reached the threshold."""

    @classmethod
    def restore(cls, saved: Any, source: Any = "the checkpoint") -> RunState:
        """The counters of a checkpoint's ``runner`` entry; a CheckpointError naming ``source`` and
        the first entry that is missing or wrong."""
        def bad(why: str) -> CheckpointError:
            return CheckpointError(f"cannot load checkpoint {source}: its runner entry {why}")

        if not isinstance(saved, dict):
            raise bad(f"is a {type(saved).__name__}, not a mapping")
        for name in REQUIRED:
            if name not in saved:
                raise bad(f"has no {name} (the file is damaged or was not written by her-rl)")
        values = {f.name: saved[f.name] for f in fields(cls) if f.name in saved}  # older files: defaults
        for name, value in values.items():
            test, allowed = _CHECKS[name]
            if not test(value):
                raise bad(f"has {name}={value!r}; it must be {allowed}")
        state = cls(**values)
        if state.solved_at_env_steps is not None and state.solved_at_env_steps > state.env_steps:
            raise bad(f"says it solved at env step {state.solved_at_env_steps}, after its last ({state.env_steps})")
        if state.solved and state.solved_at_env_steps is None:
            raise bad("says solved but not when")
        return state

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def save(obj: dict[str, Any], path: str | os.PathLike) -> Path:
    """Write ``obj`` atomically. On OSError (full disk, unwritable folder) the previous file is
    untouched and no temporary file is left; the error propagates."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(path)
    write_atomic(path, lambda f: _torch_save(obj, f))
    return path


def _torch_save(obj: dict[str, Any], f) -> None:
    try:
        torch.save(obj, f)
    except RuntimeError as exc:  # torch's writer fails again while handling a full disk's OSError
        context = exc.__context__
        while context is not None and not isinstance(context, OSError):
            context = context.__context__
        if context is None:
            raise
        raise context from None


def _not_a_file(path: Path) -> str | None:
    """Why ``path`` is no regular file to read (None when it is one)."""
    if path.is_symlink() and not path.exists():
        return "a symbolic link to nothing (a broken link or a loop)"
    if not path.exists():
        return "no such file"
    if path.is_dir():
        return "a folder, not a file" + ("" if (path / CHECKPOINT).exists() else f" (and it holds no {CHECKPOINT})")
    if not path.is_file():
        return "not a regular file (a FIFO, socket or device)"
    return None


def _sb3_model(path: Path) -> str | None:
    """The line for a Stable-Baselines3 model (a zip of ``data``, ``policy.pth`` and its version file); else None."""
    version_file = "_stable_baselines3_version"
    try:
        with zipfile.ZipFile(path) as archive:
            names = set(archive.namelist())
            if version_file not in names and not {"data", "policy.pth"} <= names:
                return None
            version = ""
            if version_file in names:
                with archive.open(version_file) as f:
                    version = f.read(32).decode("ascii", "replace")
    except (OSError, zipfile.BadZipFile, RuntimeError, ValueError):
        return None
    version = "".join(c for c in version if c.isalnum() or c in ".+-")
    made = f" (saved by Stable-Baselines3 {version})" if version else ""
    return (f"a Stable-Baselines3 model{made}, not a her-rl checkpoint: load it with its SB3 class "
            "(e.g. SAC.load(path, env=env); a HER model needs its env) and evaluate it with "
            "stable_baselines3.common.evaluation.evaluate_policy")


def _why_unloadable(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    found = re.search(r"GLOBAL ([\w.]+)", text)
    if found:
        # never repeat torch's advice to load with weights_only=False: that would run the file's code
        return (f"it refers to {found.group(1)}; only tensors and plain containers are loaded, since "
                "unpickling other objects could run code")
    return "not a readable torch file (truncated, corrupt, or not written by torch.save)"


def load(path: str | os.PathLike, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Load a her-rl checkpoint safely, or raise a CheckpointError naming the file and why."""
    path = Path(path)
    if path.is_dir() and ((path / CHECKPOINT).exists() or (path / CHECKPOINT).is_symlink()):
        path = path / CHECKPOINT  # a run folder stands for its checkpoint
    why = _not_a_file(path)
    if why:
        raise CheckpointError(f"cannot load checkpoint {path}: {why}")
    if path.stat().st_size == 0:
        raise CheckpointError(f"cannot load checkpoint {path}: the file is empty (an interrupted save or a full disk)")
    sb3 = _sb3_model(path)
    if sb3:
        raise CheckpointError(f"cannot load checkpoint {path}: {sb3}")
    try:
        with warnings.catch_warnings():  # torch warns about pickle protocols of foreign files
            warnings.simplefilter("ignore")
            obj = torch.load(path, map_location=map_location, weights_only=True)
    except OSError as exc:
        # EINVAL: torch's zip reader seeking past the end of a truncated file, not an access problem
        why = _why_unloadable(exc) if exc.errno == errno.EINVAL else (exc.strerror or exc)
        raise CheckpointError(f"cannot load checkpoint {path}: {why}") from None
    except Exception as exc:  # torch raises RuntimeError, UnpicklingError, EOFError, ... for bad files
        raise CheckpointError(f"cannot load checkpoint {path}: {_why_unloadable(exc)}") from None
    if not isinstance(obj, dict) or not all(k in obj for k in KEYS):
        found = sorted(map(str, obj))[:8] if isinstance(obj, dict) else type(obj).__name__
        raise CheckpointError(f"cannot load checkpoint {path}: not a her-rl checkpoint (expected a dict with "
                              f"{', '.join(KEYS)}; found {found})")
    if not isinstance(obj["config"], dict) or not isinstance(obj["runner"], dict):
        raise CheckpointError(f"cannot load checkpoint {path}: not a her-rl checkpoint (config/runner are not dicts)")
    if not isinstance(obj["agent"], dict) or not obj["agent"]:
        raise CheckpointError(f"cannot load checkpoint {path}: its agent entry is empty or not a mapping")
    RunState.restore(obj["runner"], path)  # counters in range and consistent, or one line naming the entry
    _check_rng(obj["rng"], path)
    return {**obj, "config": without_retired(obj["config"])}


def _check_rng(state: Any, path: Path) -> None:
    """Whether ``state`` can be restored: tried on the global generators, which are then put back."""
    before = rng_state()
    try:
        set_rng_state(state)
    except Exception as exc:  # noqa: BLE001  (a tampered entry fails in many ways: Type/Value/Key/Index...)
        raise CheckpointError(f"cannot load checkpoint {path}: its rng entry cannot be restored "
                              f"({type(exc).__name__}: {' '.join(str(exc).split())[:120]})") from None
    finally:
        set_rng_state(before)


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
