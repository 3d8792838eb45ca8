import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import her_rl.envs  # noqa: F401  (registers her_rl/BitFlip-v0)
from her_rl.envs.bitflip import BitFlipEnv, BitFlipVectorEnv, compute_reward


@pytest.mark.parametrize("n", [1, 5, 128])
def test_gymnasium_env_checker_passes(n):
    env = gym.make("her_rl/BitFlip-v0", n=n)
    check_env(env.unwrapped, skip_render_check=True)


def test_random_start_and_goal_each_episode():
    env = BitFlipEnv(n=16)
    goals = {tuple(env.reset(seed=s)[0]["desired_goal"]) for s in range(20)}
    starts = {tuple(env.reset(seed=s)[0]["observation"]) for s in range(20)}
    assert len(goals) > 15 and len(starts) > 15  # not SB3's fixed all-ones goal


def test_action_flips_one_bit_and_reward_rules():
    env = BitFlipEnv(n=4)
    obs, _ = env.reset(seed=0)
    goal, state = obs["desired_goal"], obs["observation"].copy()
    diff = np.flatnonzero(state != goal)
    for i, bit in enumerate(diff):
        obs, reward, terminated, truncated, info = env.step(bit)
        state[bit] ^= 1
        np.testing.assert_array_equal(obs["observation"], state)
        last = i == len(diff) - 1
        assert reward == (0.0 if last else -1.0)
        assert terminated == last and info["is_success"] == last and not truncated


def test_truncated_after_n_steps_without_success():
    env = BitFlipEnv(n=3)
    obs, _ = env.reset(seed=1)
    # Flipping one bit back and forth alternates between the start and one neighbour; neither is
    # the goal if the bit already matches it (or if all 3 bits differ).
    matching = np.flatnonzero(obs["observation"] == obs["desired_goal"])
    bit = int(matching[0]) if len(matching) else 0
    flags = [env.step(bit)[2:4] for _ in range(3)]
    assert flags == [(False, False), (False, False), (False, True)]


def test_compute_reward_is_vectorised():
    rng = np.random.default_rng(0)
    a = rng.integers(0, 2, size=(7, 5, 10))
    d = a.copy()
    d[:, ::2, 3] ^= 1
    r = compute_reward(a, d, None)
    assert r.shape == (7, 5)
    assert np.all(r[:, ::2] == -1.0) and np.all(r[:, 1::2] == 0.0)
    assert BitFlipEnv(n=10).compute_reward(a[0, 0], a[0, 0], {}) == 0.0


@pytest.mark.parametrize("n", [0, -3, 2.5, "abc", 10_000])
def test_bad_number_of_bits_is_rejected(n):
    with pytest.raises(ValueError, match="n must be an integer in"):
        BitFlipEnv(n=n)


def test_vector_env_matches_single_env_dynamics():
    venv = BitFlipVectorEnv(num_envs=64, n=6, seed=3, autoreset=False)
    obs, _ = venv.reset(seed=3)
    rng = np.random.default_rng(0)
    for _ in range(4):
        state, goal = obs["observation"].copy(), obs["desired_goal"].copy()
        actions = rng.integers(0, 6, size=64)
        obs, reward, terminated, truncated, info = venv.step(actions)
        state[np.arange(64), actions] ^= 1
        np.testing.assert_array_equal(obs["observation"], state)
        np.testing.assert_array_equal(reward, compute_reward(state, goal))
        np.testing.assert_array_equal(info["is_success"], reward == 0)


def test_vector_env_autoresets_on_the_next_step():
    venv = BitFlipVectorEnv(num_envs=64, n=3, seed=0)
    venv.reset(seed=0)
    zeros = np.zeros(64, dtype=int)
    for _ in range(3):
        _, _, terminated, truncated, _ = venv.step(zeros)
        ended = terminated | truncated
        if ended.any():
            break
    assert ended.any() and not ended.all()
    _, reward, terminated, truncated, _ = venv.step(zeros)
    # ended copies were reset by this step (action ignored, reward 0); the others kept stepping
    assert np.all(reward[ended] == 0) and not (terminated | truncated)[ended].any()
    assert np.all(venv.t[ended] == 0) and np.all(venv.t[~ended] >= 2)


def test_large_n_vector_env_steps():
    venv = BitFlipVectorEnv(num_envs=16, n=128, seed=0)
    obs, _ = venv.reset()
    assert obs["observation"].shape == (16, 128)
    venv.step(np.arange(16))


def test_rgb_array_render_shows_state_above_goal():
    env = gym.make("her_rl/BitFlip-v0", n=6, render_mode="rgb_array")
    env.reset(seed=0)
    state, goal = env.unwrapped._state.copy(), env.unwrapped._goal.copy()
    frame = env.render()
    assert frame.shape == (35, 96, 3) and frame.dtype == np.uint8
    top, bottom = frame[8, 8::16], frame[25, 8::16]  # the centre of every cell of each row
    assert [tuple(c) == (40, 90, 200) for c in top] == [bool(b) for b in state]
    assert [tuple(c) == (230, 140, 30) for c in bottom] == [bool(b) for b in goal]
