"""Energy-based trajectory prioritisation (Zhao and Tresp 2018): the trajectory energy as defined, and
batches drawn from episodes in proportion to it."""

import numpy as np
import pytest
from gymnasium import spaces

from her_rl.algos.her_ddpg import HerDDPG
from her_rl.rl.her import GRAVITY, HindsightSettings, trajectory_energy
from test_her import memory_for


def _reference(positions, length, clip, dt):
    """The definition, one episode and one step at a time."""
    total, previous = 0.0, None
    for t in range(1, length + 1):
        p, q = positions[t], positions[t - 1]
        energy = GRAVITY * (p[2] - positions[0][2]) + 0.5 * sum(((a - b) / dt) ** 2 for a, b in zip(p, q))
        gain = energy if previous is None else energy - previous
        total += min(max(gain, 0.0), clip)
        previous = energy
    return total


def test_trajectory_energy_follows_its_definition():
    rng = np.random.default_rng(0)
    ag = np.cumsum(rng.normal(0, 0.01, size=(6, 11, 3)), axis=1)
    lengths = np.array([10, 3, 1, 7, 10, 5])
    got = trajectory_energy(ag, lengths, clip_energy=0.5, dt=0.04)
    want = [_reference(ag[i].tolist(), lengths[i], 0.5, 0.04) for i in range(6)]
    np.testing.assert_allclose(got, want, rtol=1e-9)
    assert trajectory_energy(np.zeros((2, 5, 3)), np.array([4, 4]), 0.5).tolist() == [0.0, 0.0]


def _memory(energies_from, **settings):
    memory = memory_for(10, 4, 3, 3, lambda a, g, i: -(np.linalg.norm(a - g, axis=-1) > 0.05).astype(np.float32),
                        action_space=spaces.Box(-1, 1, (2,), np.float32), seed=0, prioritize="energy", clip_energy=10.0,
                        **settings)
    ag = np.zeros((len(energies_from), 5, 3), np.float32)
    for i, lift in enumerate(energies_from):
        ag[i, 1:, 2] = lift  # the object raised by `lift` at the first step and held there
    memory.remember(obs=np.zeros((len(ag), 5, 3), np.float32), achieved_goal=ag,
                    desired_goal=np.ones((len(ag), 3), np.float32), action=np.zeros((len(ag), 4, 2), np.float32),
                    length=np.full(len(ag), 4))
    return memory


def test_batches_draw_episodes_in_proportion_to_their_energy():
    memory = _memory([0.0, 0.01, 0.03])
    energy = memory.episodes.data["energy"][:3]
    assert energy[0] == 0.0 and energy[2] > energy[1] > 0
    ep, t = memory.draw(60_000, np.random.default_rng(1))
    shares = np.bincount(ep, minlength=3) / len(ep)
    np.testing.assert_allclose(shares, energy / energy.sum(), atol=0.01)
    assert set(np.unique(t)) == {0, 1, 2, 3}  # steps uniform within the episode


def test_an_energy_share_draws_the_rest_of_a_batch_uniformly():
    energy = _memory([0.0, 0.01, 0.03]).episodes.data["energy"][:3]
    by_energy, uniform = energy / energy.sum(), np.full(3, 1 / 3)  # equal lengths: uniform over steps is 1/3 each
    for share in (0.25, 0.5):
        ep, t = _memory([0.0, 0.01, 0.03], energy_share=share).draw(80_000, np.random.default_rng(3))
        assert len(ep) == len(t) == 80_000
        np.testing.assert_allclose(np.bincount(ep, minlength=3) / len(ep), share * by_energy + (1 - share) * uniform,
                                   atol=0.01)  # the still episode (no energy) is replayed again
        assert set(np.unique(t)) == {0, 1, 2, 3}
    a = _memory([0.0, 0.01, 0.03]).draw(500, np.random.default_rng(4))
    b = _memory([0.0, 0.01, 0.03], energy_share=1.0).draw(500, np.random.default_rng(4))
    assert all(np.array_equal(x, y) for x, y in zip(a, b))  # 1, the default: the paper's draw
    with pytest.raises(ValueError, match="energy_share must lie in"):
        HindsightSettings(prioritize="energy", energy_share=1.5)


def test_without_any_energy_batches_are_uniform_over_steps():
    memory = _memory([0.0, 0.0])
    ep, _ = memory.draw(20_000, np.random.default_rng(2))
    np.testing.assert_allclose(np.bincount(ep) / len(ep), [0.5, 0.5], atol=0.02)


def test_the_learner_keys_reach_the_memory_and_a_cycle_runs():
    push = {"name": "push", "id": "her_rl/Push-v0", "kwargs": {"actions": "continuous", "max_episode_steps": 10}}
    agent = HerDDPG(env=push, seed=0, hidden=(16, 16), episodes_per_cycle=4, updates_per_cycle=2, batch_size=8,
                    prioritize="energy", clip_energy=0.3, energy_dt=0.1, energy_share=0.5)
    settings = agent.memory.settings
    assert (settings.prioritize, settings.clip_energy, settings.energy_dt, settings.energy_share) == ("energy", 0.3,
                                                                                                      0.1, 0.5)
    agent.train_iteration()
    assert agent.memory.episodes.data["energy"][:4].shape == (4,)


def test_an_unknown_prioritisation_is_refused():
    with pytest.raises(ValueError, match="unknown prioritisation"):
        HindsightSettings(prioritize="td")
