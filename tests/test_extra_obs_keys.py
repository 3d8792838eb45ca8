"""A goal env's observation keys beside observation/achieved_goal/desired_goal (a velocity, a step count)
are network inputs: flattened after ``observation`` for the hindsight learners and PPO alike."""

import gymnasium as gym
import numpy as np
import pytest
import torch.nn as nn
from gymnasium import spaces

import her_rl
from her_rl.algos.onpolicy_actor import ObsProcessor, check_spaces
from her_rl.algos.ppo import PPO
from her_rl.envs import make_vec
from her_rl.envs.goal_env import extra_keys
from her_rl.errors import ConfigError
from her_rl.rl.her import GoalInputs, collect_episodes, flat_observation, goal_env_spec

ENV_ID = "HerRlTestExtraKeysGoal-v0"
ENV = {"name": "gym", "id": ENV_ID, "kwargs": {}}
# observation 2, velocity 3, step_count 1, desired_goal 2
OBS, VEL, STEPS, GOAL = 2, 3, 1, 2


class ExtraKeysGoal(gym.Env):
    """A point moving towards a goal on a plane; its velocity and step count ride beside the goal keys."""

    def __init__(self):
        box = spaces.Box(-1, 1, (2,), np.float32)
        self.observation_space = spaces.Dict({
            "observation": box, "achieved_goal": box, "desired_goal": box,
            "velocity": spaces.Box(-5, 5, (VEL,), np.float32), "step_count": spaces.Box(0, 50, (STEPS,), np.float32)})
        self.action_space = spaces.Box(-1, 1, (2,), np.float32)

    def compute_reward(self, achieved_goal, desired_goal, info):
        far = np.linalg.norm(np.asarray(achieved_goal) - np.asarray(desired_goal), axis=-1) > 0.1
        return -far.astype(np.float32)

    def _obs(self):
        return {"observation": self.pos.copy(), "achieved_goal": self.pos.copy(), "desired_goal": self.goal.copy(),
                "velocity": self.vel.copy(), "step_count": np.array([self.t], np.float32)}

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.pos = self.np_random.uniform(-0.5, 0.5, 2).astype(np.float32)
        self.goal = self.np_random.uniform(-0.5, 0.5, 2).astype(np.float32)
        self.vel, self.t = np.zeros(VEL, np.float32), 0
        return self._obs(), {}

    def step(self, action):
        a = np.clip(np.asarray(action, np.float32), -1, 1)
        self.vel = np.array([a[0], a[1], np.abs(a).sum()], np.float32)
        self.pos = np.clip(self.pos + 0.1 * a, -1, 1).astype(np.float32)
        self.t += 1
        reward = float(self.compute_reward(self.pos, self.goal, None))
        return self._obs(), reward, False, False, {"is_success": reward == 0.0}


@pytest.fixture(scope="module")
def registered():
    gym.register(ENV_ID, entry_point=ExtraKeysGoal, max_episode_steps=50)
    yield ENV_ID
    gym.registry.pop(ENV_ID, None)


@pytest.fixture(scope="module")
def trained_and_said(registered, tmp_path_factory):
    import contextlib
    import io

    out, said = tmp_path_factory.mktemp("extra") / "run", io.StringIO()
    with contextlib.redirect_stdout(said):
        her_rl.train(["algo=her_ddpg", "env=gym", f"env.id={registered}", "budget.env_steps=200", "progress=false",
                      "algo.episodes_per_cycle=2", "algo.updates_per_cycle=2", "algo.hidden=[16]",
                      "algo.batch_size=16", "eval.episodes=2"], out_dir=out)
    return out, said.getvalue()


@pytest.fixture(scope="module")
def trained(trained_and_said):
    return trained_and_said[0]


def test_the_extra_keys_are_said_at_start(trained_and_said):
    lines = [line for line in trained_and_said[1].splitlines() if "beside the goal keys" in line]
    assert lines == [f"env {ENV_ID}: observation keys 'step_count', 'velocity' beside the goal keys are network "
                     "inputs (flattened after 'observation', in this order, and normalised with it); predict asks "
                     "for them too"]


def _first_linear(net: nn.Module) -> nn.Linear:
    return next(m for m in net.modules() if isinstance(m, nn.Linear))


