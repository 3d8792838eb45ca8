"""Hindsight relabelling properties of HindsightMemory (her_rl/rl/her.py)."""

import numpy as np
import pytest
from gymnasium import spaces

from her_rl.envs.bitflip import compute_reward
from her_rl.rl.her import STRATEGIES, GoalEnvSpec, HindsightMemory, HindsightSettings


def reached(achieved_goal, desired_goal, info=None):
    """Bit-flip's termination rule: the episode ends when the goal is reached."""
    return compute_reward(achieved_goal, desired_goal) == 0.0

T, N_BITS, EPISODES = 12, 40, 30


def memory_for(episodes: int, horizon: int, obs_dim: int, goal_dim: int, compute_reward=compute_reward,
               compute_terminated=None, dtype=np.float32, action_space=spaces.Discrete(2), seed=None,
               **settings) -> HindsightMemory:
    """A memory with room for ``episodes`` episodes of a made-up goal env: vector observations and goals
    of one ``dtype`` (int8: bits), the given rules, and ``settings`` (HindsightSettings' keys)."""
    spec = GoalEnvSpec(obs_shape=(obs_dim,), goal_shape=(goal_dim,), obs_dtype=np.dtype(dtype),
                       goal_dtype=np.dtype(dtype), binary=np.dtype(dtype) == np.int8, action_space=action_space,
                       horizon=horizon, compute_reward=compute_reward, compute_terminated=compute_terminated)
    return HindsightMemory(spec, HindsightSettings(buffer_size=episodes * horizon, **settings), seed)


def _filled_memory(strategy: str, k: int = 4, seed: int = 0) -> tuple[HindsightMemory, dict[str, np.ndarray]]:
    """Episodes of random, variable length whose achieved goals are all distinct (40 random bits),
    and the episodes it was given (the memory holds them all: it has room for 64)."""
    rng = np.random.default_rng(seed)
    mem = memory_for(64, T, N_BITS, N_BITS, compute_terminated=reached, dtype=np.int8, seed=seed, strategy=strategy,
                     k=k)
    obs = rng.integers(0, 2, size=(EPISODES, T + 1, N_BITS), dtype=np.int8)
    episodes = dict(obs=obs, achieved_goal=obs,
                    desired_goal=rng.integers(0, 2, size=(EPISODES, N_BITS), dtype=np.int8),
                    action=rng.integers(0, N_BITS, size=(EPISODES, T)), length=rng.integers(1, T + 1, size=EPISODES))
    mem.remember(**episodes)
    return mem, episodes


def _locate(episodes: dict[str, np.ndarray], goal: np.ndarray) -> tuple[int, int]:
    """(episode, index) of the achieved goal equal to ``goal`` (unique by construction)."""
    hits = np.argwhere(np.all(episodes["achieved_goal"] == goal, axis=-1))
    assert len(hits) == 1, "goal is not one stored achieved goal"
    return int(hits[0, 0]), int(hits[0, 1])


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_relabelled_reward_and_termination_match_compute_reward(strategy):
    mem, _ = _filled_memory(strategy)
    batch = mem.sample(4096)
    np.testing.assert_array_equal(batch["reward"], compute_reward(batch["next_obs"], batch["goal"]))
    np.testing.assert_array_equal(batch["terminated"], batch["reward"] == 0.0)
    if strategy in ("future", "final", "episode", "next", "next_future"):
        assert batch["terminated"].mean() > 0.05  # relabelling makes reaching "a goal" common


def test_next_goals_are_what_the_step_itself_achieved_and_next_future_mixes_half_and_half():
    mem, episodes = _filled_memory("next", k=10**6)
    ep = np.repeat(np.arange(EPISODES), 3)
    t = np.minimum(np.tile([0, 1, 2], EPISODES), episodes["length"][ep] - 1)
    g_ep, g_idx = mem.goal_indices(ep, t, np.random.default_rng(0))
    assert np.all(g_ep == ep) and np.all(g_idx == t + 1)
    batch = mem.sample(4000, np.random.default_rng(1))
    assert batch["terminated"].mean() > 0.99  # each relabelled step reaches its own next achieved goal
    mem, episodes = _filled_memory("next_future", k=10**6)
    e = int(np.argmax(episodes["length"]))
    L = int(episodes["length"][e])
    ep, t = np.full(20000, e), np.zeros(20000, dtype=np.int64)
    _, idx = mem.goal_indices(ep, t, np.random.default_rng(2))
    assert np.all((idx >= 1) & (idx <= L))
    share_next = (idx == 1).mean()  # next always gives index 1 here; future gives it with probability 1/L
    assert abs(share_next - (0.5 + 0.5 / L)) < 0.02
    counts = np.bincount(idx, minlength=L + 1)[2:]
    assert counts.min() > 0.7 * 0.5 * 20000 / L  # the future half covers every later step


