"""Deep Sea (bsuite, Osband et al. 2019): the standard hard-exploration chain on an N x N grid.

Rules (deterministic bsuite variant):

* The agent starts in the top-left cell (row 0, column 0). Every step moves it one row down and
  one column left or right (clipped at the grid's edges), so an episode lasts exactly N steps.
* Which of the two actions means "right" is drawn per cell from ``mapping_seed`` when the env is
  built and never changes afterwards (reset seeds do not touch it): the task is one fixed MDP.
* Every "right" action costs ``0.01 / N``. Acting "right" in the bottom-right cell (row N-1,
  column N-1) also pays +1. Since the column can never exceed the row, that cell is reachable
  only by going right at every step, so the single rewarding episode returns ``1 - 0.01 = 0.99``;
  every other episode returns ``<= 0`` (left-only returns exactly 0).
* Observation: the one-hot position on the flattened N*N grid (float32); after the last step the
  agent has left the grid and the observation is all zeros (bsuite's terminal observation).

A uniformly random policy collects the reward with probability 2^-N per episode.
"""

from __future__ import annotations

from typing import Annotated

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from her_rl.rules import SEED, arg_rules, integer

MAX_SIZE = 256  # one-hot observations of size**2 floats: 65,536 inputs per env copy at 256
Size = Annotated[int, integer(1, MAX_SIZE)]
"""The ``size`` of both constructors: its rule checks the config's ``size`` and ``env.kwargs.size`` too."""
MappingSeed = Annotated[int, SEED]
"""The ``mapping_seed`` of both constructors (checked in ``env.kwargs``)."""


def _check_size(size) -> int:
    arg_rules(DeepSeaEnv.__init__)["size"].check("size", size)  # a ConfigError, which is a ValueError
    return int(size)


def _action_right(size: int, mapping_seed: int) -> np.ndarray:
    """``[row, col]`` -> the action index that moves right in that cell (the task's fixed mapping)."""
    return np.random.default_rng(mapping_seed).integers(0, 2, size=(size, size))


def _move(action_right: np.ndarray, move_cost: float, row, column, action):
    """The rules of one step, for positions on the grid (scalars or arrays of equal shape):
    ``(row + 1, new column, reward)``. Shared by the single and the batched env."""
    size = action_right.shape[0]
    right = action == action_right[row, column]
    corner = (row == size - 1) & (column == size - 1)  # reachable only by going right every step
    reward = np.where(right, np.where(corner, 1.0, 0.0) - move_cost / size, 0.0)
    column = np.where(right, np.minimum(column + 1, size - 1), np.maximum(column - 1, 0))
    return row + 1, column, reward


def _one_hot(size: int, row, column) -> np.ndarray:
    """``[..., size * size]`` one-hot positions; all zeros where ``row == size`` (left the grid)."""
    row, column = np.asarray(row), np.asarray(column)
    obs = np.zeros(row.shape + (size * size,), dtype=np.float32)
    on_grid = row < size
    flat = obs.reshape(-1, size * size)
    flat[np.flatnonzero(on_grid), (row * size + column)[on_grid]] = 1.0
    return obs


