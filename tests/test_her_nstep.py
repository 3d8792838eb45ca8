"""n-step returns under relabelled goals (HindsightMemory n_step) and HER-DQN's updates_per_step."""

import numpy as np
import pytest
import torch

from her_rl.algos.cycle import updates_for_cycle
from her_rl.envs.bitflip import compute_reward
from her_rl.rl.her import HindsightMemory, HindsightSettings
from test_her import memory_for

GAMMA = 0.9


def reached(achieved_goal, desired_goal, info=None):
    return compute_reward(achieved_goal, desired_goal) == 0.0


def _memory(n_step: int, goal, terminated=reached) -> HindsightMemory:
    """One hand-made 2-bit episode of 4 steps, achieved goals 00 -> 10 -> 11 -> 01 -> 00, stored with
    desired goal ``goal`` and never relabelled."""
    mem = memory_for(4, 4, 2, 2, compute_terminated=terminated, dtype=np.int8, strategy="none", k=0, n_step=n_step,
                     gamma=GAMMA)
    ag = np.array([[[0, 0], [1, 0], [1, 1], [0, 1], [0, 0]]], dtype=np.int8)
    mem.remember(obs=ag, achieved_goal=ag, desired_goal=np.array([goal], dtype=np.int8),
                 action=np.array([[0, 1, 0, 1]]), length=np.array([4]))
    return mem


def _at(mem: HindsightMemory, t: int) -> dict[str, np.ndarray]:
    """The transition of step t, as ``hindsight`` lists the episode (no relabelling: one per step)."""
    out = mem.hindsight(0)
    assert out["t"].tolist() == [0, 1, 2, 3]
    return {key: value[t] for key, value in out.items()}


def test_three_step_return_matches_hand_computation():
    mem = _memory(3, [0, 1], terminated=None)  # no termination: the segment runs its full length
    # goal 01 from t=0: rewards for achieved 10, 11, 01 are -1, -1, 0
    out = _at(mem, 0)
    assert out["reward"] == pytest.approx(-1 - GAMMA * 1 + GAMMA**2 * 0)
    assert out["discount"] == pytest.approx(GAMMA**3)
    np.testing.assert_array_equal(out["next_obs"], [0, 1])  # obs after step t + 3
    assert not out["terminated"]


def test_segment_stops_at_a_terminal_step():
    mem = _memory(3, [1, 1])
    # goal 11 from t=0: step 0 reaches 10 (-1), step 1 reaches 11 (0, terminal): two steps counted
    out = _at(mem, 0)
    assert out["reward"] == pytest.approx(-1.0)
    assert out["discount"] == pytest.approx(GAMMA**2)
    assert out["terminated"]
    np.testing.assert_array_equal(out["next_obs"], [1, 1])


def test_segment_stops_at_the_episode_end():
    mem = _memory(3, [1, 0], terminated=None)
    # from t=2 only steps 2 and 3 remain (achieved 01 then 00), goal 10: -1, -1
    out = _at(mem, 2)
    assert out["reward"] == pytest.approx(-1 - GAMMA)
    assert out["discount"] == pytest.approx(GAMMA**2)
    np.testing.assert_array_equal(out["next_obs"], [0, 0])


def test_one_step_is_the_plain_transition():
    mem = _memory(1, [1, 1])
    out = _at(mem, 1)
    assert out["reward"] == 0.0 and out["terminated"]
    assert out["discount"] == pytest.approx(GAMMA)
    np.testing.assert_array_equal(out["next_obs"], [1, 1])


