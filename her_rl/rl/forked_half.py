"""One piece of a gradient update run in a forked copy of this process, on the second core.

Two pieces of one update on two threads of one process slow each other: each of HER-SAC's halves
takes 10-16% longer beside the other than alone, while in two processes neither slows
(docs/benchmarks/env-speed.md). A :class:`ForkedHalf` runs one piece in a child forked from this
process: the child has this process's objects as they were at the fork, and the tensors both must
see afterwards (the weights, the piece's inputs and outputs) are in shared memory, moved there
before the fork by the caller. Each call is one message each way over a pipe; a piece written as a
generator also stops at each ``yield`` until this process lets it go on (:meth:`ForkedHalf.proceed`),
which lets each side wait for the other to have read what it is about to write.

The child never outlives this process: it reads its pipe, which ends when this process does
(however it ends, SIGKILL included), and it ignores the interrupts a terminal or a job scheduler
sends the whole process group, which this process answers itself.
"""

from __future__ import annotations

import inspect
import multiprocessing as mp
import signal
import sys
import traceback
import weakref
from typing import Any, Callable

import torch

__all__ = ["ForkedHalf", "can_fork"]


def can_fork() -> bool:
    """Whether a copy of this process may be forked here: on Linux (Windows cannot fork, and on macOS
    forking a process that has used the system's frameworks is unsafe)."""
    return sys.platform.startswith("linux") and "fork" in mp.get_all_start_methods()


def _serve(piece: Callable[[], Any], conn, other_end, threads: int) -> None:
    other_end.close()  # this process's end: once it is closed everywhere, recv() below ends
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    torch.set_num_threads(threads)
    try:
        while conn.recv() is not None:
            try:
                steps = piece()
                for _ in steps if inspect.isgenerator(steps) else ():
                    conn.send(None)  # at a yield: this far, and wait to be let go on
                    if conn.recv() is None:
                        return
                reply = None
            except BaseException as e:  # sent back: the parent raises it in one line
                reply = f"{type(e).__name__}: {e}".splitlines()[0] if str(e) else type(e).__name__
                traceback.clear_frames(e.__traceback__)
            conn.send(reply)
    except (EOFError, OSError):  # the parent is gone
        return


def _stop(conn, process) -> None:
    try:
        conn.send(None)
    except (BrokenPipeError, OSError):
        pass
    conn.close()
    process.join(timeout=5)
    if process.is_alive():
        process.kill()
        process.join()


class ForkedHalf:
    """``piece()`` in a forked child: :meth:`start` forks, :meth:`submit` starts one call there,
    :meth:`result` waits for it to end or reach a ``yield`` (raising the child's error as a ``RuntimeError``),
    :meth:`proceed` lets it go on from there, :meth:`close` ends the child. ``piece`` reads and writes only
    tensors in shared memory, since nothing else is seen by both sides. A caller that stops between
    :meth:`submit` and the call's end, for its own error or the child's, closes the child: a
    :meth:`proceed` already sent would otherwise be read as the next call's start (a fresh fork follows)."""

    def __init__(self, piece: Callable[[], Any], name: str):
        self.piece, self.name = piece, name
        self._conn = None
        self._process = None
        self._finalizer = None

    @property
    def started(self) -> bool:
        return self._process is not None

    def start(self) -> None:
        ctx = mp.get_context("fork")
        here, there = ctx.Pipe()
        self._process = ctx.Process(target=_serve, args=(self.piece, there, here, torch.get_num_threads()),
                                    name=self.name, daemon=True)
        self._process.start()
        there.close()
        self._conn = here
        self._finalizer = weakref.finalize(self, _stop, here, self._process)

    def submit(self) -> None:
        self._conn.send(1)

    def proceed(self) -> None:
        self._conn.send(1)

    def result(self) -> None:
        try:
            reply = self._conn.recv()
        except (EOFError, OSError):
            self._process.join(timeout=5)
            code = self._process.exitcode
            self.close()
            raise RuntimeError(f"{self.name} ended (exit code {code}) in the middle of an update") from None
        if reply is not None:
            raise RuntimeError(f"{self.name} failed: {reply}")

    def close(self) -> None:
        if self._finalizer is not None:
            self._finalizer()
        self._conn = self._process = self._finalizer = None
