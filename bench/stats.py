"""Medians over seeds when some seeds did not get there, and ratios of such medians.

A run that did not reach its target within its cap is *censored*: what it used (env steps, wall
seconds) is only a lower bound on what it would have needed. The median of a set of runs is then
exact only when no censored run sits at or below its middle; otherwise it is a lower bound.

Curves over seeds are summarised per evaluation point by :func:`interval`: the median and the
interquartile mean (IQM) of the runs' values, each with a percentile bootstrap interval.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, Callable, Sequence


@dataclass
class Stat:
    """A value that is exact, or only a lower (``>``) or upper (``<``) bound."""

    value: float | None
    bound: str = ""  # "", ">" or "<"; value None: unknown

    def fmt(self, digits: int = 0) -> str:
        if self.value is None:
            return "n/a"
        text = f"{self.value:,.{digits}f}"
        return f"{self.bound}{text}" if self.bound else text


def censored_median(values: Sequence[float], censored: Sequence[bool]) -> Stat:
    """Median of run results where censored values (unsolved runs, stopped at their cap) are only
    lower bounds. The plain median of the recorded values is then a lower bound, and it is exact
    when no censored value sits at or below the (upper) middle position of the sorted list."""
    if not values:
        return Stat(None)
    order = sorted(zip(values, censored), key=lambda vc: (vc[0], vc[1]))  # exact before censored on ties
    med = statistics.median(v for v, _ in order)
    exact = not any(c for _, c in order[: len(order) // 2 + 1])
    return Stat(float(med), "" if exact else ">")


def exact_median(values: Sequence[float], censored: Sequence[bool]) -> float | None:
    """The censored median when it is exact, else None (only a bound is known)."""
    med = censored_median(values, censored)
    return None if med.bound else med.value


def ratio(num: Stat, den: Stat) -> Stat:
    """num / den with bounds carried: >a / b -> >, a / >b -> <, two bounds (or missing) -> unknown."""
    if num.value is None or den.value is None or den.value == 0 or (num.bound and den.bound):
        return Stat(None)
    value = num.value / den.value
    if num.bound == ">" or den.bound == "<":
        return Stat(value, ">")
    if num.bound == "<" or den.bound == ">":
        return Stat(value, "<")
    return Stat(value)


def side_medians(rows: Sequence[Any], side: str) -> dict[str, Stat]:
    """Censored medians of ``env_steps`` and ``wall_s`` over the rows (objects with ``side``,
    ``solved``, ``env_steps``, ``wall_s``: what a run used when unsolved) of one side."""
    mine = [r for r in rows if r.side == side]
    unsolved = [not r.solved for r in mine]
    return {"env_steps": censored_median([r.env_steps for r in mine], unsolved),
            "wall_s": censored_median([r.wall_s for r in mine], unsolved)}


def first_reaching(curve: Sequence[tuple[int, float, float]], target: float) -> tuple[int, float, float] | None:
    """The first (env step, wall s, value) of a curve whose value is at least ``target``."""
    return next((point for point in curve if point[2] >= target), None)


def to_target(rows: Sequence[dict[str, Any]]) -> tuple[int, float | None, float | None]:
    """How many rows reached their target, and the exact medians (None: only a bound is known) of
    env steps and wall seconds to it; a row that did not reach it counts with what it ran."""
    missed = [not r["reached"] for r in rows]
    steps = [r["steps_to_target"] if r["reached"] else r["env_steps"] or 0 for r in rows]
    wall = [r["wall_to_target"] if r["reached"] else r["wall_s"] or 0.0 for r in rows]
    return len(rows) - sum(missed), exact_median(steps, missed), exact_median(wall, missed)


def known_median(values: Sequence[float | None]) -> float | None:
    """Median of the known values (None: a run that never got there is left out); None if none is."""
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


# ---------------------------------------------------------------- interval estimates over seeds


def iqm(values: Sequence[float]) -> float:
    """Interquartile mean: the mean of the values left after cutting a quarter (rounded down) of them
    at each end, as ``scipy.stats.trim_mean(values, 0.25)`` and rliable's IQM compute it."""
    ordered = sorted(float(v) for v in values)
    if not ordered:
        raise ValueError("iqm of no values")
    cut = len(ordered) // 4
    kept = ordered[cut:len(ordered) - cut]
    return sum(kept) / len(kept)


def bootstrap_ci(values: Sequence[float], statistic: Callable[[Sequence[float]], float], level: float = 0.95,
                 reps: int = 2000, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of ``statistic`` over the values (runs resampled with
    replacement ``reps`` times, a fixed generator so a table is reproducible)."""
    import numpy as np

    data = np.asarray(values, dtype=float)
    if data.size == 0:
        raise ValueError("bootstrap of no values")
    draws = np.random.default_rng(seed).integers(0, data.size, size=(reps, data.size))
    stats = np.array([statistic(data[d].tolist()) for d in draws])
    tail = (1 - level) / 2 * 100
    lo, hi = np.percentile(stats, [tail, 100 - tail])
    return float(lo), float(hi)


@dataclass
class Interval:
    """Median and IQM of the runs' values at one point, each with its bootstrap interval."""

    n: int
    median: float
    median_ci: tuple[float, float]
    iqm: float
    iqm_ci: tuple[float, float]

    def fmt(self, which: str = "iqm", digits: int = 2) -> str:
        value, (lo, hi) = (self.iqm, self.iqm_ci) if which == "iqm" else (self.median, self.median_ci)
        return f"{value:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def interval(values: Sequence[float], level: float = 0.95, reps: int = 2000, seed: int = 0) -> Interval:
    """:class:`Interval` of the values (one per run)."""
    return Interval(len(values), _median(values), bootstrap_ci(values, _median, level, reps, seed), iqm(values),
                    bootstrap_ci(values, iqm, level, reps, seed))


def _median(values: Sequence[float]) -> float:
    return float(statistics.median(values))
