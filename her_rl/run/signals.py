"""Signals that end a training run at the end of its current iteration, and how the run then ends.

Ctrl-C, SIGTERM (a cluster pre-empting the job), SIGHUP (the terminal closed) and, under
submitit, its preemption signal are noted instead of killing the run mid-iteration, so the
checkpoint written after the loop is consistent with its counters; a second Ctrl-C aborts at once.
After that checkpoint, :meth:`StopSignals.end_run` hands a preempted job over to submitit to be
requeued (:mod:`her_rl.run.requeue`) and exits with status 128 + the signal.

Outside training (her-run's checks, the env probe, ``load=``), :func:`early_stops` turns the same
signals into :class:`Stopped`, so her-run ends with one line and 128 + the signal, not killed by it.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
from collections.abc import Iterator
from pathlib import Path

from her_rl.run import requeue
from her_rl.errors import Interrupt, printable, whole
from her_rl.folder import rundir
from her_rl.envs.families import split_id

ABORTED = "aborted by a second Ctrl-C; the run folder keeps its last complete checkpoint"
GRACE_S = 20.0  # after a stop signal, how long training may take to reach the end of its iteration
CAUGHT = tuple(s for s in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)) if s is not None)


class Stopped(Interrupt):
    """A signal outside training: raised from the handler, so ``finally`` blocks run (a run folder's lock
    is released, a temporary file removed); a KeyboardInterrupt, as code that cleans up on Ctrl-C expects."""

    def __init__(self, signum: int):
        super().__init__(f"stopped by signal {signum}")
        self.signum = signum


def resume_command(folder: Path, env_id: object = None, mode: str = "true") -> str:
    """The her-run line that continues the run in ``folder``, quoted for a shell; a run on an env of the
    user's module names its id, since a resume imports only a module the command line names."""
    words = ["her-run", f"resume={mode}", f"hydra.run.dir={folder}"]
    if env_id is not None and split_id(str(env_id))[0] is not None:
        words.append(f"env.id={env_id}")
    return whole(shlex.join(words))  # never cut to the screen's width: the user copies and runs it


def exit_at_once() -> None:
    """From now on a signal of ``CAUGHT`` that is not ignored ends the process at once, 128 + the signal:
    the one that stopped her-run is being handled, a further one must not interrupt that."""
    for sig in CAUGHT:
        try:
            if signal.getsignal(sig) is not signal.SIG_IGN:
                signal.signal(sig, lambda signum, frame: os._exit(128 + signum))
        except ValueError:  # not the main thread
            return


@contextlib.contextmanager
def early_stops() -> Iterator[None]:
    """While open, SIGINT, SIGTERM and SIGHUP raise :class:`Stopped` (a second one while that unwinds
    exits at once, 128 + the signal); a signal ignored at start (``nohup``) stays ignored. Training's
    :class:`StopSignals` takes over while it runs and hands back after."""
    def stop(signum: int, frame: object) -> None:
        exit_at_once()
        raise Stopped(signum)

    previous: dict[int, object] = {}
    for sig in CAUGHT:
        try:
            if signal.getsignal(sig) is not signal.SIG_IGN:
                previous[sig] = signal.signal(sig, stop)
        except ValueError:  # not the main thread: leave the signals alone
            break
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