def test_future_goals_come_from_the_same_episode_at_or_after_the_transition():
    mem, episodes = _filled_memory("future", k=4)
    length = episodes["length"]
    for e in range(EPISODES):
        out = mem.hindsight(e)
        assert len(out["t"]) == 5 * length[e]
        relabelled = np.tile(np.arange(5) > 0, length[e])
        for t, goal in zip(out["t"][relabelled], out["goal"][relabelled]):
            ep, idx = _locate(episodes, goal)
            assert ep == e and t + 1 <= idx <= length[e]
        np.testing.assert_array_equal(out["reward"], compute_reward(out["next_obs"], out["goal"]))


def test_future_relabelling_covers_all_later_steps_uniformly():
    mem, episodes = _filled_memory("future", k=10**6)  # relabel (almost) always
    e = int(np.argmax(episodes["length"]))
    L = int(episodes["length"][e])
    ep = np.zeros(20000, dtype=np.int64) + e
    _, idx = mem.goal_indices(ep, np.zeros_like(ep), np.random.default_rng(1))
    counts = np.bincount(idx, minlength=L + 1)
    assert counts[0] == 0 and counts[1:].min() > 0.7 * 20000 / L


def test_final_episode_and_random_strategies_pick_the_right_goals():
    for strategy in ("final", "episode", "random"):
        mem, episodes = _filled_memory(strategy, k=10**6)
        length = episodes["length"]
        ep = np.arange(EPISODES)
        g_ep, g_idx = mem.goal_indices(ep, np.zeros(EPISODES, dtype=np.int64), np.random.default_rng(0))
        if strategy == "final":
            assert np.all(g_ep == ep) and np.all(g_idx == length[ep])
        elif strategy == "episode":
            assert np.all(g_ep == ep) and np.all((g_idx >= 1) & (g_idx <= length[ep]))
        else:
            assert (g_ep != ep).any() and np.all((g_idx >= 1) & (g_idx <= length[g_ep]))


def test_relabel_ratio_is_k_over_k_plus_one_and_none_keeps_goals():
    mem, episodes = _filled_memory("future", k=4)
    batch = mem.sample(20000, np.random.default_rng(3))
    original = episodes["desired_goal"]
    kept = np.array([np.any(np.all(original == g, axis=1)) for g in batch["goal"][:2000]])
    assert abs((1 - kept.mean()) - 0.8) < 0.04
    plain = _filled_memory("none")[0].sample(500)
    assert all(np.any(np.all(original == g, axis=1)) for g in plain["goal"])


def test_sampled_steps_lie_inside_each_episode():
    mem, episodes = _filled_memory("future")
    batch = mem.sample(5000)
    # every sampled obs is a stored obs at a step < that episode's length
    for o in batch["obs"][:300]:
        e, t = _locate(episodes, o)
        assert t < episodes["length"][e]


def test_len_counts_transitions_and_state_round_trips():
    mem, episodes = _filled_memory("future")
    assert len(mem) == int(episodes["length"].sum())
    copy = memory_for(64, T, N_BITS, N_BITS, compute_terminated=reached, dtype=np.int8)
    copy.load_state_dict(mem.state_dict())
    a, b = mem.sample(64), copy.sample(64)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key])


def test_bad_strategy_and_lengths_are_rejected():
    with pytest.raises(ValueError, match="valid choices"):
        HindsightSettings(strategy="later")
    mem = memory_for(4, 3, 2, 2)
    with pytest.raises(ValueError, match="lengths"):
        mem.remember(obs=np.zeros((1, 4, 2)), achieved_goal=np.zeros((1, 4, 2)), desired_goal=np.zeros((1, 2)),
                     action=np.zeros((1, 3), dtype=np.int64), length=np.array([4]))


def test_transitions_are_drawn_uniformly_over_episodes_of_unequal_length():
    """An episode of length 10 holds 10x the transitions of one of length 1: it must be drawn 10x as often,
    and every step of every episode equally often (the paper's and SB3's uniform transition sampling)."""
    mem = memory_for(8, 10, 1, 1, strategy="none")
    lengths = np.array([1, 10, 4, 10, 2])
    B = len(lengths)
    obs = np.arange(B * 11, dtype=np.float32).reshape(B, 11, 1)  # every (episode, step) has its own value
    mem.remember(obs=obs, achieved_goal=obs, desired_goal=np.zeros((B, 1)), action=np.zeros((B, 10), dtype=np.int64),
                 length=lengths)
    assert len(mem) == lengths.sum()
    draws = 200_000
    batch = mem.sample(draws, np.random.default_rng(0))
    ep, t = np.divmod(batch["obs"][:, 0].astype(np.int64), 11)
    assert np.all(t < lengths[ep])  # never a step past an episode's end
    counts = np.zeros((B, 10))
    np.add.at(counts, (ep, t), 1)
    expected = draws / lengths.sum()
    valid = np.arange(10)[None, :] < lengths[:, None]
    assert np.all(np.abs(counts[valid] - expected) < 0.06 * expected), counts
    per_episode = counts.sum(1) / draws
    np.testing.assert_allclose(per_episode, lengths / lengths.sum(), atol=0.01)


