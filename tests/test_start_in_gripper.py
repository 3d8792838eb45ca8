"""``env.start_in_gripper``: a share of FetchPickAndPlace's training episodes start with the block
held (her_rl.envs.fetch.StartInGripper); evaluation episodes never do; envs without a block that the
fingers can hold are refused in one line before anything is written."""

import importlib.util

import numpy as np
import pytest

import her_rl  # noqa: F401  (registers the env ids)
from her_rl.config import checks
from her_rl.errors import ConfigError

MISSING = [m for m in ("gymnasium_robotics", "mujoco") if importlib.util.find_spec(m) is None]
needs_robotics = pytest.mark.skipif(bool(MISSING), reason="robotics extra not installed")
PNP = {"name": "fetch_pick_and_place", "id": "FetchPickAndPlace-v4", "kwargs": {}, "vectorization": "sync"}


def _held(obs) -> np.ndarray:
    """Per copy: the block lies at the gripper's centre (observation[3:6] is the block, [:3] the grip)."""
    o = obs["observation"]
    return np.linalg.norm(o[:, 3:6] - o[:, :3], axis=1) < 1e-3


def test_the_share_is_checked():
    env = {**PNP, "solved_return": None, "eval_episodes": 20}
    for share in (0, 0.5, 1.0, None):
        checks.check_env({**env, "start_in_gripper": share})
    with pytest.raises(ConfigError, match=r"env.start_in_gripper=1.5 is not allowed"):
        checks.check_env({**env, "start_in_gripper": 1.5})


@needs_robotics
def test_every_training_episode_starts_held_and_the_block_stays_held_when_the_fingers_close():
    from her_rl.envs import make_vec

    envs = make_vec({**PNP, "start_in_gripper": 1.0}, 3, seed=0, training=True)
    try:
        obs, _ = envs.reset(seed=0)
        assert _held(obs).all()
        table = envs.envs[0].unwrapped.height_offset
        assert (obs["achieved_goal"][:, 2] > table + 0.05).all()  # in the air
        np.testing.assert_allclose(obs["observation"][:, 9:11], 0.0242, atol=1e-3)  # fingers on the block
        lift = np.tile(np.array([0, 0, 0.5, -1], np.float32), (3, 1))
        for _ in range(10):
            obs, *_ = envs.step(lift)
        assert (obs["achieved_goal"][:, 2] > table + 0.1).all()  # carried up with the gripper
    finally:
        envs.close()


@needs_robotics
def test_a_share_of_training_episodes_and_no_evaluation_episode_start_held():
    from her_rl.envs import make_vec

    env = {**PNP, "start_in_gripper": 0.5}
    starts = []
    for _ in range(2):  # the same seed: the same episodes start held
        envs = make_vec(env, 4, seed=3, training=True)
        try:
            starts.append(np.concatenate([_held(envs.reset(seed=3 + i)[0]) for i in range(10)]))
        finally:
            envs.close()
    np.testing.assert_array_equal(*starts)
    assert 0.25 < starts[0].mean() < 0.75, starts[0].mean()
    table = make_vec(env, 4, seed=3)  # evaluation copies (training=False)
    try:
        for i in range(10):
            obs, _ = table.reset(seed=3 + i)
            assert not _held(obs).any()
            np.testing.assert_allclose(obs["achieved_goal"][:, 2], table.envs[0].unwrapped.height_offset, atol=1e-3)
    finally:
        table.close()


@needs_robotics
def test_a_hindsight_learner_collects_in_copies_that_start_held():
    from her_rl.algos.cycle import cycle_envs

    envs, _ = cycle_envs({**PNP, "start_in_gripper": 1.0}, 2, seed=0, algo="her_ddpg")
    try:
        assert _held(envs.reset(seed=0)[0]).all()
    finally:
        envs.close()


@needs_robotics
@pytest.mark.parametrize("env_name", ["fetch_push", "fetch_reach", "push"])
def test_an_env_without_a_block_to_hold_is_one_line_exit_2_and_no_folder(her_run, tmp_path, env_name):
    import subprocess

    p = subprocess.run([her_run, "algo=her_ddpg", f"env={env_name}", "+env.start_in_gripper=0.5",
                        "budget.env_steps=100", f"hydra.run.dir={tmp_path / 'run'}"],
                       capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert p.returncode == 2, (p.stdout, p.stderr)
    line = p.stderr.strip()
    assert "\n" not in line and "Traceback" not in line, line
    assert "env.start_in_gripper needs a MuJoCo Fetch task with a block and working fingers" in line
    assert not (tmp_path / "run").exists()


@needs_robotics
def test_the_sb3_twins_training_env_holds_the_same_share_and_its_hindsight_buffer_works_through_it():
    pytest.importorskip("stable_baselines3")
    from bench import frontier, zoo

    settings = {**frontier.twin("fetch_pick_and_place_frontier"), "start_in_gripper": 1.0, "buffer_size": 1000}
    model = zoo.build(settings, "FetchPickAndPlace-v4", {}, seed=0)
    try:
        obs = model.env.unnormalize_obs(model.env.reset()) if hasattr(model.env, "unnormalize_obs") else model.env.reset()
        assert _held(obs).all()
        model.learn(total_timesteps=60)  # one episode and more: HER relabels through the wrapper's compute_reward
        assert model.replay_buffer.size() > 0
    finally:
        model.env.close()
    plain = zoo.build({**settings, "start_in_gripper": 0.0}, "FetchPickAndPlace-v4", {}, seed=0)
    try:
        obs = plain.env.unnormalize_obs(plain.env.reset()) if hasattr(plain.env, "unnormalize_obs") else plain.env.reset()
        assert not _held(obs).any()
    finally:
        plain.env.close()
