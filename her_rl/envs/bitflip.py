"""The n-bit flipping task of the HER paper (Andrychowicz et al. 2017, section 3.1).

State and goal are n-bit vectors drawn uniformly at every episode start; action k flips bit k;
the reward is -1 until the state equals the goal and 0 on the step that reaches it; the episode
terminates on success and is truncated after n steps. Unlike Stable-Baselines3's
``BitFlippingEnv`` (goal fixed at all ones), the goal is random, as in the paper.

``BitFlipEnv`` is the single gymnasium goal env; ``BitFlipVectorEnv`` steps many copies in one
numpy call and is what training and evaluation use.
"""

from __future__ import annotations

from typing import Annotated, Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from her_rl.rules import arg_rules, integer

MAX_BITS = 4096
Bits = Annotated[int, integer(1, MAX_BITS)]
"""The ``n`` of both constructors: its rule checks the config's ``n`` and ``env.kwargs.n`` too."""


def compute_reward(achieved_goal: np.ndarray, desired_goal: np.ndarray, info: Any = None) -> np.ndarray:
    """0 where achieved equals desired (all bits), else -1; vectorised over leading batch dims."""
    return np.all(np.asarray(achieved_goal) == np.asarray(desired_goal), axis=-1).astype(np.float32) - 1.0


def compute_terminated(achieved_goal: np.ndarray, desired_goal: np.ndarray, info: Any = None) -> np.ndarray:
    """True where achieved equals desired: bit-flip episodes end on success (vectorised)."""
    return np.all(np.asarray(achieved_goal) == np.asarray(desired_goal), axis=-1)


def _check_n(n: Any) -> int:
    arg_rules(BitFlipEnv.__init__)["n"].check("n", n)  # a ConfigError, which is a ValueError
    return int(n)


def _goal_space(n: int) -> spaces.Dict:
    bits = spaces.MultiBinary(n)
    return spaces.Dict({"observation": bits, "achieved_goal": bits, "desired_goal": bits})


