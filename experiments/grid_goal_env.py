"""Your own goal env: reach a random cell of a 6 x 6 grid. Importing this module registers it.

    her-run algo=her_dqn env=gym env.id=experiments.grid_goal_env:GridGoal-v0
"""
import gymnasium as gym
import numpy as np
from gymnasium import spaces

MOVES = np.array([[0, 1], [0, -1], [1, 0], [-1, 0]], dtype=np.float32)


class GridGoalEnv(gym.Env):
    def __init__(self, size: int = 6):
        self.size = size
        cell = spaces.Box(0, size - 1, (2,), np.float32)
        self.observation_space = spaces.Dict(observation=cell, achieved_goal=cell, desired_goal=cell)
        self.action_space = spaces.Discrete(4)

    def compute_reward(self, achieved_goal, desired_goal, info):  # batched: HER relabels many at once
        return -np.any(achieved_goal != desired_goal, axis=-1).astype(np.float32)

    def compute_terminated(self, achieved_goal, desired_goal, info):  # the episode ends at the goal
        return np.all(achieved_goal == desired_goal, axis=-1)

    def _obs(self):  # fresh arrays every step: callers may keep them
        return {"observation": self.pos.copy(), "achieved_goal": self.pos.copy(), "desired_goal": self.goal.copy()}

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.pos, self.goal = self.np_random.integers(0, self.size, (2, 2)).astype(np.float32)
        return self._obs(), {"is_success": False}

    def step(self, action):
        self.pos = np.clip(self.pos + MOVES[int(action)], 0, self.size - 1)
        done = bool(self.compute_terminated(self.pos, self.goal, None))
        return self._obs(), float(self.compute_reward(self.pos, self.goal, None)), done, False, {"is_success": done}


gym.register(id="GridGoal-v0", entry_point=GridGoalEnv, max_episode_steps=20)
