"""A 5x5 grid goal env in the style of gymnasium-robotics' mazes, in three variants: reward -1/0 with
info["success"], reward 0/1 with info["success"], and reward 0/1 with no success in its info. Tests copy it
into a user folder and name it as `env.id=grid_goal_variants:<Id>`."""
import gymnasium as gym
import numpy as np
from gymnasium import spaces

MOVES = np.array([[1, 0], [-1, 0], [0, 1], [0, -1]])


class Grid(gym.Env):
    def __init__(self, size=5, reward="zero_one", success_key="success", terminate=True, max_steps=12):
        self.size, self.reward_kind, self.key, self.terminate, self.max_steps = size, reward, success_key, terminate, max_steps
        box = spaces.Box(0, size - 1, (2,), np.float32)
        self.observation_space = spaces.Dict({"observation": box, "achieved_goal": box, "desired_goal": box})
        self.action_space = spaces.Discrete(4)

    def compute_reward(self, achieved_goal, desired_goal, info):
        hit = np.all(np.asarray(achieved_goal) == np.asarray(desired_goal), axis=-1)
        return hit.astype(np.float32) if self.reward_kind == "zero_one" else hit.astype(np.float32) - 1.0

    def compute_terminated(self, achieved_goal, desired_goal, info):
        return np.all(np.asarray(achieved_goal) == np.asarray(desired_goal), axis=-1) & self.terminate

    def _obs(self):
        p = self.pos.astype(np.float32)
        return {"observation": p.copy(), "achieved_goal": p.copy(), "desired_goal": self.goal.astype(np.float32)}

    def _info(self, hit):
        return {self.key: bool(hit)} if self.key else {}

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.pos = self.np_random.integers(0, self.size, 2)
        self.goal = self.np_random.integers(0, self.size, 2)
        while (self.goal == self.pos).all():
            self.goal = self.np_random.integers(0, self.size, 2)
        self.t = 0
        return self._obs(), self._info(False)

    def step(self, action):
        self.pos = np.clip(self.pos + MOVES[int(action)], 0, self.size - 1)
        self.t += 1
        hit = bool((self.pos == self.goal).all())
        reward = float(self.compute_reward(self.pos, self.goal, None))
        return self._obs(), reward, hit and self.terminate, self.t >= self.max_steps and not (hit and self.terminate), self._info(hit)


gym.register("GridSuccess-v0", entry_point=Grid, kwargs={"reward": "minus_one_zero", "success_key": "success"}, max_episode_steps=12)
gym.register("GridZeroOne-v0", entry_point=Grid, kwargs={"reward": "zero_one", "success_key": "success"}, max_episode_steps=12)
gym.register("GridSilent-v0", entry_point=Grid, kwargs={"reward": "zero_one", "success_key": None}, max_episode_steps=12)
