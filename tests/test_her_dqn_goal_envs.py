"""HER-DQN beyond bit-flip: everything it needs is read from the env (push, drag, any goal env)."""

import gymnasium as gym
import numpy as np
import pytest
import torch

import her_rl  # noqa: F401  (registers the env ids)
from her_rl.algos.her_dqn import HerDQN
from her_rl.errors import ConfigError

LOOP_ID = "test_her_rl/PushLoop-v0"
if LOOP_ID not in gym.registry:  # a goal env with no batched implementation: make_vec loops over copies
    gym.register(id=LOOP_ID, entry_point="her_rl.envs.push:PushEnv")


def _push(**kwargs):
    return {"name": "push", "id": "her_rl/Push-v0", "kwargs": {"max_episode_steps": 10, **kwargs}}


def test_spaces_dtypes_and_horizon_come_from_the_env():
    agent = HerDQN(env=_push(), seed=0, episodes_per_cycle=4, updates_per_cycle=2, batch_size=8)
    assert agent.horizon == 10 and agent.n_actions == 8
    data = agent.memory.episodes.data
    assert data["obs"].dtype == np.float32 and data["obs"].shape[1:] == (11, 11)
    assert data["achieved_goal"].shape[1:] == (11, 2)
    assert agent.inputs.running and not agent.spec.binary
    result = agent.train_iteration()
    assert result.env_steps == 40 and len(result.episode_successes) == 4
    drag = HerDQN(env={"name": "drag", "id": "her_rl/Drag-v0", "kwargs": {}}, seed=0, episodes_per_cycle=2)
    assert drag.horizon == 50 and drag.n_actions == 10


def test_push_never_terminates_so_relabelled_successes_are_bootstrapped():
    agent = HerDQN(env=_push(), seed=0, episodes_per_cycle=8, strategy="future", k=4)
    agent.remember(agent.collect())
    batch = agent.memory.sample(4000)
    np.testing.assert_array_equal(batch["reward"], agent.envs.compute_reward(batch["next_obs"][:, 2:4], batch["goal"]))
    assert (batch["reward"] == 0).any() and not batch["terminated"].any()
    ended = HerDQN(env=_push(terminate_on_success=True), seed=0, episodes_per_cycle=8)
    ended.remember(ended.collect())
    batch = ended.memory.sample(4000)
    np.testing.assert_array_equal(batch["terminated"], batch["reward"] == 0)


def test_inputs_are_normalised_with_the_running_statistics_of_stored_steps():
    agent = HerDQN(env=_push(), seed=0, episodes_per_cycle=6)
    episodes = agent.collect()
    agent.inputs.update(episodes)
    valid_obs = np.concatenate([episodes["obs"][e, : episodes["length"][e] + 1] for e in range(6)])
    np.testing.assert_allclose(agent.inputs.obs_rms.mean, valid_obs.mean(0), rtol=1e-4, atol=1e-6)
    x = agent.inputs(valid_obs, np.zeros((len(valid_obs), 2), dtype=np.float32))
    assert x.shape == (len(valid_obs), 13) and x.abs().max() <= 5.0
    # gripper x is whitened: mean ~0, std ~1 over the data it was computed on
    assert abs(float(x[:, 0].mean())) < 1e-3 and abs(float(x[:, 0].std()) - 1.0) < 0.05


def test_bits_keep_their_exact_plus_minus_one_scaling():
    agent = HerDQN(env={"name": "bitflip", "id": "her_rl/BitFlip-v0", "kwargs": {"n": 4}}, seed=0)
    assert agent.spec.binary and not agent.inputs.running
    x = agent.inputs(np.array([[0, 1, 1, 0]], dtype=np.int8), np.array([[1, 1, 0, 0]], dtype=np.int8))
    assert torch.equal(x, torch.tensor([[-1.0, 1, 1, -1, 1, 1, -1, -1]]))


def test_any_registered_goal_env_with_discrete_actions_works_through_a_loop_of_copies():
    agent = HerDQN(env={"name": "gym", "id": LOOP_ID, "kwargs": {"max_episode_steps": 5}}, seed=1,
                   episodes_per_cycle=3, updates_per_cycle=1, batch_size=4)
    assert not hasattr(agent.envs, "core")  # gymnasium's synchronous vector env, not our batched one
    result = agent.train_iteration()
    assert result.env_steps == 15 and agent.horizon == 5
    assert len(agent.memory) == 15


@pytest.mark.parametrize("env, message", [
    ({"name": "cartpole", "id": "CartPole-v1", "kwargs": {}}, "needs a goal-conditioned env"),
    ({"name": "push", "id": "her_rl/Push-v0", "kwargs": {"actions": "continuous"}}, "Discrete action spaces only"),
])
def test_envs_it_cannot_act_in_are_refused_with_one_line(env, message):
    with pytest.raises(ConfigError, match=message) as err:
        HerDQN(env=env, seed=0, episodes_per_cycle=2)
    assert "\n" not in str(err.value)


def test_her_dqn_learns_a_small_push_task_in_a_short_run(tmp_path):
    from her_rl.config.compose import compose
    from her_rl.run.runner import run

    small = ["env=push", "env.kwargs.block_size=0.2", "env.kwargs.step_size=0.1", "env.kwargs.success_distance=0.1", "env.kwargs.gripper_range=0.15", "env.kwargs.goal_range=0.15",
             "env.kwargs.max_episode_steps=15", "progress=false", "budget.env_steps=36000",
             "eval.every_iterations=5", "eval.success_threshold=0.8"]
    results = run(compose(small), out_dir=tmp_path)
    assert results["solved"] and results["eval_success_rate"] >= 0.8, results  # seed 0: 0.8 after ~25k steps


def test_her_run_takes_any_registered_goal_env_through_env_gym(tmp_path):
    from her_rl.config.compose import compose
    from her_rl.run.runner import run

    cfg = compose(["env=gym", f"env.id={LOOP_ID}", "+env.kwargs.max_episode_steps=5", "progress=false",
                   "budget.env_steps=200", "algo.episodes_per_cycle=4", "eval.episodes=3"])
    results = run(cfg, out_dir=tmp_path)
    assert results["env_steps"] >= 200 and results["eval_success_rate"] is not None
    assert results["env_id"] == LOOP_ID