def test_sampled_n_step_rewards_are_recomputed_for_relabelled_goals():
    """Random episodes, future relabelling: every sampled n-step return equals the discounted sum of
    compute_reward along the stored segment, cut where the env's rule first says terminal."""
    rng = np.random.default_rng(0)
    E, T, n, m = 40, 10, 6, 4
    mem = memory_for(50, T, n + 2, n, compute_terminated=reached, dtype=np.int8, seed=0, strategy="future", k=4,
                     n_step=m, gamma=GAMMA)
    ag = rng.integers(0, 2, size=(E, T + 1, n), dtype=np.int8)
    # each obs ends with its (episode, step), so a sampled transition tells where it was drawn from
    where = np.stack(np.meshgrid(np.arange(E), np.arange(T + 1), indexing="ij"), axis=-1).astype(np.int8)
    obs = np.concatenate([ag, where], axis=-1)
    desired, length = rng.integers(0, 2, size=(E, n), dtype=np.int8), rng.integers(1, T + 1, size=E)
    mem.remember(obs=obs, achieved_goal=ag, desired_goal=desired, action=rng.integers(0, n, size=(E, T)),
                 length=length)
    out = mem.sample(500, rng)
    ep, t = out["obs"][:, n].astype(np.int64), out["obs"][:, n + 1].astype(np.int64)
    assert np.all(out["obs"] == obs[ep, t])
    assert np.any(out["goal"] != desired[ep], axis=1).mean() > 0.6  # most goals were relabelled
    for i in range(len(ep)):
        L = length[ep[i]]
        total, steps, done = 0.0, 0, False
        while steps < m and t[i] + steps < L and not done:
            r = compute_reward(ag[ep[i], t[i] + steps + 1], out["goal"][i])
            total += GAMMA**steps * r
            done = r == 0.0
            steps += 1
        assert out["reward"][i] == pytest.approx(total, abs=1e-5)
        assert out["discount"][i] == pytest.approx(GAMMA**steps)
        assert out["terminated"][i] == done
        np.testing.assert_array_equal(out["next_obs"][i], obs[ep[i], t[i] + steps])
    assert 0 < out["terminated"].mean() < 1 and (out["discount"] < GAMMA**1.5).any()  # cut and long segments


def test_n_step_needs_gamma_and_a_positive_integer():
    with pytest.raises(ValueError, match="gamma"):
        HindsightSettings(n_step=3)
    with pytest.raises(ValueError, match="n_step"):
        HindsightSettings(n_step=0, gamma=0.9)


def test_updates_per_step_follows_the_steps_collected():
    assert updates_for_cycle(40, None, 320) == 40
    assert updates_for_cycle(40, 0.25, 320) == 80
    assert updates_for_cycle(40, 0.25, 2) == 1  # never zero updates in a cycle


def test_her_dqn_runs_the_n_step_target_and_update_ratio():
    from her_rl.algos.her_dqn import HerDQN

    agent = HerDQN({"name": "bitflip", "id": "her_rl/BitFlip-v0", "kwargs": {"n": 6}}, seed=0, n_step=3,
                   updates_per_step=0.25, episodes_per_cycle=4, batch_size=16)
    result = agent.train_iteration()
    assert agent.updates == max(1, round(0.25 * result.env_steps))
    b = agent.memory.sample(64, agent.np_generator)
    allowed = np.array([0.98**s for s in (1, 2, 3)])
    assert np.isclose(b["discount"][:, None], allowed[None, :]).any(axis=1).all()
    assert (b["discount"] < 0.97).any()  # some transitions do carry more than one step
    assert torch.isfinite(torch.as_tensor(agent.learn()["losses/td_loss"]))


def test_eval_every_env_steps_evaluates_once_per_multiple_crossed(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from her_rl.config.compose import compose
    from her_rl.run.runner import run

    cfg = compose(["n=6", "seed=0", "progress=false", "eval.every_env_steps=250", "budget.env_steps=1500",
                   "eval.stop_when_solved=false", "eval.episodes=10", "checkpoint.every_s=1000"])
    res = run(cfg, out_dir=tmp_path)
    acc = EventAccumulator(str(tmp_path / "tb"), size_guidance={"scalars": 0})
    acc.Reload()
    steps = [e.step for e in acc.Scalars("eval/success_rate")]
    # a cycle here is at most 16 x 6 = 96 steps < 250: one evaluation right after each multiple
    assert sorted(set(s // 250 for s in steps)) == list(range(1, res["env_steps"] // 250 + 1))
    assert steps == sorted(steps) and all(s % 250 < 96 for s in steps[:-1])
    # exactly one evaluation per multiple crossed (the final one may share the last multiple's bucket)
    assert [s // 250 for s in steps[:-1]] == list(range(1, len(steps)))
    assert steps[-1] == res["env_steps"]  # the run ends with an evaluation


def test_an_explicit_tuned_file_replaces_the_automatic_one():
    from her_rl.config.compose import compose

    auto = compose(["n=20"]).algo
    small = compose(["n=20", "tuned=her_dqn_bitflip_small_n"]).algo
    off = compose(["n=20", "~tuned"]).algo
    assert (auto.network, auto.lr, auto.updates_per_step) == ("mlp", 0.003, 0.2)  # the tuned file's n <= 30 row
    assert (small.lr, small.updates_per_step, small.episodes_per_cycle) == (0.002, 0.25, 4)
    assert (off.updates_per_step, off.episodes_per_cycle) == (None, None)  # the paper's cycle: 16 episodes up to 50 steps
