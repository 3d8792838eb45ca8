"""Signals that end a training run at the end of its current iteration, and how the run then ends.

Ctrl-C, SIGTERM (a cluster pre-empting the job), SIGHUP (the terminal closed) and, under
submitit, its preemption signal are noted instead of killing the run mid-iteration, so the
checkpoint written after the loop is consistent with its counters; a second Ctrl-C aborts at once.
After that checkpoint, :meth:`StopSignals.end_run` hands a preempted job over to submitit to be
requeued (:mod:`her_rl.requeue`) and exits with status 128 + the signal.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

from her_rl import requeue

ABORTED = "aborted by a second Ctrl-C; the run folder keeps its last complete checkpoint"
CAUGHT = tuple(s for s in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)) if s is not None)


class StopSignals:
    """While installed (a ``with`` block), the signals received, first one first, in ``received``."""

    def __init__(self) -> None:
        self.received: list[int] = []
        self._previous: dict[int, object] = {}
        self._restore_preemption = lambda: None

    @property
    def signum(self) -> int | None:
        """The first signal received, None while there is none."""
        return self.received[0] if self.received else None

    def _handler(self, signum: int, frame: object) -> None:
        if self.received and signum == signal.SIGINT:
            self._abort()
        self.received.append(signum)

    @staticmethod
    def _abort() -> None:
        """A second Ctrl-C: leave now. KeyboardInterrupt unwinds the ``finally`` blocks (a checkpoint
        write cut short removes its temporary file, so the last complete checkpoint stays); her-run
        prints its message as one line (exit 130), Python callers get it as usual. A further Ctrl-C
        while unwinding ends the process at once."""
        signal.signal(signal.SIGINT, lambda signum, frame: os._exit(130))
        raise KeyboardInterrupt(ABORTED)

    def __enter__(self) -> StopSignals:
        for sig in CAUGHT:
            try:
                self._previous[sig] = signal.signal(sig, self._handler)
            except ValueError:  # not the main thread (some launchers): keep default behaviour
                pass
        self._restore_preemption = requeue.catch(self.received.append)  # under submitit: its preemption signal
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, old in self._previous.items():
            signal.signal(sig, old)
        self._previous.clear()
        self._restore_preemption()

    def end_run(self, out: Path, env_steps: int, saved: bool) -> None:
        """After a signal stopped the run: requeue a preempted job, then exit 128 + the signal."""
        signum = self.signum
        if signum is None:
            return
        if signum == requeue.preemption_signal() and saved:
            print(f"preempted at env step {env_steps:,} (checkpoint saved); handing over to submitit "
                  "to requeue the job, which resumes here", flush=True)
            requeue.hand_over(out, signum, env_steps)
        what = "checkpoint saved" if saved else "checkpoint NOT saved"
        print(f"stopped by signal {signum} at env step {env_steps:,} ({what}); "
              f"continue with: her-run resume=true hydra.run.dir={out}", flush=True)
        raise SystemExit(128 + signum)


__all__ = ["ABORTED", "StopSignals"]
