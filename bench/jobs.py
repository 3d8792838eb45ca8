"""The job loop of a benchmark: every job in order, in this process or one fresh process per job,
and its JSON file of rows rewritten after every run."""

from __future__ import annotations

import argparse
import dataclasses
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
    from her_rl.folder.atomic import write_atomic_text

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic_text(path, json.dumps(report, indent=1, default=str) + "\n")


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, argparse.Namespace):
        return vars(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def write_rows(path: str | Path, rows: Any, settings: Any = None, **sections: Any) -> None:
    """A benchmark's JSON file: ``{"settings": ..., "rows": [...], **sections}`` (no settings key
    when None), a dataclass row as its fields and an argparse namespace as its dict."""
    report = {} if settings is None else {"settings": _plain(settings)}
    write_report(path, {**report, "rows": _plain(rows), **_plain(sections)})


def run_jobs(run: Callable[[Any], Any], jobs: Iterable[Any], at_once: int = 1, path: str | Path | None = None,
             settings: Any = None) -> list[Any]:
    """The rows of ``run`` over every job (see :func:`each_result`); with a ``path``, the JSON rows
    (:func:`write_rows`) rewritten after every run, so a long bench stopped early keeps its runs."""
    rows: list[Any] = []
    for row in each_result(run, jobs, at_once):
        rows.append(row)
        if path is not None:
            write_rows(path, rows, settings)
    return rows
