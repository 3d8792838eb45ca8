"""Success of an episode, however the env says it, and the range of a goal env's reward.

Envs say success in different words: Fetch, panda-gym and her-rl's own envs put ``is_success`` in
their step info, gymnasium-robotics' mazes ``success``; ``env.success_key`` names any other key. A
goal env whose info carries none of them is judged by the HER paper's rule: the episode succeeded
if ``compute_reward`` of its last step's achieved goal gives the reward of reaching the goal.

An episode is reported twice (:class:`EpisodeSuccess`): ``success`` at its last step (the HER
paper's and Fetch's measure) and ``any_success``, at any of its steps (a maze agent that passes
through the goal). A task with no notion of success (CartPole) reports neither.

:func:`reward_probe` finds what ``compute_reward`` gives at the goal and away from it, so that
the bounded TD targets of the hindsight learners follow the env's own reward range (-1/0 for
Fetch and bit-flip, 0/1 for the mazes) instead of assuming one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

SUCCESS_KEYS = ("is_success", "success")


@dataclass(frozen=True)
class SuccessRule:
    """Where success is read: ``key`` of the step info (None: the first of :data:`SUCCESS_KEYS` a
    step carries), else ``compute_reward(achieved, desired) == goal_reward`` when that is known."""

    key: str | None = None
    goal_reward: float | None = None
    compute_reward: Callable | None = None

    def at_step(self, info: dict[str, Any], obs: Any) -> np.ndarray | None:
        """Per copy, whether this step is a success; None where the step cannot tell."""
        for key in ((self.key,) if self.key else SUCCESS_KEYS):
            if key in info:
                value = np.asarray(info[key]).astype(bool)
                mask = info.get(f"_{key}")  # gymnasium's loop over copies marks which copies reported it
                return value & np.asarray(mask, dtype=bool) if mask is not None else value
        if self.goal_reward is None or self.compute_reward is None or not isinstance(obs, dict):
            return None
        reward = np.asarray(self.compute_reward(obs["achieved_goal"], obs["desired_goal"], None), dtype=np.float64)
        return np.isclose(reward, self.goal_reward)


class EpisodeSuccess:
    """Success of ``n`` parallel episodes as they are played: ``last`` (at each episode's last
    live step) and ``any`` (at any of its steps); ``told`` once any step could say."""

    def __init__(self, rule: SuccessRule, n: int):
        self.rule = rule
        self.last, self.any = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
        self.told = False

    def step(self, info: dict[str, Any], obs: Any, live: np.ndarray) -> None:
        now = self.rule.at_step(info, obs)
        if now is None:
            return
        self.told = True
        self.last = np.where(live, now, self.last)
        self.any |= live & now

    def rates(self) -> dict[str, float]:
        """``success_rate`` and ``any_success_rate`` over the episodes; empty when success cannot be told."""
        if not self.told:
            return {}
        return {"success_rate": float(self.last.mean()), "any_success_rate": float(self.any.mean())}


@dataclass(frozen=True)
class RewardProbe:
    goal_reward: float | None
    """compute_reward where the achieved goal is the desired one; None when that varies."""
    bounds: tuple[float, float] | None
    """The reward's range when it is sparse (two values, or declared); None: not known."""


def reward_probe(compute_reward: Callable, achieved: np.ndarray, desired: np.ndarray,
                 goal_samples: np.ndarray | None = None, declared: Any = None) -> RewardProbe:
    """What ``compute_reward`` gives at the goal (achieved goals as their own goals) and away from it
    (the desired goals of fresh episodes, and goals drawn from the goal space). A reward with
    two values is sparse: its range is those values. ``declared`` ([low, high], env.reward_range)
    wins over the probed range."""
    def values(a, g):
        return np.asarray(compute_reward(a, g, None), dtype=np.float64).reshape(-1)

    at_goal = values(achieved, achieved)
    seen = [at_goal, values(achieved, desired)]
    if goal_samples is not None:
        seen.append(values(achieved[: len(goal_samples)], goal_samples[: len(achieved)]))
    finite = np.concatenate(seen)
    goal_reward = float(at_goal[0]) if at_goal.size and np.all(at_goal == at_goal[0]) else None
    distinct = np.unique(finite[np.isfinite(finite)])
    bounds = (float(distinct.min()), float(distinct.max())) if len(distinct) == 2 and goal_reward is not None \
        else None
    if declared is not None:
        bounds = (float(declared[0]), float(declared[1]))
    return RewardProbe(goal_reward, bounds)


def return_bounds(bounds: tuple[float, float], gamma: float) -> tuple[float, float]:
    """The range of a discounted return of rewards in ``bounds``, cut short at any step (a terminal
    state bootstraps nothing): [min(0, low/(1-gamma)), max(0, high/(1-gamma))]."""
    low, high = bounds
    horizon = 1.0 / (1.0 - gamma)
    return min(0.0, low * horizon), max(0.0, high * horizon)


__all__ = ["EpisodeSuccess", "RewardProbe", "SUCCESS_KEYS", "SuccessRule", "return_bounds", "reward_probe"]
