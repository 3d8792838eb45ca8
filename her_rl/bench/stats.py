"""Medians over seeds when some seeds did not get there, and ratios of such medians.

A run that did not reach its target within its cap is *censored*: what it used (env steps, wall
seconds) is only a lower bound on what it would have needed. The median of a set of runs is then
exact only when no censored run sits at or below its middle; otherwise it is a lower bound.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, Sequence


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
