"""What a sweep (or a folder of runs) found: one row per setting, learning curves, metric vs swept key.

``her-summary DIR`` (and, at the end of every multirun, :class:`SummaryCallback`) reads every run
folder below DIR: the first line of its ``history.jsonl`` (the overrides that defined it) and its
``results.json`` when it finished, its ``failed.json`` when its last attempt in a sweep failed
(:mod:`her_rl.summary.runs`, :mod:`her_rl.folder.failures`). Runs are grouped by their
overrides minus ``seed`` and the bookkeeping keys (:mod:`her_rl.config.saved`); each group
becomes a row with the number of seeds, how many finished, failed or are still running, how many
solved, the final evaluation metric (mean, std, a bootstrap 95% interval of the mean, the
interquartile mean and its bootstrap 95% interval), and the median env steps and wall seconds of
the solved runs (statistics in :mod:`her_rl.summary.stats`), and each failed run's reason. Written as
``summary.csv`` (one column per setting key) and ``summary.md`` in DIR, printed as a table; ``curves.png`` and ``by_<key>.png``
come from :mod:`her_rl.summary.plots`, which reads each run's curve from its ``metrics.jsonl``
(:mod:`her_rl.folder.metrics`; TensorBoard events only for folders written before that file existed).

A run folder with a damaged file (results.json that is not a JSON object of numbers, a history line
that is not JSON, a config.yaml that is not a mapping) is left out and named in one line on stderr;
the others are still summarised.
"""

from __future__ import annotations

import argparse
import csv
import io
import math
import sys
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from hydra.experimental.callback import Callback

from her_rl.errors import printable
from her_rl.folder import failures
from her_rl.folder.atomic import write_atomic_text
from her_rl.folder.rundir import cannot_write_in
from her_rl.summary.plots import figures
from her_rl.summary.runs import Run, read_runs
from her_rl.summary.stats import bootstrap_ci, iqm, iqm_ci

STATS = ["metric", "seeds", "done", "running", "failed", "solved", "mean", "std", "ci_low", "ci_high",
         "iqm", "iqm_ci_low", "iqm_ci_high", "median_steps_to_solve", "median_wall_s"]


class NothingWritten(OSError):
    """Not one output file could be written (each failure was reported)."""


def setting_keys(setting: Sequence[str]) -> dict[str, str]:
    """``("algo.strategy=none", "n=10")`` -> ``{"algo.strategy": "none", "n": "10"}`` (``~key``: removed)."""
    out = {}
    for override in setting:
        key, eq, value = override.lstrip("+").partition("=")
        out[key.lstrip("~")] = value if eq else "(removed)"
    return out


def _metric(run: Run) -> float | None:
    key = "eval_success_rate" if run.goal_env else "eval_return"
    value = run.results.get(key)
    return None if value is None else float(value)


def _median(values: list[Any]) -> float:
    values = [v for v in values if v is not None]
    return float(np.median(values)) if values else math.nan


def _sort_key(keys: dict[str, str], columns: Sequence[str]) -> tuple:
    """Numbers numerically (5 before 10), then text, then rows without the key."""
    out = []
    for column in columns:
        value = keys.get(column)
        if value is None:
            out.append((2, 0.0, ""))
            continue
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        out.append((0, number, "") if math.isfinite(number) else (1, 0.0, value))  # nan/inf sort as text
    return tuple(out)


def _where(folder: Path, root: Path | None) -> str:
    try:
        return str(folder.relative_to(root)) if root is not None else str(folder)
    except ValueError:
        return str(folder)


def summarise(runs: Sequence[Run], root: Path | None = None) -> list[dict[str, Any]]:
    """One row per setting, sorted by its keys (see :func:`_sort_key`); a row holds ``setting`` (the
    overrides as one label), ``keys`` (key -> value), the :data:`STATS` columns and ``errors``: each
    run folder (below ``root``) whose last attempt failed, with the reason."""
    rows = []
    for key in dict.fromkeys(r.group for r in runs):
        group = [r for r in runs if r.group == key]
        setting = min((r.setting for r in group), key=len)  # the shortest command that names the experiment
        done = [r for r in group if r.status == "done"]
        values = [v for v in (_metric(r) for r in done) if v is not None]
        solved = [r for r in done if r.results.get("solved")]
        several = len(values) > 1  # an interval from one run would claim a certainty it does not have
        lo, hi = bootstrap_ci(values) if several else (math.nan, math.nan)
        iqm_lo, iqm_hi = iqm_ci(values) if several else (math.nan, math.nan)
        rows.append({
            "setting": " ".join(setting) or "(defaults)", "keys": setting_keys(setting),
            "metric": "eval_success_rate" if all(r.goal_env for r in done) else "eval_return",
            "group": key, "seeds": len({r.seed for r in group if r.seed is not None}) + sum(r.seed is None for r in group),
            "done": len(done), "running": sum(r.status == "running" for r in group),
            "failed": sum(r.status == "failed" for r in group), "solved": len(solved),
            "mean": float(np.mean(values)) if values else math.nan,
            "std": float(np.std(values, ddof=1)) if several else math.nan, "ci_low": lo, "ci_high": hi,
            "iqm": iqm(values), "iqm_ci_low": iqm_lo, "iqm_ci_high": iqm_hi,
            "median_steps_to_solve": _median([r.results.get("solved_at_env_steps") for r in solved]),
            "median_wall_s": _median([r.results.get("wall_time_s") for r in solved]),
            "errors": [(_where(r.folder, root), r.error) for r in group if r.error],
        })
    columns = key_columns(rows)
    return sorted(rows, key=lambda row: _sort_key(row["keys"], columns))


