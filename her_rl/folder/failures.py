"""A sweep job that fails does not stop the sweep.

Inside a multirun, a job's error (her-rl's own, or anything the user's env raises) is one line on
stderr and a ``failed.json`` in the job's folder (``{"error": line, "exit_code": n}``), and the job
returns no objective (None) to the sweeper, so Hydra (any launcher) and Optuna go on with the other
jobs. None rather than NaN: the Optuna sweeper marks a trial without a number as failed, while a NaN
makes it (hydra-optuna-sweeper 1.3 with optuna 2.10) fail the whole sweep. When the sweep ends,
:class:`her_rl.summary.report.SummaryCallback` writes the summary (which lists every ``failed.json`` with
its reason) and calls :func:`end_sweep`; ``her-run`` then exits with one line naming the failed jobs
(:func:`exit_if_failed`). A new attempt in a folder removes its old
``failed.json`` (:func:`clear`), so the file always describes the folder's last attempt.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode

from her_rl.errors import ConfigError, EnvError, NonFiniteError, OutputError, one_line, outside, printable
from her_rl.folder.atomic import write_atomic_text
from her_rl.folder.parse import json_value
from her_rl.folder.rundir import FAILED, FolderBusy
_SLACK_S = 1.0  # file times come from a coarse kernel clock: a job's file may look a little older than the sweep
# The sweep this process launched; "unrecorded": failed jobs of this process whose failed.json could not be written.
_sweep: dict[str, Any] = {"start": None, "failures": [], "jobs": 0, "unrecorded": []}


class JobDied(RuntimeError):
    """A sweep job whose process ended without handing back its result (``os._exit``, a crash, a kill):
    the line names the job and how its process ended."""

    exit_code = 1


def in_multirun() -> bool:
    return HydraConfig.initialized() and HydraConfig.get().mode == RunMode.MULTIRUN


def describe(exc: BaseException) -> tuple[str, int]:
    """One line and the exit status for a job's error; an unexpected one names its type and where it
    was raised (the user's env, most likely), not a traceback."""
    if isinstance(exc, (ConfigError, EnvError, NonFiniteError, OutputError, JobDied)):
        return one_line(exc), exc.exit_code
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" (raised at {Path(frames[-1].filename).name}:{frames[-1].lineno} in {frames[-1].name})" if frames else ""
    return f"{type(exc).__name__}: {outside(one_line(exc)[:300])}{where}", 1


def clear(out: Path) -> None:
    """Remove the record of an earlier attempt: this job starts afresh in the folder."""
    path = out / FAILED
    if path.is_file() and not path.is_symlink():
        path.unlink(missing_ok=True)


def record(out: Path, line: str, code: int, overrides: list[str]) -> bool:
    """Write ``failed.json`` atomically (temp file in the folder, fsync, rename); the overrides name
    the job's setting in the summary when it failed before writing its history. False (and a
    warning line) when it cannot be written."""
    path = out / FAILED
    try:
        out.mkdir(parents=True, exist_ok=True)
        if path.is_symlink() or (path.exists() and not path.is_file()):  # never write where a link points
            raise OSError(f"{path} is not a regular file")
        text = json.dumps({"error": line, "exit_code": code, "overrides": list(overrides)}, indent=2) + "\n"
        write_atomic_text(path, text)
        return True
    except OSError as exc:
        print(printable(f"her-run: warning: cannot record the failure in {path}: {exc.strerror or exc}"),
              file=sys.stderr)
        return False


def _shown(folder: Path) -> str:
    """A folder as the user named it: relative to the current folder when it lies below it."""
    where = os.path.relpath(folder)
    return str(folder) if where.startswith("..") else where


def job_failed(out: Path, exc: BaseException, overrides: list[str]) -> None:
    """Report and record a failed sweep job; the sweeper gets no objective for it (None)."""
    line, code = describe(exc)
    # one write with its newline: jobs failing at once (the launcher's threads) must not interleave their lines
    sys.stderr.write(printable(f"her-run: error: sweep job {_shown(out)}: {line}") + "\n")
    sys.stderr.flush()
    if isinstance(exc, FolderBusy) or not record(out, line, code, overrides):  # a folder another run holds: not ours
        _sweep["unrecorded"].append((out, line, code))  # still counted at the end (basic launcher: this process)


def read(path: Path) -> dict[str, Any]:
    """A ``failed.json``: ValueError (one line) when it is not an object with an ``error`` line."""
    try:
        data = json_value(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"{FAILED} cannot be read ({one_line(getattr(exc, 'strerror', None) or exc)})") from None
    if not isinstance(data, dict) or not isinstance(data.get("error"), str):
        raise ValueError(f"{FAILED} is not an object with an error line")
    return data


# ---- the end of a sweep, in the process that launched it ------------------------------------------

def start_sweep() -> None:
    _sweep.update(start=time.time() - _SLACK_S, failures=[], jobs=0, unrecorded=[])


def _fresh(path: Path, start: float) -> bool:
    try:
        return path.stat().st_mtime >= start
    except OSError:
        return False


def end_sweep(root: Path) -> None:
    """Note the jobs of this sweep that failed (a ``failed.json`` written since it started) and how
    many jobs ran (those and the fresh ``results.json``), for :func:`exit_if_failed`."""
    start = _sweep["start"] if _sweep["start"] is not None else 0.0
    failures = list(_sweep["unrecorded"])
    for path in sorted(root.rglob(FAILED)):
        if _fresh(path, start) and path.parent not in {folder for folder, _, _ in failures}:
            try:
                data = read(path)
                code = data.get("exit_code")
                failures.append((path.parent, data["error"], code if isinstance(code, int) and code > 0 else 1))
            except ValueError as exc:
                failures.append((path.parent, str(exc), 1))
    failed_dirs = {folder for folder, _, _ in failures}
    done = sum(1 for p in root.rglob("results.json") if p.parent not in failed_dirs and _fresh(p, start))
    _sweep.update(failures=failures, jobs=done + len(failures))


def exit_if_failed() -> None:
    """One line and a non-zero exit when jobs of the sweep that just ended failed: the exit status of
    the jobs when they agree (3 for non-finite training, ...), else 1."""
    failures = _sweep["failures"]
    if not failures:
        return
    codes = {code for _, _, code in failures}
    shown = "; ".join(f"{_shown(folder)}: {error}" for folder, error, _ in failures[:3])
    more = f"; and {len(failures) - 3} more (summary.md lists them)" if len(failures) > 3 else ""
    jobs = "job" if _sweep["jobs"] == 1 else "jobs"
    print(printable(f"her-run: error: {len(failures)} of {_sweep['jobs']} sweep {jobs} failed: {shown}{more}"),
          file=sys.stderr, flush=True)
    sys.exit(codes.pop() if len(codes) == 1 else 1)


__all__ = ["FAILED", "JobDied", "clear", "describe", "end_sweep", "exit_if_failed", "in_multirun", "job_failed",
           "read", "record", "start_sweep"]
