"""HER-DQN learns the bit-flip task, and hindsight makes the difference the paper reports."""

import numpy as np
import pytest

from her_rl.envs.bitflip import compute_reward
from her_rl.errors import ConfigError
from her_rl.config.compose import compose
from her_rl.run.runner import run

BITFLIP = {"name": "bitflip", "id": "her_rl/BitFlip-v0", "kwargs": {"n": 6}}


def _agent(**kwargs):
    from her_rl.algos.her_dqn import HerDQN

    return HerDQN(env=BITFLIP, seed=0, **kwargs)


def test_collected_episodes_stop_at_success_and_are_consistent():
    agent = _agent(episodes_per_cycle=32)
    episodes = agent.collect()
    length, success = episodes["length"], episodes["success"]
    assert ((length >= 1) & (length <= 6)).all()
    last_ag = episodes["achieved_goal"][np.arange(32), length]
    reached = compute_reward(last_ag, episodes["desired_goal"]) == 0
    np.testing.assert_array_equal(reached, success)
    # the action taken at step t is the bit that changed between obs t and t+1
    for e in range(32):
        for t in range(length[e]):
            changed = np.flatnonzero(episodes["obs"][e, t] != episodes["obs"][e, t + 1])
            assert changed.tolist() == [episodes["action"][e, t]]


def test_agent_api_reads_like_the_original():
    agent = _agent()
    obs, _ = agent.envs.reset(seed=0)
    actions = agent.act(obs, explore=False)
    assert actions.shape == (16,) and actions.dtype.kind == "i"
    agent.remember(agent.collect())
    relabelled = agent.hindsight(0)
    np.testing.assert_array_equal(relabelled["reward"], compute_reward(relabelled["next_obs"], relabelled["goal"]))
    metrics = agent.learn()
    assert set(metrics) == {"losses/td_loss", "losses/q_values"}


@pytest.mark.parametrize("bad, message", [
    ({"batch_size": 2000, "buffer_size": 1000}, "larger than"),
    ({"lr": -1.0}, "lr"),
    ({"strategy": "later"}, "algo.strategy must be one of future, final, episode, random, next, next_future, none"),
    ({"precision": "float16"}, "algo.precision must be one of float32, bfloat16"),
])
def test_bad_hyperparameters_raise_config_errors(bad, message):
    with pytest.raises(ConfigError, match=message):
        _agent(**bad)


def test_bfloat16_updates_compute_in_bfloat16_and_keep_float32_parameters():
    import copy

    import torch

    torch.manual_seed(0)
    full = _agent(batch_size=64)
    full.remember(full.collect())
    half = copy.deepcopy(full)
    half.precision = "bfloat16"
    rng_state = full.np_generator.bit_generator.state
    loss_full = full.learn()["losses/td_loss"]
    half.np_generator.bit_generator.state = rng_state  # the same batch on both
    loss_half = half.learn()["losses/td_loss"]
    assert np.isfinite(loss_half) and loss_half != loss_full  # rounded products, not the float32 path
    assert abs(loss_half - loss_full) < 0.05 * abs(loss_full) + 1e-3
    assert all(p.dtype == torch.float32 for p in half.q.parameters())
    assert all(p.dtype == torch.float32 for group in half.optimizer.state.values() for p in group.values()
               if torch.is_tensor(p) and p.numel() > 1)


@pytest.mark.parametrize("precision", ["float32", "bfloat16"])
def test_her_dqn_solves_8_bits(tmp_path, precision):
    cfg = compose(["n=8", "progress=false", "budget.env_steps=30000", "eval.every_iterations=5",
                   f"algo.precision={precision}"])
    results = run(cfg, out_dir=tmp_path)
    assert results["solved"] and results["eval_success_rate"] >= 0.95, results


def test_without_hindsight_dqn_fails_where_her_succeeds(tmp_path):
    """The paper's gap: at 15 bits plain DQN (strategy=none) almost never sees a reward."""
    common = ["n=15", "progress=false", "budget.env_steps=10000"]
    her = run(compose(common + ["algo.strategy=future"]), out_dir=tmp_path / "her")  # stops once solved
    plain = run(compose(common + ["algo.strategy=none", "eval.stop_when_solved=false"]), out_dir=tmp_path / "none")
    assert her["solved"] and her["eval_success_rate"] >= 0.95, her
    assert plain["eval_success_rate"] <= 0.1 and plain["env_steps"] >= 10000, plain


def test_same_seed_same_result(tmp_path):
    overrides = ["n=6", "progress=false", "budget.env_steps=2000", "eval.stop_when_solved=false", "seed=3"]
    a = run(compose(overrides), out_dir=tmp_path / "a")
    b = run(compose(overrides), out_dir=tmp_path / "b")
    for key in ("env_steps", "episodes", "eval_return", "eval_success_rate"):
        assert a[key] == b[key]


def test_resume_refuses_a_different_experiment(tmp_path):
    run(compose(["n=4", "progress=false", "budget.env_steps=300"]), out_dir=tmp_path)
    with pytest.raises(ConfigError, match="cannot resume: the checkpoint was trained with n=4"):
        run(compose(["n=5", "progress=false", "budget.env_steps=600", "resume=true"]), out_dir=tmp_path)
