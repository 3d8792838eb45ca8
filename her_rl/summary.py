"""What a sweep (or a folder of runs) found: one row per setting, learning curves, metric vs swept key.

``her-summary DIR`` (and, at the end of every multirun, :class:`SummaryCallback`) reads every run
folder below DIR: its ``config.yaml``, ``history.jsonl`` (the overrides that defined it),
``results.json`` when it finished, and its TensorBoard evaluations. Runs are grouped by their
overrides minus ``seed`` (and the keys that may change on resume); each group becomes a row with
the number of seeds, how many finished, failed or are still running, how many solved, the final
evaluation metric (mean, std and a bootstrap 95% interval of the mean), and the median env steps and
wall seconds of the solved runs. Written as ``summary.csv`` and ``summary.md`` in DIR, printed as a
table; with matplotlib, ``curves.png`` (eval metric against env steps, mean and a band of one std
over seeds, runs resampled on a common grid) and, when a numeric key was swept, ``by_<key>.png``.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from hydra.experimental.callback import Callback

# Keys that do not define an experiment (run bookkeeping; seeds are what a row averages over).
NOT_A_SETTING = ("seed", "experiment", "resume", "load", "progress", "device", "threads", "budget.", "eval.every_iterations", "eval.every_env_steps",
                 "eval.episodes", "eval.stop_when_solved", "checkpoint.", "guard.", "hydra.", "hydra/")


@dataclass
class Run:
    folder: Path
    setting: tuple[str, ...]
    seed: int | None
    status: str  # done | running | failed
    results: dict[str, Any] = field(default_factory=dict)
    goal_env: bool = True


def _is_setting(override: str) -> bool:
    key = override.lstrip("+~").split("=", 1)[0]
    return not any(key == k or (k.endswith((".", "/")) and key.startswith(k)) for k in NOT_A_SETTING)


def _live(folder: Path) -> bool:
    from her_rl.registry import ConfigError
    from her_rl.rundir import RunLock

    try:
        lock = RunLock.probe(folder)
    except ConfigError:
        return True
    if lock is not None:
        lock.release()
    return False


def read_run(folder: Path) -> Run:
    history = folder / "history.jsonl"
    overrides: list[str] = []
    if history.is_file():
        first = history.read_text().splitlines()[:1]
        overrides = list(json.loads(first[0]).get("overrides") or []) if first else []
    seed = next((int(o.split("=", 1)[1]) for o in overrides if o.split("=", 1)[0] == "seed"), None)
    results_file = folder / "results.json"
    if results_file.is_file():
        results = json.loads(results_file.read_text())
        return Run(folder, tuple(sorted(o for o in overrides if _is_setting(o))), results.get("seed", seed), "done",
                   results, "eval_success_rate" in results)
    status = "running" if _live(folder) else "failed"
    return Run(folder, tuple(sorted(o for o in overrides if _is_setting(o))), seed, status)


def find_runs(root: Path) -> list[Run]:
    """Every run folder below ``root`` (a folder with a history.jsonl or a results.json), sorted."""
    folders = {p.parent for pattern in ("history.jsonl", "results.json") for p in root.rglob(pattern)}
    return [read_run(f) for f in sorted(folders)]


def bootstrap_ci(values: Sequence[float], level: float = 0.95, draws: int = 2000, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean (a fixed seed: the same runs give the same interval)."""
    x = np.asarray(values, dtype=float)
    if len(x) < 2:
        return (float(x[0]), float(x[0])) if len(x) else (math.nan, math.nan)
    means = x[np.random.default_rng(seed).integers(0, len(x), size=(draws, len(x)))].mean(axis=1)
    lo, hi = np.quantile(means, [(1 - level) / 2, 1 - (1 - level) / 2])
    return float(lo), float(hi)


def _metric(run: Run) -> float | None:
    key = "eval_success_rate" if run.goal_env else "eval_return"
    value = run.results.get(key)
    return None if value is None else float(value)


def summarise(runs: Sequence[Run]) -> list[dict[str, Any]]:
    rows = []
    for setting in dict.fromkeys(r.setting for r in runs):
        group = [r for r in runs if r.setting == setting]
        done = [r for r in group if r.status == "done"]
        values = [v for v in (_metric(r) for r in done) if v is not None]
        solved = [r for r in done if r.results.get("solved")]
        lo, hi = bootstrap_ci(values)
        rows.append({
            "setting": " ".join(setting) or "(defaults)",
            "metric": "eval_success_rate" if all(r.goal_env for r in done) else "eval_return",
            "seeds": len(group), "done": len(done), "running": sum(r.status == "running" for r in group),
            "failed": sum(r.status == "failed" for r in group), "solved": len(solved),
            "mean": float(np.mean(values)) if values else math.nan,
            "std": float(np.std(values, ddof=1)) if len(values) > 1 else math.nan, "ci_low": lo, "ci_high": hi,
            "median_steps_to_solve": float(np.median([r.results["solved_at_env_steps"] for r in solved])) if solved else math.nan,
            "median_wall_s": float(np.median([r.results["wall_time_s"] for r in solved])) if solved else math.nan,
        })
    return rows


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return "-" if math.isnan(value) else f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)


