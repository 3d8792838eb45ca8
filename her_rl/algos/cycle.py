"""The HER paper's cycle as the hindsight learners run it: how many episodes a cycle plays, the
vector env it plays them in, how many updates follow, and the cycle's report."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from her_rl.agent import IterationResult
from her_rl.rl.her import GoalEnvSpec, goal_env_spec

PAPER_HORIZON, PAPER_EPISODES = 50, 16  # the HER paper's cycle: 16 episodes of 50 steps, 40 updates


def cycle_episodes(episodes_per_cycle: int | None, horizon: int) -> int:
    """Episodes per cycle: as given, else 16 up to 50-step episodes and about 800 env steps' worth beyond."""
    if episodes_per_cycle:
        return int(episodes_per_cycle)
    if horizon <= PAPER_HORIZON:
        return PAPER_EPISODES
    return max(1, round(PAPER_EPISODES * PAPER_HORIZON / horizon))


def cycle_envs(env_cfg: dict[str, Any], num_envs: int | None, seed: int, algo: str,
               inference: bool = False) -> tuple[gym.vector.VectorEnv | None, GoalEnvSpec]:
    """The vector env a learner collects its cycles in (``num_envs`` copies; None: as many as
    :func:`cycle_episodes` gives for the env's horizon), and what it needs to know of it.
    ``inference``: one copy is built only to read the spec, then closed (no envs are returned)."""
    from her_rl.envs import make_vec  # here, not at the top: her_rl.envs is heavier than these helpers

    if inference or num_envs is None:
        probe = make_vec(env_cfg, 1, seed=seed)
        try:
            spec = goal_env_spec(probe, env_cfg, algo)
        finally:
            probe.close()
        if inference:
            return None, spec
        num_envs = cycle_episodes(None, spec.horizon)
    envs = make_vec(env_cfg, num_envs, seed=seed, training=True)
    if hasattr(envs, "autoreset"):
        envs.autoreset = False  # lock-step episodes; steps after an episode ends are masked
    return envs, goal_env_spec(envs, env_cfg, algo)


def updates_for_cycle(updates_per_cycle: int, updates_per_step: float | None, cycle_steps: int,
                      horizon: int = PAPER_HORIZON) -> int:
    """Gradient steps per cycle: ``updates_per_step`` (a ratio to env steps, kept as the cycle's size
    changes with the task, e.g. bit-flip's horizon n) wins over ``updates_per_cycle``, which is fixed
    for episodes of up to 50 steps and counted per 800 env steps collected beyond (a cycle cut at
    the budget: in proportion to its steps)."""
    if updates_per_step is not None:
        return max(1, round(updates_per_step * cycle_steps))
    if horizon <= PAPER_HORIZON:
        return int(updates_per_cycle)
    return max(1, round(updates_per_cycle * cycle_steps / (PAPER_EPISODES * PAPER_HORIZON)))


def cycle_result(episodes: dict[str, np.ndarray], losses: list[dict[str, float]],
                 extra: dict[str, float] | None = None) -> IterationResult:
    """One HER cycle's report: the mean of each update metric over the updates that report it (an
    actor updated every other step reports on half), plus the collected episodes."""
    keys = dict.fromkeys(key for m in losses for key in m)
    metrics = {key: float(np.mean([m[key] for m in losses if key in m])) for key in keys}
    metrics.update(extra or {})
    lengths, ended = episodes["length"], episodes.get("ended", np.ones(len(episodes["length"]), dtype=bool))
    told = episodes.get("success_told", True)  # episodes cut at the budget are not reported
    return IterationResult(
        env_steps=int(lengths.sum()),
        metrics=metrics,
        episode_returns=episodes["returns"][ended].tolist(),
        episode_lengths=lengths[ended].tolist(),
        episode_successes=episodes["success"][ended].astype(float).tolist() if told else [],
        episode_any_successes=episodes["any_success"][ended].astype(float).tolist()
        if told and "any_success" in episodes else [],
    )