def key_columns(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Every setting key of any row, in name order."""
    return sorted({key for row in rows for key in row["keys"]})


def csv_rows(rows: Sequence[dict[str, Any]]) -> tuple[list[str], list[dict[str, Any]]]:
    """Header and rows of summary.csv: one column per setting key (empty where a row lacks it; a key
    named like a statistic or ``errors`` becomes ``setting.<key>``), the statistics, then ``errors``
    (``folder: reason`` of each failed run, joined by `` | ``)."""
    keys = key_columns(rows)
    names = {k: f"setting.{k}" if k in (*STATS, "errors") else k for k in keys}
    out = [{**{names[k]: row["keys"].get(k, "") for k in keys}, **{c: row[c] for c in STATS},
            "errors": " | ".join(f"{where}: {error}" for where, error in row.get("errors", []))} for row in rows]
    return [names[k] for k in keys] + STATS + ["errors"], out


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return "-" if math.isnan(value) else f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)


def markdown(rows: Sequence[dict[str, Any]]) -> str:
    cols = ["setting", "seeds", "done", "running", "failed", "solved", "metric", "mean", "std", "ci_low", "ci_high",
            "iqm", "iqm_ci_low", "iqm_ci_high", "median_steps_to_solve", "median_wall_s"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(_fmt(row[c]) for c in cols) + " |" for row in rows]
    failed = [f"- {where}: {error}" for row in rows for where, error in row.get("errors", [])]
    return "\n".join(lines + (["", "Failed runs (why each last attempt stopped):", *failed] if failed else []))


def _write_csv(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    header, body = csv_rows(rows)
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=header)
    writer.writeheader()
    writer.writerows(body)
    write_atomic_text(path, text.getvalue())  # a link at path is replaced, never written through


def write_summary(root: Path, plots: bool = True, out=None, err=None, prog: str = "her-summary") -> list[dict[str, Any]]:
    """Summarise the runs below ``root``: summary.csv, summary.md, the table on ``out`` and (``plots``)
    the figures. A damaged run folder or an output that cannot be written is one line on ``err``.
    FileNotFoundError when no readable run is there; :class:`NothingWritten` when no file could be written."""
    out, err = out or sys.stdout, err or sys.stderr  # looked up now: tests and callers may swap them
    why = cannot_write_in(root)  # before any work: a folder nothing can be written in (/proc, read-only)
    if why:
        raise NothingWritten(why)
    runs, bad = read_runs(root)
    for folder, why in bad:
        print(printable(f"{prog}: warning: skipped {folder}: {why}"), file=err)
    if not runs:
        left = f" ({len(bad)} run folders skipped, listed above)" if bad else ""
        raise FileNotFoundError(f"no readable run folders (history.jsonl, results.json or failed.json) below {root}{left}")
    rows = summarise(runs, root)
    table = markdown(rows)
    print(table, file=out)
    print(f"{len(runs)} runs in {len(rows)} settings" + (f"; {len(bad)} run folders skipped (listed on stderr)" if bad else ""),
          file=out)
    written, failed = [], []

    def attempt(path: Path, write) -> None:
        try:
            write(path)
            written.append(path)
        except OSError as exc:
            failed.append(path)
            print(printable(f"{prog}: error: cannot write {path}: {exc.strerror or exc}"), file=err)

    attempt(root / "summary.csv", lambda p: _write_csv(p, rows))
    attempt(root / "summary.md", lambda p: write_atomic_text(p, table + "\n"))
    if plots:
        for path, save in figures(runs, root, rows, err=err, prog=prog):
            attempt(path, save)
    for path in written:
        print(f"wrote {path}", file=out)
    if not written:
        raise NothingWritten(f"no output could be written in {root}")
    return rows


class SummaryCallback(Callback):
    """Hydra callback: summarise the sweep folder when a multirun ends (``hydra.callbacks``), and note
    its failed jobs for her-run's exit (:mod:`her_rl.folder.failures`)."""

    def on_multirun_start(self, config: Any, **kwargs: Any) -> None:
        failures.start_sweep()

    def on_multirun_end(self, config: Any, **kwargs: Any) -> None:
        root = Path(str(config.hydra.sweep.dir))
        try:
            write_summary(root, prog="her-run")
        except Exception as exc:  # noqa: BLE001  (a summary must never turn a finished sweep into a failure)
            print(printable(f"her-run: warning: no sweep summary for {root}: {exc}"), file=sys.stderr)
        try:
            failures.end_sweep(root)
        except OSError as exc:
            print(printable(f"her-run: warning: cannot list the failed jobs of {root}: {exc.strerror or exc}"),
                  file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Exit 0 when the summary was written (damaged run folders and outputs that could not be written
    are reported, one line each), 1 when no output file could be written, 2 without readable runs."""
    p = argparse.ArgumentParser(prog="her-summary", description="Summarise the runs below a folder (a sweep or single runs).")
    p.add_argument("folder", type=Path)
    p.add_argument("--no-plots", action="store_true", help="only the table, CSV and Markdown")
    args = p.parse_args(argv)
    if not args.folder.is_dir():
        print(printable(f"her-summary: error: {args.folder} is not a folder"), file=sys.stderr)
        return 2
    try:
        write_summary(args.folder, plots=not args.no_plots)
    except FileNotFoundError as exc:
        print(printable(f"her-summary: error: {exc}"), file=sys.stderr)
        return 2
    except NothingWritten as exc:
        print(printable(f"her-summary: error: {exc}"), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