def markdown(rows: Sequence[dict[str, Any]]) -> str:
    cols = ["setting", "seeds", "done", "running", "failed", "solved", "metric", "mean", "std", "ci_low", "ci_high",
            "median_steps_to_solve", "median_wall_s"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(_fmt(row[c]) for c in cols) + " |" for row in rows]
    return "\n".join(lines)


def _curve(run: Run) -> tuple[np.ndarray, np.ndarray] | None:
    import logging

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    logging.getLogger("tensorboard").setLevel(logging.ERROR)  # "No path found after ..." at the end of a file

    tag = "eval/success_rate" if run.goal_env else "eval/return"
    acc = EventAccumulator(str(run.folder / "tb"), size_guidance={"scalars": 0})
    acc.Reload()
    if tag not in acc.Tags().get("scalars", []):
        return None
    events = acc.Scalars(tag)
    return np.array([e.step for e in events], dtype=float), np.array([e.value for e in events], dtype=float)


def plot(runs: Sequence[Run], root: Path, rows: Sequence[dict[str, Any]]) -> list[Path]:
    """curves.png and, for a numeric swept key, by_<key>.png; headless (Agg)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for setting in dict.fromkeys(r.setting for r in runs):
        curves = [c for c in (_curve(r) for r in runs if r.setting == setting and r.status != "failed") if c]
        if not curves:
            continue
        # Resample on a common grid; a run that stopped early (solved) keeps its last value.
        grid = np.linspace(0, max(c[0][-1] for c in curves), 100)
        ys = np.stack([np.interp(grid, steps, values) for steps, values in curves])
        mean, std = ys.mean(0), ys.std(0)
        label = " ".join(setting) or "(defaults)"
        ax.plot(grid, mean, label=f"{label} ({len(curves)} seeds)")
        ax.fill_between(grid, mean - std, mean + std, alpha=0.2)
    ax.set_xlabel("env steps")
    ax.set_ylabel("eval success rate" if all(r.goal_env for r in runs) else "eval return")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(root / "curves.png", dpi=120)
    plt.close(fig)
    written.append(root / "curves.png")

    numeric = _numeric_keys(rows)
    for key in numeric:
        fig, ax = plt.subplots(figsize=(6, 4))
        lines: dict[str, list[tuple[float, float, float, float]]] = {}
        for row in rows:
            parts = dict(p.split("=", 1) for p in row["setting"].split() if "=" in p)
            rest = " ".join(f"{k}={v}" for k, v in parts.items() if k != key) or "all"
            lines.setdefault(rest, []).append((float(parts[key]), row["mean"], row["ci_low"], row["ci_high"]))
        for rest, points in lines.items():
            x, y, lo, hi = map(np.array, zip(*sorted(points)))
            ax.plot(x, y, marker="o", label=rest)
            ax.fill_between(x, lo, hi, alpha=0.2)
        ax.set_xlabel(key)
        ax.set_ylabel(rows[0]["metric"])
        ax.legend(fontsize=7)
        fig.tight_layout()
        path = root / f"by_{key.replace('/', '_')}.png"
        fig.savefig(path, dpi=120)
        plt.close(fig)
        written.append(path)
    return written


def _numeric_keys(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Swept keys whose values are all numbers and take more than one value across rows."""
    values: dict[str, set[str]] = {}
    for row in rows:
        for part in row["setting"].split():
            if "=" in part:
                key, value = part.split("=", 1)
                values.setdefault(key, set()).add(value)

    def number(v: str) -> bool:
        try:
            float(v)
            return True
        except ValueError:
            return False

    return [k for k, vs in values.items() if len(vs) > 1 and all(number(v) for v in vs)]


def write_summary(root: Path, plots: bool = True, out=sys.stdout) -> list[dict[str, Any]]:
    runs = find_runs(root)
    if not runs:
        raise FileNotFoundError(f"no run folders (history.jsonl or results.json) below {root}")
    rows = summarise(runs)
    with open(root / "summary.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    table = markdown(rows)
    (root / "summary.md").write_text(table + "\n")
    print(table, file=out)
    if plots:
        for path in plot(runs, root, rows):
            print(f"wrote {path}", file=out)
    return rows


class SummaryCallback(Callback):
    """Hydra callback: summarise the sweep folder when a multirun ends (``hydra.callbacks``)."""

    def on_multirun_end(self, config: Any, **kwargs: Any) -> None:
        root = Path(str(config.hydra.sweep.dir))
        try:
            write_summary(root)
        except Exception as exc:  # noqa: BLE001  (a summary must never turn a finished sweep into a failure)
            print(f"her-run: warning: no sweep summary for {root}: {exc}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="her-summary", description="Summarise the runs below a folder (a sweep or single runs).")
    p.add_argument("folder", type=Path)
    p.add_argument("--no-plots", action="store_true", help="only the table, CSV and Markdown")
    args = p.parse_args(argv)
    if not args.folder.is_dir():
        print(f"her-summary: error: {args.folder} is not a folder", file=sys.stderr)
        return 2
    try:
        write_summary(args.folder, plots=not args.no_plots)
    except FileNotFoundError as exc:
        print(f"her-summary: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
