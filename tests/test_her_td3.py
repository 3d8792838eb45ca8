"""HER-TD3: twin-minimum targets with clipped smoothing noise, the delayed actor, and learning push."""

import os

import numpy as np
import forked
import pytest
import torch
import torch.nn as nn

from her_rl.algos.her_td3 import HerTD3
from her_rl.errors import ConfigError
from her_rl.config.compose import compose
from her_rl.run.runner import run

PUSH = {"name": "push", "id": "her_rl/Push-v0", "kwargs": {"actions": "continuous", "max_episode_steps": 10}}


def _td3(**kwargs):
    torch.manual_seed(0)
    return HerTD3(env=PUSH, seed=0, **{"hidden": (16, 16), "episodes_per_cycle": 4, "updates_per_cycle": 4,
                                       "batch_size": 8, **kwargs})


class RecordingQ(nn.Module):
    """A stand-in target critic with given values that records the actions it is asked about."""

    def __init__(self, values):
        super().__init__()
        self.values, self.actions = torch.tensor(values), []

    def forward(self, x, a):
        self.actions.append(a.clone())
        return self.values


class FixedActor(nn.Module):
    def __init__(self, actions):
        super().__init__()
        self.actions = torch.tensor(actions)

    def forward(self, x):
        return self.actions


def _batch(agent, n, reward, terminated):
    return {"x": torch.zeros(n, agent.inputs.dim), "x_next": torch.zeros(n, agent.inputs.dim),
            "action": torch.zeros(n, agent.act_dim),
            "reward": torch.tensor(reward), "not_done": 1.0 - torch.tensor(terminated, dtype=torch.float32),
            "discount": torch.full((n,), 0.98)}


def test_target_takes_the_twin_minimum_and_is_clipped_to_the_return_range():
    agent = _td3(target_noise=0.0)
    agent.q1_target, agent.q2_target = RecordingQ([-10.0, -4.0, 5.0, -3.0]), RecordingQ([-8.0, -6.0, 6.0, -1.0])
    t = _batch(agent, 4, [-1.0, -1.0, 0.0, -1.0], [False, False, False, True])
    # min -10 -> -1 - 9.8; min -6 -> -1 - 5.88; min 5 -> 4.9, clipped to 0; terminated: the reward alone
    torch.testing.assert_close(agent.target(t), torch.tensor([-10.8, -6.88, 0.0, -1.0]))
    agent.clip_target = False
    assert agent.target(t)[2].item() == pytest.approx(4.9)


def test_target_actions_are_smoothed_with_clipped_noise_inside_the_action_box():
    agent = _td3(target_noise=2.0, noise_clip=0.5)
    agent.actor_target = FixedActor([[0.0, 0.0], [0.9, -0.9]] * 500)
    agent.q1_target = agent.q2_target = RecordingQ([0.0] * 1000)
    agent.target(_batch(agent, 1000, [0.0] * 1000, [False] * 1000))
    a = agent.q1_target.actions[0]
    centre = a[0::2]  # around 0: noise clipped to +-0.5, and wide noise hits both clips
    assert centre.abs().max() <= 0.5 + 1e-6 and (centre.abs() > 0.499).float().mean() > 0.5
    edge = a[1::2]  # around (0.9, -0.9): the action box clips at +-1
    assert edge[:, 0].max() <= 1.0 and edge[:, 0].min() >= 0.4 - 1e-6 and edge[:, 1].min() >= -1.0
    assert (edge[:, 0] == 1.0).any()
    agent.target_noise = 0.0
    agent.target(_batch(agent, 1000, [0.0] * 1000, [False] * 1000))
    torch.testing.assert_close(agent.q1_target.actions[-1], agent.actor_target.actions)


def test_actor_steps_on_every_policy_delay_th_update_and_critics_on_every_one():
    agent = _td3(policy_delay=3)
    agent.remember(agent.collect())
    changed = []
    for _ in range(6):
        actor, critic = [p.clone() for p in agent.actor.parameters()], [p.clone() for p in agent.q2.parameters()]
        metrics = agent.learn()
        moved = any(not torch.equal(a, b) for a, b in zip(actor, agent.actor.parameters()))
        assert moved == ("losses/actor_loss" in metrics)
        assert any(not torch.equal(a, b) for a, b in zip(critic, agent.q2.parameters()))
        changed.append(moved)
    assert changed == [True, False, False, True, False, False]


def test_a_cycle_reports_the_actor_loss_of_its_actor_steps_only():
    result = _td3(updates_per_cycle=5).train_iteration()
    assert {"losses/qf_loss", "losses/actor_loss", "losses/q_values", "charts/random_eps"} <= set(result.metrics)
    assert all(np.isfinite(v) for v in result.metrics.values())


@pytest.mark.parametrize("bad, message", [
    ({"target_noise": -0.1}, "algo.target_noise must be a finite number >= 0"),
    ({"noise_clip": -1.0}, "algo.noise_clip must be a finite number >= 0"),
    ({"policy_delay": 0}, "algo.policy_delay must be an integer in [1, 1000]"),
    ({"noise": "pink"}, "algo.noise must be one of gaussian, ou"),
])
def test_bad_td3_keys_are_refused(bad, message):
    with pytest.raises(ConfigError) as err:
        _td3(**bad)
    assert message in str(err.value)


def test_her_td3_learns_a_small_continuous_push(tmp_path):
    # measured: solved (>= 0.9) after 15,300 env steps, 10-19 s on a 2-core machine (load 2-3)
    cfg = compose(["algo=her_td3", "env=push", "env.kwargs.actions=continuous", "env.kwargs.block_size=0.2",
                   "env.kwargs.step_size=0.1", "env.kwargs.success_distance=0.1", "env.kwargs.gripper_range=0.15", "env.kwargs.goal_range=0.15", "env.kwargs.max_episode_steps=15",
                   "algo.hidden=[64,64]", "algo.batch_size=128", "algo.episodes_per_cycle=4",
                   "algo.updates_per_cycle=20", "eval.every_iterations=5", "eval.success_threshold=0.9",
                   "budget.env_steps=30000", "progress=false", "seed=0"])
    results = run(cfg, out_dir=tmp_path)
    assert results["solved"] and results["eval_success_rate"] >= 0.9, results


def test_her_td3_runs_from_the_command_line(her_run, tmp_path):
    out = tmp_path / "r"
    p = forked.run([her_run, "algo=her_td3", "env=push", "env.kwargs.actions=continuous", "budget.env_steps=200",
                    "eval.episodes=10", "progress=false", f"hydra.run.dir={out}"], cwd=tmp_path,
                   env={**os.environ, "HYDRA_FULL_ERROR": "0"}, text=True, timeout=180)
    assert p.returncode == 0, p.stderr
    assert "eval success" in p.stdout and (out / "checkpoint.pt").is_file()