def test_the_loaded_her_ddpg_policy_reads_the_velocity(trained):
    policy = her_rl.load(trained)
    env = policy.make_env()
    obs, _ = env.reset(seed=0)
    actions = set()
    for v in (-5.0, -1.0, 0.0, 1.0, 5.0):  # far apart: whitened, they are clipped to different inputs
        action, _ = policy.predict({**obs, "velocity": np.full(VEL, v, np.float32)}, deterministic=True)
        actions.add(tuple(np.round(np.asarray(action, np.float64), 6)))
    assert len(actions) > 1, "the policy ignores velocity"
    without = {k: v for k, v in obs.items() if k != "velocity"}
    with pytest.raises(ConfigError, match="'velocity'") as err:
        policy.predict(without, deterministic=True)
    assert "\n" not in str(err.value)


def test_the_network_input_is_observation_extra_keys_and_goal(trained):
    agent = her_rl.load(trained).agent
    assert agent.inputs.dim == OBS + VEL + STEPS + GOAL
    assert _first_linear(agent.actor).in_features == OBS + VEL + STEPS + GOAL
    assert agent.spec.extra_keys == ("step_count", "velocity")  # the Dict space's sorted order
    assert agent.spec.obs_shape == (OBS + STEPS + VEL,)
    assert agent.inputs.obs_rms.mean.shape == (OBS + STEPS + VEL,)  # the statistics cover the extra keys


def test_collected_episodes_store_the_flattened_observation(registered):
    envs = make_vec(ENV, 2, seed=0, training=True)
    spec = goal_env_spec(envs, ENV, "her_ddpg")
    assert not spec.binary
    episodes = collect_episodes(envs, spec, lambda obs: np.full((2, 2), 0.5, np.float32), seed=0)
    assert episodes["obs"].shape == (2, 51, OBS + STEPS + VEL)
    # columns: observation (2), step_count (1), velocity (3); actions of 0.5 give velocity (0.5, 0.5, 1)
    np.testing.assert_array_equal(episodes["obs"][0, :4, OBS], [0, 1, 2, 3])
    np.testing.assert_allclose(episodes["obs"][0, 1, OBS + STEPS:], [0.5, 0.5, 1.0])
    inputs = GoalInputs(spec)
    inputs.update(episodes)
    assert inputs.obs_rms.mean[OBS] > 0  # the step count is normalised like the observation
    envs.close()


def test_ppo_reads_the_extra_keys(registered):
    agent = PPO(env=ENV, seed=0, num_envs=2, num_steps=8, epochs=1, hidden=(8,))
    assert agent.obs_proc.dim == OBS + VEL + STEPS + GOAL
    assert _first_linear(agent.actor).in_features == OBS + VEL + STEPS + GOAL
    obs = {"observation": np.zeros((1, 2)), "achieved_goal": np.zeros((1, 2)), "desired_goal": np.full((1, 2), 9.0),
           "velocity": np.array([[1.0, 2.0, 3.0]]), "step_count": np.array([[7.0]])}
    np.testing.assert_array_equal(agent.obs_proc.flat(obs), [[0, 0, 7, 1, 2, 3, 9, 9]])
    agent.train_iteration()


def test_flat_observation_orders_keys_and_flattens_every_kind():
    obs = {"observation": np.array([[1, 2], [3, 4]], np.float32), "a": np.array([5, 6]),  # Discrete: its value
           "b": np.array([[[1, 0], [0, 1]], [[0, 0], [1, 1]]], np.int8), "achieved_goal": None, "desired_goal": None}
    flat = flat_observation(obs, ("a", "b"))
    assert flat.dtype == np.float32
    np.testing.assert_array_equal(flat, [[1, 2, 5, 1, 0, 0, 1], [3, 4, 6, 0, 0, 1, 1]])
    assert flat_observation(obs, ()) is obs["observation"]  # no extra keys: nothing copied


def test_extra_keys_take_arrays_and_refuse_what_cannot_be_flattened():
    box = spaces.Box(-1, 1, (2,))
    goal = {"observation": box, "achieved_goal": box, "desired_goal": box}
    ok = spaces.Dict({**goal, "z": spaces.Discrete(3), "m": spaces.MultiDiscrete([2, 3]), "b": spaces.MultiBinary(2)})
    assert extra_keys(ok) == ("b", "m", "z")
    assert extra_keys(spaces.Dict(goal)) == ()
    for bad in (spaces.Dict({"x": box}), spaces.Tuple((box,)), spaces.Text(5)):
        space = spaces.Dict({**goal, "inner": bad})
        with pytest.raises(ConfigError, match="'inner'") as err:
            extra_keys(space, "env 'gym' (X-v0)")
        assert "env 'gym' (X-v0)" in str(err.value) and "\n" not in str(err.value)
        with pytest.raises(ConfigError, match="algo 'ppo'.*'inner'"):
            check_spaces("ppo", space, spaces.Discrete(2))
        with pytest.raises(ConfigError, match="'inner'"):
            ObsProcessor(space)