class Stage:
    """How far her-run got: ``name`` is checks, load, job, sweep or done; ``folder`` the run folder
    once known, ``sweep`` the sweep folder once a job of it started."""

    def __init__(self) -> None:
        self.name, self.folder, self.sweep, self.env_id = "checks", None, None, None

    def stopped_line(self, signum: int) -> str:
        """The line a :class:`Stopped` ends her-run with, true to what is on disk: a run folder the
        stop left empty is removed first."""
        what, folder = f"stopped by signal {signum}", self.folder
        if self.name == "checks":
            return f"{what} before training started; nothing was written"
        if self.name == "load":
            return f"{what} during the load= evaluation"
        if self.name == "done":
            return f"{what} as her-run was ending"
        if self.name == "sweep":
            if folder is not None and self.sweep is not None:
                rundir.remove_if_empty(folder, stop_at=self.sweep)
            how = f" in {self.sweep}; her-run -m with the same overrides, resume=auto and hydra.sweep.dir=" \
                  f"{self.sweep} continues it" if self.sweep else ""
            return f"{what} during the sweep{how}"
        if folder is None:  # Hydra may have made the default folder, but the run had not begun
            return f"{what} before training started; no run file was written"
        rundir.remove_if_empty(folder)
        if not folder.exists():
            return f"{what} before training started; nothing was written"
        if (folder / rundir.CHECKPOINT).exists():
            return f"{what}; run folder {folder} keeps its last checkpoint: {resume_command(folder, self.env_id)} " \
                   "continues it"
        return f"{what} before the run's first checkpoint; run folder {folder} holds none: " \
               f"{resume_command(folder, self.env_id, 'auto')} starts it again"


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
        if not self.received and self._previous:  # the first stop: the run has GRACE_S to reach its iteration's end
            self._previous.setdefault(signal.SIGALRM, signal.signal(signal.SIGALRM, self._grace_over))
            signal.setitimer(signal.ITIMER_REAL, GRACE_S)
        self.received.append(signum)

    def _grace_over(self, signum: int, frame: object) -> None:
        """The iteration outlived the grace after a stop signal (a slow env step): leave now, as a stop
        outside training does; the last checkpoint on disk is the one a resume continues from."""
        raise Stopped(self.signum or signal.SIGTERM)

    @staticmethod
    def _abort() -> None:
        """A second Ctrl-C: leave now. KeyboardInterrupt unwinds the ``finally`` blocks (a checkpoint
        write cut short removes its temporary file, so the last complete checkpoint stays); her-run
        prints its message as one line (exit 130), Python callers get it as usual. A further Ctrl-C
        while unwinding ends the process at once."""
        signal.signal(signal.SIGINT, lambda signum, frame: os._exit(130))
        raise Interrupt(ABORTED)

    def __enter__(self) -> StopSignals:
        for sig in CAUGHT:
            try:
                if signal.getsignal(sig) is not signal.SIG_IGN:  # nohup's ignored SIGHUP stays ignored
                    self._previous[sig] = signal.signal(sig, self._handler)
            except ValueError:  # not the main thread (some launchers): keep default behaviour
                pass
        self._restore_preemption = requeue.catch(self.received.append)  # under submitit: its preemption signal
        return self

    def iteration_ended(self) -> None:
        """Training reached the end of an iteration: what follows (the last checkpoint) has no deadline."""
        if signal.SIGALRM in self._previous:
            signal.setitimer(signal.ITIMER_REAL, 0)

    def __exit__(self, *exc: object) -> None:
        self.iteration_ended()
        for sig, old in self._previous.items():
            signal.signal(sig, old)
        self._previous.clear()
        self._restore_preemption()

    def end_run(self, out: Path, env_steps: int, saved: bool, env_id: object = None) -> None:
        """After a signal stopped the run: requeue a preempted job, then exit 128 + the signal."""
        signum = self.signum
        if signum is None:
            return
        if signum == requeue.preemption_signal() and saved:
            print(printable(f"preempted at env step {env_steps:,} (checkpoint saved); handing over to submitit "
                            "to requeue the job, which resumes here"), flush=True)
            requeue.hand_over(out, signum, env_steps)
        what = "checkpoint saved" if saved else "checkpoint NOT saved"
        print(printable(f"stopped by signal {signum} at env step {env_steps:,} ({what}); "
                        f"continue with: {resume_command(out, env_id)}"), flush=True)
        raise SystemExit(128 + signum)


__all__ = ["ABORTED", "Stage", "StopSignals", "Stopped", "early_stops", "exit_at_once"]
