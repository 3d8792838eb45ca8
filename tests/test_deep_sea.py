"""Deep Sea rules (bsuite): reward only bottom-right, cost per right move, fixed mapping, length N."""

import itertools

import gymnasium as gym
import numpy as np
import pytest

import her_rl.envs  # noqa: F401  (registers her_rl/DeepSea-v0)
from her_rl.envs import make_vec
from her_rl.envs.deep_sea import DeepSeaEnv


def play(env: DeepSeaEnv, actions):
    obs, _ = env.reset()
    rewards, observations, flags = [], [obs], []
    for a in actions:
        obs, r, term, trunc, _ = env.step(a)
        rewards.append(r)
        observations.append(obs)
        flags.append((term, trunc))
    return rewards, observations, flags


def test_only_the_all_right_path_pays_and_right_moves_cost():
    n = 5
    env = DeepSeaEnv(size=n, mapping_seed=3)
    returns = {}
    for seq in itertools.product([0, 1], repeat=n):  # all 2^n action sequences
        rewards, _, _ = play(env, seq)
        returns[seq] = sum(rewards)
    best = tuple(env.optimal_actions())
    assert returns[best] == pytest.approx(1.0 - 0.01)
    assert all(r <= 0.0 for seq, r in returns.items() if seq != best)
    # every "right" costs 0.01/N, "left" is free
    rewards, _, _ = play(env, best)
    assert rewards[:-1] == pytest.approx([-0.01 / n] * (n - 1))
    assert rewards[-1] == pytest.approx(1.0 - 0.01 / n)
    lefts = [1 - int(env.action_right[i, 0]) for i in range(n)]  # stays in column 0 throughout
    assert sum(play(env, lefts)[0]) == 0.0


def test_episode_lasts_exactly_n_steps_and_observation_is_one_hot_position():
    n = 6
    env = DeepSeaEnv(size=n)
    rng = np.random.default_rng(0)
    _, observations, flags = play(env, rng.integers(0, 2, size=n))
    assert [f[0] for f in flags] == [False] * (n - 1) + [True]
    assert not any(f[1] for f in flags)
    assert observations[0].shape == (n * n,) and observations[0].dtype == np.float32
    assert observations[0][0] == 1.0 and observations[0].sum() == 1.0  # start: top-left
    for row, obs in enumerate(observations[:-1]):
        assert obs.sum() == 1.0 and int(np.argmax(obs)) // n == row  # one row down per step
    assert observations[-1].sum() == 0.0  # left the grid
    with pytest.raises(RuntimeError):
        env.step(0)


def test_action_mapping_is_fixed_by_mapping_seed_only():
    a, b, c = DeepSeaEnv(size=8, mapping_seed=0), DeepSeaEnv(size=8, mapping_seed=0), DeepSeaEnv(size=8, mapping_seed=1)
    assert np.array_equal(a.action_right, b.action_right)
    assert not np.array_equal(a.action_right, c.action_right)
    before = a.action_right.copy()
    a.reset(seed=123)
    a.reset(seed=456)
    assert np.array_equal(a.action_right, before)
    # the mapping is not trivial: both actions mean "right" somewhere
    assert 0 < before.sum() < before.size


def test_registered_and_vectorised():
    env = gym.make("her_rl/DeepSea-v0", size=4)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (16,)
    envs = make_vec({"name": "deep_sea", "id": "her_rl/DeepSea-v0", "kwargs": {"size": 4}}, 3, seed=0)
    obs, _ = envs.reset(seed=0)
    assert obs.shape == (3, 16)
    for _ in range(4):
        obs, r, term, trunc, _ = envs.step(np.zeros(3, dtype=np.int64))
    assert term.all()


def test_bad_size_is_rejected():
    with pytest.raises(ValueError):
        DeepSeaEnv(size=0)


def test_batched_env_matches_a_loop_of_single_envs_through_autoresets():
    from her_rl.envs.deep_sea import DeepSeaVectorEnv

    n, copies = 5, 7
    batched = make_vec({"name": "deep_sea", "id": "her_rl/DeepSea-v0", "kwargs": {"size": n, "mapping_seed": 2}}, copies)
    assert isinstance(batched, DeepSeaVectorEnv)  # make_vec picks the numpy-batched implementation
    loop = gym.vector.SyncVectorEnv([lambda: DeepSeaEnv(size=n, mapping_seed=2) for _ in range(copies)])
    assert np.array_equal(batched.reset(seed=0)[0], loop.reset(seed=0)[0])
    rng = np.random.default_rng(0)
    # biased towards "right" so some copies reach the rewarding corner
    optimal = np.array(DeepSeaEnv(size=n, mapping_seed=2).optimal_actions())
    total_reward, ends = 0.0, 0
    for t in range(6 * (n + 1)):
        step_in_episode = t % (n + 1)
        actions = np.where(rng.random(copies) < 0.8, optimal[min(step_in_episode, n - 1)], rng.integers(0, 2, copies))
        got, want = batched.step(actions), loop.step(actions)
        for a, b in zip(got[:4], want[:4]):
            np.testing.assert_allclose(a, b)
        total_reward += float(np.sum(got[1] > 0.5))
        ends += int(got[2].sum())
    assert ends == 6 * copies and total_reward > 0  # all episodes ended on time, some paid
    with pytest.raises(ValueError):
        batched.step(np.full(copies, 2))


def test_batched_reset_leaves_arrays_returned_earlier_untouched():
    envs = make_vec({"name": "deep_sea", "id": "her_rl/DeepSea-v0", "kwargs": {"size": 2}}, 3)
    envs.reset(seed=0)
    envs.step(np.zeros(3, dtype=np.int64))
    _, _, terminated, _, _ = envs.step(np.zeros(3, dtype=np.int64))
    assert terminated.all()
    envs.reset()
    assert terminated.all()  # a rollout buffer may still hold this array


def test_rgb_array_render_marks_the_agent():
    env = gym.make("her_rl/DeepSea-v0", size=8, render_mode="rgb_array")
    env.reset(seed=0)
    cell = 256 // 8
    before = env.render()
    assert before.shape == (9 * cell, 8 * cell, 3)
    assert tuple(before[cell // 2, cell // 2]) == (220, 40, 40)  # the agent starts top-left
    env.step(env.unwrapped.optimal_actions()[0])
    after = env.render()
    assert tuple(after[cell + cell // 2, cell + cell // 2]) == (220, 40, 40)  # one row down, one right
