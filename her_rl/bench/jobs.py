"""The job loop of a benchmark: every job in order, in this process or one fresh process per job,
and the JSON report rewritten after every run."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator


def each_result(run: Callable[[Any], Any], jobs: Iterable[Any], at_once: int = 1) -> Iterator[Any]:
    """``run(job)`` for every job, results in job order. ``at_once`` 1: in this process (no
    pickling, so it also works for a script loaded by path); more: a fresh spawned process per job
    (nothing a run leaves behind reaches the next), that many at once."""
    if at_once <= 1:
        yield from map(run, jobs)
        return
    with multiprocessing.get_context("spawn").Pool(at_once, maxtasksperchild=1) as pool:
        yield from pool.imap(run, jobs)


def write_report(path: str | Path, report: dict[str, Any]) -> None:
    """Write the report as JSON (paths as text), atomically: rewritten after every run, a bench
    stopped at any moment leaves the previous complete file."""
    from her_rl.checkpoint import write_atomic_text

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic_text(path, json.dumps(report, indent=1, default=str) + "\n")
