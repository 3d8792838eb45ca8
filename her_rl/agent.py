"""The one small interface every algorithm meets the runner through.

The runner (``her_rl.run.runner``) owns seeding, evaluation, logging, checkpointing and
stopping. An algorithm owns its training environments and its update rule, and exposes:

``train_iteration(max_env_steps=None) -> IterationResult``
    One collect-then-update cycle (a HER cycle of episodes + optimisation steps, a PPO
    rollout + epochs, a batch of REINFORCE episodes). ``max_env_steps`` is the budget left: a
    learner that can cut its collection there does (the hindsight learners, within one lock-step).
``act(obs, explore=False) -> np.ndarray``
    Actions for a batch of observations exactly as the env's vector API returns them
    (a dict of arrays for goal envs, an array otherwise). ``explore=False`` is greedy.
``state_dict() / load_state_dict(state)``
    Everything needed to resume: networks, optimisers, replay memory, counters, the
    algorithm's own RNGs. Only tensors, numpy arrays and plain Python containers/scalars,
    so checkpoints load with ``torch.load(weights_only=True)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np


@dataclass
class IterationResult:
    """What one training iteration reports back to the runner."""

    env_steps: int
    """New environment steps taken in this iteration (summed over parallel envs)."""
    metrics: dict[str, float] = field(default_factory=dict)
    """Scalars logged to TensorBoard under their full tag, e.g. ``losses/td_loss``."""
    episode_returns: list[float] = field(default_factory=list)
    """Undiscounted returns of the training episodes that ended in this iteration."""
    episode_lengths: list[int] = field(default_factory=list)
    episode_successes: list[float] = field(default_factory=list)
    """Success at the last step of each ended episode (:mod:`her_rl.rl.success`); empty where the task
    cannot tell success."""
    episode_any_successes: list[float] = field(default_factory=list)
    """Success at any step of each ended episode (beside ``episode_successes``)."""


@runtime_checkable
class Agent(Protocol):
    def train_iteration(self, max_env_steps: int | None = None) -> IterationResult: ...

    def act(self, obs: Any, explore: bool = False) -> np.ndarray: ...

    def state_dict(self) -> dict: ...

    def load_state_dict(self, state: dict) -> None: ...
