"""A run of ours for a benchmark: ``her-run`` with overrides, read back from its results and its
metrics file (so a temporary run folder can go as soon as the run is read)."""

from __future__ import annotations

import contextlib
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from her_rl.folder.metrics import Point, read_metrics


@dataclass
class OursRun:
    results: dict[str, Any]  # results.json
    metrics: dict[str, list[Point]]  # metrics.jsonl, by tag
    started: float  # Unix time just before the run was built: wall seconds count from here

    def curve(self, tag: str = "eval/success_rate") -> list[tuple[int, float, float]]:
        """(env step, wall seconds since the start, value) of every point of ``tag``, rounded as the
        benchmarks' JSON rows keep them."""
        return [(p.step, round(p.wall_time - self.started, 2), round(p.value, 3)) for p in self.metrics.get(tag, [])]

    def first_step_above(self, tag: str, threshold: float) -> int | None:
        return next((p.step for p in self.metrics.get(tag, []) if p.value > threshold), None)


def run_ours(overrides: Sequence[str], out: str | Path | None = None) -> OursRun:
    """``her-run <overrides>`` in ``out`` (None: a temporary folder, removed once read). The run's
    own lines go to stderr, so stdout keeps the benchmark's tables."""
    from her_rl.config.compose import compose
    from her_rl.run.runner import run

    with contextlib.ExitStack() as stack:
        stack.enter_context(contextlib.redirect_stdout(sys.stderr))
        if out is None:
            out = stack.enter_context(tempfile.TemporaryDirectory(prefix="bench_"))
        started = time.time()
        results = run(compose(list(overrides)), out_dir=out)
        return OursRun(results, read_metrics(out), started)