def _sample_start_and_goal(rng: np.random.Generator, count: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Uniform state and goal; a goal equal to the start is redrawn so every episode needs a step."""
    state = rng.integers(0, 2, size=(count, n), dtype=np.int8)
    goal = rng.integers(0, 2, size=(count, n), dtype=np.int8)
    same = np.all(state == goal, axis=1)
    while same.any():  # rare beyond tiny n: expected redraws 2^-n per episode
        goal[same] = rng.integers(0, 2, size=(int(same.sum()), n), dtype=np.int8)
        same = np.all(state == goal, axis=1)
    return state, goal


class BitFlipEnv(gym.Env):
    """One n-bit flipping task with the gymnasium goal-env API (``gymnasium.make('her_rl/BitFlip-v0', n=15)``)."""

    metadata = {"render_modes": ["ansi", "rgb_array"], "render_fps": 4}

    def __init__(self, n: Bits = 15, render_mode: str | None = None):
        self.n = _check_n(n)
        self.max_episode_steps = self.n
        self.render_mode = render_mode
        self.observation_space = _goal_space(self.n)
        self.action_space = spaces.Discrete(self.n)
        self._state = np.zeros(self.n, dtype=np.int8)
        self._goal = np.zeros(self.n, dtype=np.int8)
        self._t = 0

    def _obs(self) -> dict[str, np.ndarray]:
        return {"observation": self._state.copy(), "achieved_goal": self._state.copy(), "desired_goal": self._goal.copy()}

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        state, goal = _sample_start_and_goal(self.np_random, 1, self.n)
        self._state, self._goal, self._t = state[0], goal[0], 0
        return self._obs(), {"is_success": False}

    def step(self, action):
        action = int(action)
        if not 0 <= action < self.n:
            raise ValueError(f"action must be a bit index in [0, {self.n}), got {action}")
        self._state[action] ^= 1
        self._t += 1
        reward = float(compute_reward(self._state, self._goal))
        success = reward == 0.0
        return self._obs(), reward, success, self._t >= self.n and not success, {"is_success": success}

    def compute_reward(self, achieved_goal, desired_goal, info):
        return compute_reward(achieved_goal, desired_goal, info)

    def compute_terminated(self, achieved_goal, desired_goal, info):
        return compute_terminated(achieved_goal, desired_goal, info)

    def render(self):
        if self.render_mode == "ansi":
            return "".join(map(str, self._state)) + " -> " + "".join(map(str, self._goal))
        if self.render_mode == "rgb_array":
            return render_bits(self._state, self._goal)
        return None


# rgb_array colours: a set bit of the state, of the goal, a clear bit, the gaps between cells
_ON, _GOAL_ON, _OFF, _GAP = (40, 90, 200), (230, 140, 30), (235, 235, 235), (60, 60, 60)


def render_bits(state: np.ndarray, goal: np.ndarray, cell: int = 16) -> np.ndarray:
    """The state (top row) above the goal (bottom row), one square per bit, bits that already
    match the goal framed green: an image of (2 * cell + 3) x (n * cell) pixels."""
    n = len(state)
    image = np.empty((2 * cell + 3, n * cell, 3), dtype=np.uint8)
    image[:] = _GAP
    for row, bits, on in ((0, state, _ON), (1, goal, _GOAL_ON)):
        colours = np.where(np.asarray(bits)[:, None] == 1, on, _OFF).astype(np.uint8)  # [n, 3]
        top = 1 + row * (cell + 1)
        block = np.repeat(colours[None, :, :], cell - 2, axis=0)  # [cell-2, n, 3]
        block = np.repeat(block, cell, axis=1).reshape(cell - 2, n, cell, 3)
        block[:, :, [0, -1]] = _GAP  # a gap column on each side of a cell
        image[top:top + cell - 2] = block.reshape(cell - 2, n * cell, 3)
    match = np.asarray(state) == np.asarray(goal)
    frame = np.repeat(match, cell)
    image[-1, frame] = (40, 170, 60)  # a green line under every bit that matches its goal
    return image


class BitFlipVectorEnv(VectorEnv):
    """``num_envs`` bit-flip tasks stepped together in one numpy call.

    With ``autoreset=True`` it follows gymnasium's default NEXT_STEP autoreset: the ``step`` after an
    episode ends resets that copy (its action is ignored, reward 0). With ``autoreset=False`` copies
    keep stepping after they end; HER-DQN uses this to run lock-step episodes of exactly n steps and
    masks the steps after success itself.
    """

    metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(self, num_envs: int, n: Bits = 15, seed: int | None = None, autoreset: bool = True):
        self.n = _check_n(n)
        self.max_episode_steps = self.n
        self.num_envs = int(num_envs)
        self.autoreset = autoreset
        self.single_observation_space = _goal_space(self.n)
        self.single_action_space = spaces.Discrete(self.n)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self._np_random, _ = gym.utils.seeding.np_random(seed)
        self.state = np.zeros((self.num_envs, self.n), dtype=np.int8)
        self.goal = np.zeros((self.num_envs, self.n), dtype=np.int8)
        self.t = np.zeros(self.num_envs, dtype=np.int64)
        self._needs_reset = np.zeros(self.num_envs, dtype=bool)
        self._rows = np.arange(self.num_envs)

    def compute_reward(self, achieved_goal, desired_goal, info=None):
        return compute_reward(achieved_goal, desired_goal, info)

    def compute_terminated(self, achieved_goal, desired_goal, info=None):
        return compute_terminated(achieved_goal, desired_goal, info)

    def _obs(self) -> dict[str, np.ndarray]:
        return {"observation": self.state.copy(), "achieved_goal": self.state.copy(), "desired_goal": self.goal.copy()}

    def _reset_rows(self, rows: np.ndarray) -> None:
        self.state[rows], self.goal[rows] = _sample_start_and_goal(self._np_random, len(rows), self.n)
        self.t[rows] = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self._np_random, _ = gym.utils.seeding.np_random(seed)
        self._reset_rows(self._rows)
        self._needs_reset[:] = False
        return self._obs(), {"is_success": np.zeros(self.num_envs, dtype=bool)}

    def step(self, actions):
        actions = np.asarray(actions, dtype=np.int64).reshape(self.num_envs)
        if actions.min(initial=0) < 0 or actions.max(initial=0) >= self.n:
            raise ValueError(f"actions must be bit indices in [0, {self.n})")
        resetting = self._needs_reset.copy()
        stepping = ~resetting
        self.state[self._rows[stepping], actions[stepping]] ^= 1
        self.t[stepping] += 1
        reward = compute_reward(self.state, self.goal)
        success = (reward == 0.0) & stepping
        terminated = success
        truncated = (self.t >= self.n) & ~success & stepping
        if resetting.any():
            self._reset_rows(self._rows[resetting])
            reward[resetting] = 0.0
        if self.autoreset:
            self._needs_reset = terminated | truncated
        return self._obs(), reward, terminated, truncated, {"is_success": success}
