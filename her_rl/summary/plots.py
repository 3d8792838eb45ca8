"""The figures of a sweep summary: ``curves.png`` (eval metric against env steps) and ``by_<key>.png``.

Curves show only what the runs measured: a run counts from its first evaluation to its last, never
before and never after, so the mean at a step is over the runs that have data at that step. The
one exception is a run that stopped because it was solved: its policy stops changing there, so it
keeps its final value to the right (otherwise the mean would drop where the fastest seeds stop).
A run with a single evaluation is a dot at that evaluation, not a line.
"""

from __future__ import annotations

import io
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from her_rl.errors import printable
from her_rl.folder.atomic import write_atomic_bytes
from her_rl.folder.metrics import read_metrics
from her_rl.summary.runs import Run

# Lazy imports in this file (tagged `# lazy: matplotlib`): her-summary imports this module at its start and
# draws only for --plots; matplotlib (over half a second) is imported then, its Agg backend chosen first.

LABELS = {"eval_success_rate": "eval success rate", "eval_return": "eval return"}
CURVES_CAPTION = ("line: mean over the runs with an evaluation at or before that step and not yet ended (a run "
                  "that stopped when solved keeps its final value); band: ±1 std where 2+ runs have data; "
                  "dot: a run with a single evaluation")
BY_KEY_CAPTION = "mean of the finished runs' final evaluation; band: bootstrap 95% interval of the mean"


@dataclass
class Curve:
    """One run's evaluations, steps increasing; ``holds``: it stopped when solved."""
    steps: np.ndarray
    values: np.ndarray
    holds: bool = False


def runs_drawn(n: int) -> str:
    return f"{n} run" if n == 1 else f"{n} runs"


def read_curve(run: Run) -> Curve | None:
    """The run's evaluations from its metrics file (TensorBoard events for folders written before
    it existed); None when it has none."""
    tag = "eval/success_rate" if run.goal_env else "eval/return"
    by_step = {float(p.step): p.value for p in read_metrics(run.folder).get(tag, []) if math.isfinite(p.value)}
    if not by_step:
        return None
    steps = np.array(sorted(by_step))
    r = run.results
    stopped_solved = bool(r.get("solved")) and r.get("solved_at_env_steps") is not None \
        and r.get("env_steps") == r.get("solved_at_env_steps")
    return Curve(steps, np.array([by_step[s] for s in steps]), stopped_solved)


def mean_curve(curves: Sequence[Curve], points: int = 200) -> tuple[np.ndarray, ...] | None:
    """(grid, mean, std, count) over the curves with 2+ evaluations; NaN where no run has data,
    std NaN where fewer than 2 do. None when no curve has 2+ evaluations."""
    lines = [c for c in curves if len(c.steps) > 1]
    if not lines:
        return None
    start, end = min(c.steps[0] for c in lines), max(c.steps[-1] for c in lines)
    grid = np.union1d(np.linspace(start, end, points), np.concatenate([c.steps for c in lines]))
    ys = np.full((len(lines), len(grid)), np.nan)
    for i, c in enumerate(lines):
        last = end if c.holds else c.steps[-1]
        inside = (grid >= c.steps[0]) & (grid <= last)
        ys[i, inside] = np.interp(grid[inside], c.steps, c.values)
    count = np.isfinite(ys).sum(0)
    with np.errstate(all="ignore"):
        mean = np.where(count > 0, np.nansum(ys, 0) / np.maximum(count, 1), np.nan)
        dev = np.where(np.isfinite(ys), ys - mean, 0.0)
        std = np.where(count > 1, np.sqrt((dev ** 2).sum(0) / np.maximum(count, 1)), np.nan)
    return grid, mean, std, count


def _title(root: Path) -> str:
    return root.resolve().name or str(root)


def curves_figure(groups: Sequence[tuple[str, str, Sequence[Curve]]], title: str):
    """One panel per metric; ``groups``: (label, metric, curves) per setting."""
    import matplotlib.pyplot as plt  # lazy: matplotlib

    metrics = list(dict.fromkeys(metric for _, metric, curves in groups if curves)) or ["eval_success_rate"]
    fig, axes = plt.subplots(1, len(metrics), figsize=(7 * len(metrics), 4.8), squeeze=False)
    for ax, metric in zip(axes[0], metrics):
        for label, m, curves in groups:
            if m != metric or not curves:
                continue
            name = f"{label} ({runs_drawn(len(curves))})"
            color = None
            drawn = mean_curve(curves)
            if drawn is not None:
                grid, mean, std, _ = drawn
                (line,) = ax.plot(grid, mean, label=name)
                color, name = line.get_color(), None
                ax.fill_between(grid, mean - std, mean + std, alpha=0.2, color=color)
            for c in (c for c in curves if len(c.steps) == 1):
                (dot,) = ax.plot(c.steps, c.values, marker="o", linestyle="none", color=color, label=name)
                color, name = dot.get_color(), None
        ax.set_title(f"{title}: {LABELS[metric]} against env steps", fontsize=10)
        ax.set_xlabel("env steps")
        ax.set_ylabel(LABELS[metric])
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    fig.text(0.01, 0.01, CURVES_CAPTION, fontsize=6, wrap=True)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    return fig


