"""Aggregate statistics of a row of runs: the mean's bootstrap interval, the interquartile mean (IQM)
and its stratified bootstrap interval, following rliable (Agarwal et al. 2021, "Deep RL at the
edge of the statistical precipice"): IQM = the mean of the middle 50% of runs; intervals are
percentile bootstraps over runs, stratified by task. numpy only (rliable's bootstrap needs arch,
statsmodels and pandas).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np


def bootstrap_ci(values: Sequence[float], level: float = 0.95, draws: int = 2000, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean (a fixed seed: the same runs give the same interval)."""
    x = np.asarray(values, dtype=float)
    if len(x) < 2:
        return (float(x[0]), float(x[0])) if len(x) else (math.nan, math.nan)
    means = x[np.random.default_rng(seed).integers(0, len(x), size=(draws, len(x)))].mean(axis=1)
    lo, hi = np.quantile(means, [(1 - level) / 2, 1 - (1 - level) / 2])
    return float(lo), float(hi)


def _trimmed(x: np.ndarray) -> np.ndarray:
    """Mean over the last axis of the middle 50%: int(n / 4) values cut at each end, as
    ``scipy.stats.trim_mean(x, 0.25)`` does."""
    n = x.shape[-1]
    cut = int(0.25 * n)
    return np.sort(x, axis=-1)[..., cut:n - cut].mean(axis=-1)


def iqm(values: Sequence[float]) -> float:
    """Interquartile mean (Agarwal et al. 2021, rliable's ``aggregate_iqm``): the mean of the middle
    50% of the runs, ``scipy.stats.trim_mean(x, 0.25)``; int(n / 4) runs are cut at each end, so
    with fewer than 4 runs nothing is cut and it is the plain mean. Nested lists (one per task) are
    pooled."""
    x = np.concatenate([np.ravel(np.asarray(v, dtype=float)) for v in values]) if len(values) else np.array([])
    return float(_trimmed(x)) if len(x) else math.nan


def iqm_ci(strata: Sequence[Any], level: float = 0.95, draws: int = 2000, seed: int = 0) -> tuple[float, float]:
    """Stratified percentile bootstrap interval of the IQM, as rliable's ``StratifiedBootstrap``
    (over runs, not tasks) with the percentile method: every resample draws each task's runs with
    replacement from that task alone (its own number of runs) and takes the IQM of them all pooled.
    ``strata`` is one list of scores per task, or a flat list of scores (one task). NaN with fewer
    than 2 runs; a fixed seed gives the same interval for the same runs."""
    if len(strata) and np.ndim(strata[0]) == 0:
        strata = [strata]
    groups = [np.ravel(np.asarray(s, dtype=float)) for s in strata]
    groups = [g for g in groups if len(g)]
    if sum(len(g) for g in groups) < 2:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    pooled = np.concatenate([g[rng.integers(0, len(g), size=(draws, len(g)))] for g in groups], axis=1)
    lo, hi = np.quantile(_trimmed(pooled), [(1 - level) / 2, 1 - (1 - level) / 2])
    return float(lo), float(hi)
