"""Every reset of a goal env copy is seeded (her_rl/envs/__init__.py: SeededResets), so a seeded run
repeats itself even with an env that, like panda-gym, draws a new generator from the OS on each reset
without a seed and carries its physics state from one episode into the next."""

import importlib.util

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from her_rl.envs import SeededResets, make_vec


class ForgetfulGoalEnv(gym.Env):
    """panda-gym's habits in a few lines: a reset without a seed takes a generator from the OS, success
    ends the episode, and each episode's start drifts with where the last one ended."""

    def __init__(self):
        box = spaces.Box(-10.0, 10.0, (2,), np.float32)
        self.observation_space = spaces.Dict({"observation": box, "achieved_goal": box, "desired_goal": box})
        self.action_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.carried = np.zeros(2)

    def compute_reward(self, achieved_goal, desired_goal, info):
        return -(np.linalg.norm(np.asarray(achieved_goal) - desired_goal, axis=-1) > 0.5).astype(np.float32)

    def _obs(self):
        p = self.pos.astype(np.float32)
        return {"observation": p, "achieved_goal": p.copy(), "desired_goal": self.goal.astype(np.float32)}

    def reset(self, seed=None, options=None):
        self.np_random = np.random.default_rng(seed)  # seed None: fresh entropy, as panda-gym does
        self.pos = self.np_random.uniform(-1, 1, 2) + 0.1 * self.carried
        self.goal = self.pos + self.np_random.uniform(-0.6, 0.6, 2)
        return self._obs(), {}

    def step(self, action):
        self.pos = np.clip(self.pos + 0.3 * np.asarray(action), -10, 10)
        self.carried = self.pos.copy()
        reward = float(self.compute_reward(self.pos, self.goal, None))
        return self._obs(), reward, reward == 0.0, False, {"is_success": reward == 0.0}


gym.register("test_seeded_resets/Forgetful-v0", entry_point=ForgetfulGoalEnv, max_episode_steps=6)


def _observations(env_id: str, copies: int, steps: int) -> np.ndarray:
    envs = make_vec({"id": env_id}, copies, seed=0)
    try:
        envs.reset(seed=0)
        rows = [envs.step(envs.action_space.sample())[0]["observation"].copy() for _ in range(steps)]
    finally:
        envs.close()
    return np.array(rows)


def test_a_goal_env_that_forgets_its_seed_repeats_itself_through_autoresets():
    first, second = _observations("test_seeded_resets/Forgetful-v0", 4, 40), \
        _observations("test_seeded_resets/Forgetful-v0", 4, 40)
    np.testing.assert_array_equal(first, second)


def test_the_plain_loop_of_that_env_does_not_repeat_itself():
    """The same walk without the wrapper differs (so the test above can fail)."""
    runs = []
    for _ in range(2):
        envs = gym.make_vec("test_seeded_resets/Forgetful-v0", num_envs=4, vectorization_mode="sync")
        envs.action_space.seed(0)
        envs.reset(seed=0)
        runs.append(np.array([envs.step(envs.action_space.sample())[0]["observation"].copy() for _ in range(40)]))
        envs.close()
    assert not np.array_equal(*runs)


def test_only_goal_envs_get_their_resets_seeded():
    goal, plain = SeededResets(ForgetfulGoalEnv()), SeededResets(gym.make("Pendulum-v1"))
    assert goal.active and not plain.active
    plain.reset(seed=3)
    assert plain.seeds is None  # on-policy learners' autoresets of a plain env keep the env's own stream


@pytest.mark.skipif(not (importlib.util.find_spec("panda_gym") and importlib.util.find_spec("pybullet")),
                    reason='panda extra not installed: pip install -e ".[panda]"')
def test_panda_pick_and_place_repeats_itself_past_its_first_episode():
    """Step 51 is the first after gymnasium's autoreset (the 50-step limit); panda-gym placed the block
    and goal there from the OS's entropy."""
    import panda_gym  # noqa: F401  (registers the ids)

    first, second = _observations("PandaPickAndPlace-v3", 1, 60), _observations("PandaPickAndPlace-v3", 1, 60)
    np.testing.assert_array_equal(first, second)