def numeric_keys(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Swept keys whose values (in the rows that have the key) are all numbers and take 2+ values."""
    values: dict[str, set[str]] = {}
    for row in rows:
        for key, value in row["keys"].items():
            values.setdefault(key, set()).add(value)

    def number(v: str) -> bool:
        try:
            return math.isfinite(float(v))
        except ValueError:
            return False

    return [k for k, vs in sorted(values.items()) if len(vs) > 1 and all(number(v) for v in vs)]


def by_key_figure(rows: Sequence[dict[str, Any]], key: str, title: str):
    """The metric against ``key``, one line per value of the other keys (and per metric if they differ);
    rows without ``key`` are left out and counted in the title."""
    import matplotlib.pyplot as plt  # lazy: matplotlib

    have = [r for r in rows if key in r["keys"]]
    several = len({r["metric"] for r in have}) > 1
    lines: dict[str, list[tuple[float, float, float, float]]] = {}
    for row in have:
        rest = " ".join(f"{k}={v}" for k, v in row["keys"].items() if k != key) or "all"
        if several:
            rest += f" [{LABELS[row['metric']]}]"
        lines.setdefault(rest, []).append((float(row["keys"][key]), row["mean"], row["ci_low"], row["ci_high"]))
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    for rest, points in lines.items():
        x, y, lo, hi = map(np.array, zip(*sorted(points)))
        ax.plot(x, y, marker="o", label=rest)
        ax.fill_between(x, lo, hi, alpha=0.2)
    metric = "metric" if several else LABELS[have[0]["metric"]]
    left = len(rows) - len(have)
    ax.set_title(f"{title}: {metric} by {key}" + (f" ({left} setting{'s' * (left > 1)} without {key} left out)" if left else ""),
                 fontsize=10)
    xs = [float(row["keys"][key]) for row in have]
    if min(xs) > 0 and max(xs) > 10 * min(xs):  # a learning-rate sweep: its decades evenly spaced
        ax.set_xscale("log")
    ax.set_xlabel(key + (" (log scale)" if ax.get_xscale() == "log" else ""))
    ax.set_ylabel(metric)
    ax.legend(fontsize=7)
    fig.text(0.01, 0.01, BY_KEY_CAPTION, fontsize=6)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return fig


def _saver(fig) -> Callable[[Path], None]:
    import matplotlib.pyplot as plt  # lazy: matplotlib

    def save(path: Path) -> None:
        try:
            data = io.BytesIO()
            fig.savefig(data, dpi=120, format=path.suffix.lstrip(".") or "png")
            write_atomic_bytes(path, data.getvalue())  # a full disk keeps the previous figure whole
        finally:
            plt.close(fig)
    return save


def figures(runs: Sequence[Run], root: Path, rows: Sequence[dict[str, Any]], err=None,
            prog: str = "her-summary") -> Iterator[tuple[Path, Callable[[Path], None]]]:
    """(path, save) for curves.png and every by_<key>.png; headless (Agg). A run whose metrics cannot
    be read is one line on ``err`` and left out of the curves."""
    import matplotlib  # lazy: matplotlib

    matplotlib.use("Agg")
    err = err or sys.stderr
    title = _title(root)
    groups = []
    for row in rows:
        curves = []
        for run in (r for r in runs if r.group == row["group"] and r.status != "failed"):
            try:
                curve = read_curve(run)
            except Exception as exc:  # noqa: BLE001  (a damaged metrics file: the table still stands)
                print(printable(f"{prog}: warning: {run.folder}: metrics unreadable ({exc}); left out of curves.png"),
                      file=err)
                continue
            if curve is not None:
                curves.append(curve)
        groups.append((row["setting"], row["metric"], curves))
    yield root / "curves.png", _saver(curves_figure(groups, title))
    for key in numeric_keys(rows):
        yield root / f"by_{key.replace('/', '_')}.png", _saver(by_key_figure(rows, key, title))
