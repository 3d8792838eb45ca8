"""Cluster preemption under submitit (Hydra's SLURM and local launchers): checkpoint, then requeue.

Before a job is preempted (or, with ``hydra.launcher.max_num_timeout``, before it times out)
SLURM sends a signal (submitit asks for SIGUSR2); submitit's handler resubmits the job with its
original arguments and exits at once. Left alone, that loses everything since the last checkpoint,
and the requeued job, started without ``resume``, finds a checkpoint in its folder and is refused.

her-run takes the signal first: it ends the current iteration, checkpoints, leaves a marker in the
run folder and only then hands over to submitit's handler. A requeued job that finds the marker
resumes from the checkpoint (as ``resume=auto`` would) and removes it.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Callable

MARKER = "requeue.json"


def under_submitit() -> bool:
    """Whether this process is a submitit job (submitit exports SUBMITIT_EXECUTOR to its jobs)."""
    return bool(os.environ.get("SUBMITIT_EXECUTOR"))


def preemption_signal() -> int | None:
    """The signal submitit's jobs get before preemption or timeout (SUBMITIT_PREEMPT_SIGNAL, default USR2)."""
    if not under_submitit():
        return None
    return getattr(signal, "SIG" + os.environ.get("SUBMITIT_PREEMPT_SIGNAL", "USR2"), None)


def catch(note: Callable[[int], None]) -> Callable[[], None]:
    """Pass the preemption signal to ``note`` instead of letting submitit exit mid-iteration.
    Returns a function that reinstates submitit's handler."""
    sig = preemption_signal()
    if sig is None:
        return lambda: None
    try:
        previous = signal.signal(sig, lambda signum, frame: note(signum))
    except ValueError:  # not the main thread
        return lambda: None
    return lambda: signal.signal(sig, previous)


def hand_over(out: Path, signum: int, env_steps: int) -> None:
    """After the checkpoint: mark the folder for the requeued job, then let submitit requeue and exit."""
    (out / MARKER).write_text(json.dumps({"time": time.strftime("%Y-%m-%dT%H:%M:%S"), "pid": os.getpid(),
                                          "signal": signum, "env_steps": env_steps}) + "\n")
    handler = signal.getsignal(signum)
    if callable(handler):
        handler(signum, None)  # submitit: resubmit with the same arguments, then sys.exit


def requeued(out: Path) -> bool:
    """Whether this job is the requeued continuation of a preempted one in ``out``."""
    return under_submitit() and (out / MARKER).is_file()


def clear(out: Path) -> None:
    (out / MARKER).unlink(missing_ok=True)