def test_random_strategy_draws_goals_uniformly_over_all_stored_steps():
    mem = memory_for(8, 10, 1, 1, strategy="random", k=10**6)
    lengths = np.array([1, 10, 3])
    obs = np.arange(33, dtype=np.float32).reshape(3, 11, 1)
    mem.remember(obs=obs, achieved_goal=obs, desired_goal=np.zeros((3, 1)), action=np.zeros((3, 10), dtype=np.int64),
                 length=lengths)
    g_ep, g_idx = mem.goal_indices(np.zeros(140_000, dtype=np.int64), np.zeros(140_000, dtype=np.int64),
                                   np.random.default_rng(1))
    assert np.all((g_idx >= 1) & (g_idx <= lengths[g_ep]))
    share = np.bincount(g_ep, minlength=3) / len(g_ep)
    np.testing.assert_allclose(share, lengths / lengths.sum(), atol=0.01)


def test_termination_follows_the_env_rule_not_the_reward():
    """Push-like envs never end on success: a relabelled goal reached gives reward 0 but no termination."""
    mem = memory_for(8, 5, 2, 2, lambda ag, g, info: -(np.linalg.norm(ag - g, axis=-1) > 0.05).astype(np.float32),
                     strategy="final", k=10**6)
    rng = np.random.default_rng(0)
    obs = rng.random((4, 6, 2)).astype(np.float32)
    mem.remember(obs=obs, achieved_goal=obs, desired_goal=np.full((4, 2), 9.0), action=np.zeros((4, 5), dtype=np.int64),
                 length=np.full(4, 5))
    batch = mem.sample(2000, rng)
    assert (batch["reward"] == 0).mean() > 0.1 and not batch["terminated"].any()
    terminal = memory_for(8, 5, 2, 2, mem.compute_reward, strategy="final", k=10**6,
                          compute_terminated=lambda ag, g, info: mem.compute_reward(ag, g, info) == 0)
    terminal.load_state_dict(mem.state_dict())
    batch = terminal.sample(2000, rng)
    np.testing.assert_array_equal(batch["terminated"], batch["reward"] == 0)


def test_random_mix_draws_that_share_of_goals_from_other_episodes():
    """random_mix=0.3 with `final`: 30% of the goals come from any stored step (by length), the rest
    are the transition's own episode's final goal; random_mix=0 leaves the sampling as it was."""
    lengths = np.array([1, 10, 3])
    obs = np.arange(33, dtype=np.float32).reshape(3, 11, 1)

    def memory(**mix) -> HindsightMemory:
        mem = memory_for(8, 10, 1, 1, strategy="final", k=10**6, **mix)
        mem.remember(obs=obs, achieved_goal=obs, desired_goal=np.zeros((3, 1)),
                     action=np.zeros((3, 10), dtype=np.int64), length=lengths)
        return mem

    ep, t = np.ones(100_000, dtype=np.int64), np.zeros(100_000, dtype=np.int64)
    g_ep, g_idx = memory(random_mix=0.3).goal_indices(ep, t, np.random.default_rng(1))
    assert np.all((g_idx >= 1) & (g_idx <= lengths[g_ep]))
    own_final = (g_ep == 1) & (g_idx == 10)
    # the mixed goals land on episode 1's final step with probability 1/14
    assert abs(own_final.mean() - (0.7 + 0.3 / 14)) < 0.01
    np.testing.assert_allclose(np.bincount(g_ep[g_ep != 1], minlength=3)[[0, 2]] / len(ep),
                               0.3 * lengths[[0, 2]] / lengths.sum(), atol=0.005)
    assert np.array_equal(ep, np.ones_like(ep))  # the caller's arrays are not written into
    np.testing.assert_array_equal(memory(random_mix=0.0).sample(64, np.random.default_rng(5))["goal"],
                                  memory().sample(64, np.random.default_rng(5))["goal"])
    with pytest.raises(ValueError, match="random_mix"):
        memory(random_mix=1.5)
