"""An env's own time limit is found through any wrappers: an entry point returning
``RecordEpisodeStatistics(TimeLimit(env, 50))`` (or a user's own wrapper around the TimeLimit), with no
``max_episode_steps`` registered, keeps its 50-step episodes: no 1,000-step default, a 16-episode HER cycle."""

import uuid

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.wrappers import RecordEpisodeStatistics, TimeLimit

import her_rl
from her_rl.envs import make_vec
from her_rl.envs.time_limits import DEFAULT_MAX_EPISODE_STEPS, episode_cap, inner_limit, time_limit
from her_rl.envs.goal_env import episode_horizon

NO_LIMIT_LINE = "has no time limit of its own"


class LineGoal(gym.Env):
    """Reach a goal cell of a line of 8; success never ends the episode (as in Fetch): every episode
    lasts its time limit, so a run's iterations count its cycles exactly."""

    def __init__(self):
        cell = spaces.Box(0, 7, (1,), np.float32)
        self.observation_space = spaces.Dict(observation=cell, achieved_goal=cell, desired_goal=cell)
        self.action_space = spaces.Discrete(3)

    def compute_reward(self, achieved_goal, desired_goal, info):  # batched: HER relabels many at once
        return -np.any(achieved_goal != desired_goal, axis=-1).astype(np.float32)

    def _obs(self):
        return {"observation": self.pos.copy(), "achieved_goal": self.pos.copy(), "desired_goal": self.goal.copy()}

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.pos, self.goal = self.np_random.integers(0, 8, (2, 1)).astype(np.float32)
        return self._obs(), {"is_success": False}

    def step(self, action):
        self.pos = np.clip(self.pos + (int(action) - 1), 0, 7).astype(np.float32)
        reward = float(self.compute_reward(self.pos, self.goal, None))
        return self._obs(), reward, False, False, {"is_success": reward == 0.0}


class Mine(gym.Wrapper):
    """A user's own wrapper, doing nothing."""


def wrapped(limit=50):
    return RecordEpisodeStatistics(TimeLimit(LineGoal(), limit))


def own_wrapper():
    return Mine(TimeLimit(LineGoal(), 50))


def broken():
    raise RuntimeError("cannot build")


@pytest.fixture
def ids():
    """Unique ids: the wrapped env, a user's wrapper, the plainly registered twin, one with no limit at
    all and one whose constructor raises; none registers max_episode_steps but the twin."""
    tag = uuid.uuid4().hex[:8]
    made = {"wrapped": (wrapped, None), "mine": (own_wrapper, None), "plain": (LineGoal, 50),
            "endless": (LineGoal, None), "broken": (broken, None)}
    names = {}
    for key, (entry, limit) in made.items():
        names[key] = f"TestLimit{key.title()}{tag}-v0"
        gym.register(id=names[key], entry_point=entry, max_episode_steps=limit)
    yield names
    for name in names.values():
        del gym.registry[name]


def cfg(name, **kwargs):
    return {"name": "gym", "id": name, "kwargs": kwargs}


def test_inner_limit_walks_every_wrapper():
    assert inner_limit(wrapped()) == 50
    assert inner_limit(own_wrapper()) == 50
    assert inner_limit(TimeLimit(Mine(TimeLimit(LineGoal(), 30)), 80)) == 30  # the shortest cuts first
    assert inner_limit(Mine(LineGoal())) is None and inner_limit(LineGoal()) is None and inner_limit(None) is None


def test_time_limit_applies_no_default_where_the_entry_point_wraps_a_time_limit(ids):
    for key in ("wrapped", "mine"):
        limit = time_limit(cfg(ids[key]), ids[key])
        assert limit.limit is None and not limit.by_default and limit.inner == 50
    assert time_limit(cfg(ids["wrapped"], limit=20), ids["wrapped"]).inner == 20  # built with the kwargs
    plain = time_limit(cfg(ids["plain"]), ids["plain"])
    assert plain.limit is None and not plain.by_default
    for key in ("endless", "broken"):  # a constructor that raises: not found (make_vec says why)
        limit = time_limit(cfg(ids[key]), ids[key])
        assert limit.limit == DEFAULT_MAX_EPISODE_STEPS and limit.by_default and limit.inner is None


@pytest.mark.parametrize("key", ["wrapped", "mine", "plain"])
def test_evaluation_cap_and_hindsight_horizon_find_the_limit(ids, key):
    envs = make_vec(cfg(ids[key]), 3, seed=0)
    try:
        assert episode_cap(envs) == 50 and episode_horizon(envs, cfg(ids[key])) == 50
    finally:
        envs.close()


def test_a_loop_of_copies_made_without_gymnasium_make_is_read_through_its_first_copy():
    """Copies built by hand carry no spec: only their wrapper chain tells the limit."""
    envs = gym.vector.SyncVectorEnv([own_wrapper, own_wrapper])
    try:
        assert envs.envs[0].spec is None
        assert episode_cap(envs) == 50
        assert episode_horizon(envs, {"id": "unregistered-v0"}) == 50
    finally:
        envs.close()


def train(name, folder, capsys, steps=1600):
    results = her_rl.train(["algo=her_dqn", "env=gym", f"env.id={name}", f"budget.env_steps={steps}",
                            "eval.episodes=2", "progress=false"], out_dir=folder)
    return results, capsys.readouterr().out


@pytest.mark.slow
def test_a_run_keeps_the_wrapped_limit_as_its_plainly_registered_twin_does(ids, tmp_path, capsys):
    runs = {key: train(ids[key], tmp_path / key, capsys) for key in ("wrapped", "mine", "plain")}
    for key, (results, out) in runs.items():
        assert NO_LIMIT_LINE not in out, key
        # 16 episodes of 50 steps a cycle: 1600 env steps are 2 cycles (a 1,000-step horizon: 1 episode each)
        assert (results["iterations"], results["env_steps"], results["episodes"]) == (2, 1600, 32), key


@pytest.mark.slow
def test_a_run_on_an_env_with_no_limit_gets_the_default_and_says_so(ids, tmp_path, capsys):
    results, out = train(ids["endless"], tmp_path / "endless", capsys, steps=1000)
    assert f"env {ids['endless']} {NO_LIMIT_LINE}: her-rl truncates its episodes after 1,000 steps" in out
    assert (results["iterations"], results["env_steps"], results["episodes"]) == (1, 1000, 1)
