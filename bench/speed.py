"""Env throughput: env steps per second of our numpy-batched goal envs as training builds them
(:func:`env_speed_lines`), and of sync against async vector envs for the MuJoCo Fetch tasks in
lock-step HER collection (:func:`fetch_vec_lines`). Random actions are drawn in advance, so only
reset and step are timed; each yields its markdown table a line at a time, as the runs finish."""

from __future__ import annotations

import time
from typing import Any, Iterator, Sequence

import numpy as np

from bench.tables import head, line

IDS = {"push": "her_rl/Push-v0", "drag": "her_rl/Drag-v0", "bitflip": "her_rl/BitFlip-v0"}


def vec_env_rate(name: str, num_envs: int, steps: int, repeats: int, warmup: int, kwargs: dict) -> tuple[str, float]:
    """(class name, best env steps per second) for one env of :data:`IDS` at one batch size:
    ``gymnasium.make_vec`` (the class training uses), autoreset on, ``repeats`` timed runs of
    ``steps`` step calls after ``warmup`` untimed ones."""
    import gymnasium as gym

    import her_rl  # noqa: F401  (registers the ids)

    envs = gym.make_vec(IDS[name], num_envs=num_envs, seed=0, **kwargs)
    envs.action_space.seed(0)
    actions = np.stack([envs.action_space.sample() for _ in range(steps)])
    envs.reset(seed=0)
    for a in actions[:warmup]:
        envs.step(a)
    best = 0.0
    for _ in range(repeats):
        start = time.perf_counter()
        for a in actions:
            envs.step(a)
        best = max(best, steps * num_envs / (time.perf_counter() - start))
    return type(envs).__name__, best


def env_speed_lines(names: Sequence[str], num_envs: Sequence[int], steps: int, repeats: int, warmup: int,
                    actions: str = "discrete", bits: int = 15) -> Iterator[str]:
    """The table: env steps/s = copies * step calls / s (push/drag with ``actions``, bit-flip with ``bits``)."""
    yield head(["env", "class", "copies", "env steps/s", "step calls/s"], "llrrr")
    for name in names:
        kwargs = {"n": bits} if name == "bitflip" else {"actions": actions}
        for n in num_envs:
            cls, rate = vec_env_rate(name, n, steps, repeats, min(warmup, steps), kwargs)
            yield line([name, cls, n, f"{rate:,.0f}", f"{rate / n:,.0f}"])


def lockstep_seconds(envs: Any, actions: np.ndarray, batches: int, seed: int) -> float:
    """Seconds for ``batches`` lock-step batches (reset + len(actions) steps each)."""
    start = time.perf_counter()
    for b in range(batches):
        envs.reset(seed=seed + b)
        for a in actions:
            envs.step(a)
    return time.perf_counter() - start


def sync_vs_async(env_id: str, modes: Sequence[str], num_envs: int, batches: int, repeats: int,
                  horizon: int) -> dict[str, tuple[float, float, float]]:
    """{mode: (seconds to build, best env steps/s, median env steps/s)} for one number of copies:
    both vector envs built by ``her_rl.envs.make_vec``, warmed up with one batch, then timed in turns
    (so both see the same background load)."""
    from her_rl.envs import make_vec

    built, rates = {}, {mode: [] for mode in modes}
    try:
        for mode in modes:
            start = time.perf_counter()
            envs = make_vec({"name": "bench", "id": env_id, "kwargs": {}, "vectorization": mode}, num_envs, seed=0)
            built[mode] = (envs, time.perf_counter() - start)
        actions = np.stack([built[modes[0]][0].action_space.sample() for _ in range(horizon)])
        for mode in modes:
            lockstep_seconds(built[mode][0], actions, 1, seed=1000)  # warm-up
        for _ in range(repeats):
            for mode in modes:
                rates[mode].append(batches * horizon * num_envs / lockstep_seconds(built[mode][0], actions, batches, 0))
    finally:
        for envs, _ in built.values():
            envs.close()
    return {mode: (built[mode][1], max(rates[mode]), float(np.median(rates[mode]))) for mode in modes}


def fetch_vec_lines(env_id: str, modes: Sequence[str], num_envs: Sequence[int], batches: int, repeats: int,
                    horizon: int) -> Iterator[str]:
    yield head(["copies", "mode", "build s", "env steps/s (best)", "env steps/s (median)"], "rlrrr")
    for n in num_envs:
        for mode, (build_s, best, median) in sync_vs_async(env_id, modes, n, batches, repeats, horizon).items():
            yield line([n, mode, f"{build_s:.2f}", f"{best:,.0f}", f"{median:,.0f}"])