class DeepSeaEnv(gym.Env):
    """``gymnasium.make('her_rl/DeepSea-v0', size=20, mapping_seed=0)``."""

    metadata = {"render_modes": ["ansi", "rgb_array"], "render_fps": 4}

    def __init__(self, size: Size = 10, mapping_seed: MappingSeed = 0, move_cost: float = 0.01,
                 render_mode: str | None = None):
        self.size = _check_size(size)
        self.move_cost = float(move_cost)
        self.render_mode = render_mode
        self.action_right = _action_right(self.size, mapping_seed)
        self.observation_space = spaces.Box(0.0, 1.0, shape=(self.size * self.size,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)
        self.row = 0
        self.column = 0

    def _obs(self) -> np.ndarray:
        return _one_hot(self.size, self.row, self.column)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.row, self.column = 0, 0
        return self._obs(), {}

    def step(self, action):
        if self.row >= self.size:
            raise RuntimeError("step() called after the episode ended; call reset()")
        action = int(action)
        if action not in (0, 1):
            raise ValueError(f"deep sea actions are 0 or 1, got {action}")
        row, column, reward = _move(self.action_right, self.move_cost, self.row, self.column, action)
        self.row, self.column = int(row), int(column)
        terminated = self.row >= self.size
        return self._obs(), float(reward), terminated, False, {}

    def optimal_actions(self) -> list[int]:
        """The action sequence of the single rewarding episode (for tests and sanity checks)."""
        return [int(self.action_right[i, i]) for i in range(self.size)]

    def render(self):
        if self.render_mode == "rgb_array":
            return self._render_rgb()
        if self.render_mode != "ansi":
            return None
        grid = np.full((self.size, self.size), ".")
        if self.row < self.size:
            grid[self.row, self.column] = "A"
        return "\n".join("".join(r) for r in grid)


    def _render_rgb(self) -> np.ndarray:
        """The grid (the agent red, the treasure in the bottom-right cell gold), plus one row below
        it where the agent lands when the episode ends."""
        cell = max(4, 256 // self.size)
        grid = np.zeros((self.size + 1, self.size, 3), dtype=np.uint8)
        grid[:, :] = (20, 40, 90)
        grid[self.size - 1, self.size - 1] = (240, 200, 40)
        grid[self.size] = (50, 50, 50)
        grid[min(self.row, self.size), self.column] = (220, 40, 40)
        return np.repeat(np.repeat(grid, cell, axis=0), cell, axis=1)


class DeepSeaVectorEnv(VectorEnv):
    """``num_envs`` copies of :class:`DeepSeaEnv` stepped in one numpy call (same rules, same mapping).

    Gymnasium's default NEXT_STEP autoreset: the ``step`` after an episode ends resets that copy
    (its action is ignored, reward 0, not done) and returns the start observation.
    ``gymnasium.make_vec('her_rl/DeepSea-v0', num_envs=16, size=30)`` builds it.
    """

    metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(self, num_envs: int, size: Size = 10, mapping_seed: MappingSeed = 0, move_cost: float = 0.01,
                 render_mode: str | None = None):
        self.size = _check_size(size)
        self.render_mode = render_mode  # accepted for gymnasium.make_vec; the batched env draws nothing
        self.num_envs = int(num_envs)
        self.move_cost = float(move_cost)
        self.action_right = _action_right(self.size, mapping_seed)
        self.single_observation_space = spaces.Box(0.0, 1.0, shape=(self.size * self.size,), dtype=np.float32)
        self.single_action_space = spaces.Discrete(2)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.reset()

    def _obs(self) -> np.ndarray:
        return _one_hot(self.size, self.row, self.column)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if seed is not None:  # the task is deterministic; seeding only seeds action_space sampling
            self.action_space.seed(seed)
        self.row = np.zeros(self.num_envs, dtype=np.int64)
        self.column = np.zeros(self.num_envs, dtype=np.int64)
        self._needs_reset = np.zeros(self.num_envs, dtype=bool)  # new arrays: callers may hold the old ones
        return self._obs(), {}

    def step(self, actions):
        actions = np.asarray(actions).reshape(self.num_envs).astype(np.int64)
        if ((actions != 0) & (actions != 1)).any():
            raise ValueError(f"deep sea actions are 0 or 1, got {actions}")
        resetting = self._needs_reset  # these copies ended last step: reset them, ignore their action
        row, column, reward = _move(self.action_right, self.move_cost,
                                    np.minimum(self.row, self.size - 1), self.column, actions)
        self.row = np.where(resetting, 0, row)
        self.column = np.where(resetting, 0, column)
        reward = np.where(resetting, 0.0, reward)
        terminated = ~resetting & (self.row >= self.size)
        self._needs_reset = terminated
        return self._obs(), reward, terminated, np.zeros(self.num_envs, dtype=bool), {}
