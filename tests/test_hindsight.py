"""The hindsight learner base (her_rl/algos/hindsight.py): what every HER learner gets from it."""

import copy
import io

import numpy as np
import pytest
import torch

from her_rl.algos.her_ddpg import HerDDPG
from her_rl.algos.her_dqn import HerDQN
from her_rl.algos.her_sac import HerSAC
from her_rl.algos.her_crossq import HerCrossQ
from her_rl.algos.her_redq import HerREDQ
from her_rl.algos.her_td3 import HerTD3
from her_rl.algos.cycle import cycle_result
from her_rl.errors import ConfigError
from her_rl.config.registry import ALGOS, accepted_params, target_of
from her_rl.config.checks import algo_rules

BITFLIP = {"name": "bitflip", "id": "her_rl/BitFlip-v0", "kwargs": {"n": 6}}
PUSH = {"name": "push", "id": "her_rl/Push-v0", "kwargs": {"actions": "continuous", "max_episode_steps": 10}}
LEARNERS = {"her_dqn": (HerDQN, BITFLIP), "her_ddpg": (HerDDPG, PUSH), "her_sac": (HerSAC, PUSH),
            "her_td3": (HerTD3, PUSH), "her_redq": (HerREDQ, PUSH), "her_crossq": (HerCrossQ, PUSH)}
WITH_TARGETS = [name for name, (cls, _) in LEARNERS.items() if cls.TARGETS]
SHARED = ("strategy", "k", "random_mix", "hidden", "gamma", "batch_size", "buffer_size", "episodes_per_cycle",
          "updates_per_cycle", "updates_per_step", "n_step", "polyak", "tau", "clip_target", "grad_clip", "normalize",
          "norm_clip", "precision")


def _make(name, **kwargs):
    cls, env = LEARNERS[name]
    torch.manual_seed(0)
    return cls(env=env, seed=0, **{"hidden": (16, 16), "episodes_per_cycle": 4, "updates_per_cycle": 3,
                                   "batch_size": 8, **kwargs})


def _grad_norm(optimizer):
    grads = [p.grad for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
    return float(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads])))


def _optimizers(agent):
    return [getattr(agent, key) for key in agent.STATE if key.endswith("optimizer") and key != "alpha_optimizer"]


def test_every_hindsight_learner_takes_the_shared_keys_and_has_their_rules():
    hindsight = [name for name in ALGOS if target_of(name).startswith("her_rl.algos.her_")]
    assert sorted(hindsight) == sorted(LEARNERS)
    for name in hindsight:
        assert set(SHARED) <= set(accepted_params(name)) and set(SHARED) <= set(algo_rules(name)), name


@pytest.mark.parametrize("name", LEARNERS)
@pytest.mark.parametrize("bad, message", [
    ({"gamma": 1.5}, "algo.gamma=1.5 is not allowed: algo.gamma must be a number in (0, 1]"),
    ({"polyak": -0.1}, "algo.polyak must be a number in [0, 1]"),
    ({"batch_size": 64, "buffer_size": 32}, "larger than algo.buffer_size (32)"),
    ({"n_step": 0}, "algo.n_step must be an integer in [1, 1000]"),
    ({"k": 1.5}, "algo.k must be an integer >= 0"),
])
def test_constructors_refuse_what_the_command_line_refuses_in_the_same_words(name, bad, message):
    with pytest.raises(ConfigError) as err:
        _make(name, **bad)
    assert message in str(err.value)


@pytest.mark.parametrize("name", LEARNERS)
def test_n_step_and_random_mix_reach_the_memory_and_the_target(name):
    agent = _make(name, n_step=3, random_mix=0.5, updates_per_cycle=2)
    settings = agent.memory.settings
    assert (settings.n_step, settings.random_mix, settings.gamma) == (3, 0.5, agent.gamma)
    agent.train_iteration()
    t = agent.tensors(agent.memory.sample(64, agent.np_generator))
    steps = np.round(np.log(t["discount"].numpy()) / np.log(agent.gamma)).astype(int)
    assert set(steps) <= {1, 2, 3} and steps.max() > 1  # some targets bootstrap further on
    assert np.isfinite(agent.learn()["losses/q_values"])


@pytest.mark.parametrize("name", ["her_ddpg", "her_td3"])
def test_continuous_targets_bootstrap_with_the_memory_discount(name):
    """y = r + discount * (1 - d) * Q': one-, two- and three-step discounts, worked out by hand."""
    agent = _make(name, clip_target=False, target_noise=0.0) if name == "her_td3" else _make(name, clip_target=False)
    q_next = torch.tensor([-2.0, -3.0, -4.0])
    for critic in ("critic_target", "q1_target", "q2_target"):
        if hasattr(agent, critic):
            setattr(agent, critic, lambda x, a: q_next)
    t = {"x": torch.zeros(3, agent.inputs.dim), "x_next": torch.zeros(3, agent.inputs.dim),
         "action": torch.zeros(3, agent.act_dim), "reward": torch.tensor([-1.0, -1.5, 0.0]),
         "not_done": torch.tensor([1.0, 1.0, 0.0]), "discount": torch.tensor([0.5, 0.25, 0.125])}
    expected = torch.tensor([-1.0 - 0.5 * 2.0, -1.5 - 0.25 * 3.0, 0.0])
    if name == "her_td3":
        torch.testing.assert_close(agent.target(t), expected)
    else:
        q = agent.critic(t["x"], t["action"]).detach()
        loss = agent.update(t)["losses/qf_loss"]
        assert loss == pytest.approx(float(((q - expected) ** 2).mean()), rel=1e-5)


@pytest.mark.parametrize("name", LEARNERS)
def test_grad_clip_bounds_every_optimiser_step(name):
    for clip in (None, 1e-3):
        agent = _make(name, grad_clip=clip)
        agent.train_iteration()  # the last update's gradients stay on the parameters
        norms = [_grad_norm(opt) for opt in _optimizers(agent)]
        if clip is None:
            assert max(norms) > 1e-2  # what clipping has to bound
        else:
            assert max(norms) <= clip * (1 + 1e-4), norms


@pytest.mark.parametrize("name", LEARNERS)
def test_bfloat16_updates_round_products_and_keep_float32_parameters(name):
    full = _make(name)
    full.remember(full.collect())
    half = copy.deepcopy(full)
    half.precision = "bfloat16"
    state = copy.deepcopy(full.state_dict())
    loss_full = full.learn()
    half.load_state_dict(state)  # the same batch, and for SAC/TD3 the same policy noise
    loss_half = half.learn()
    key = "losses/td_loss" if name == "her_dqn" else "losses/qf_loss"
    assert np.isfinite(loss_half[key]) and loss_half[key] != loss_full[key]
    assert abs(loss_half[key] - loss_full[key]) < 0.1 * abs(loss_full[key]) + 1e-3
    assert all(p.dtype == torch.float32 for key in half.STATE if isinstance(getattr(half, key), torch.nn.Module)
               for p in getattr(half, key).parameters())


@pytest.mark.parametrize("name", LEARNERS)
def test_declared_state_round_trips_and_training_continues_identically(name):
    a = _make(name)
    a.train_iteration()
    buf = io.BytesIO()
    torch.save(a.state_dict(), buf)
    buf.seek(0)
    b = _make(name)
    b.load_state_dict(torch.load(buf, weights_only=True))
    ra, rb = a.train_iteration(), b.train_iteration()
    assert ra.metrics == rb.metrics and ra.episode_returns == rb.episode_returns and a.updates == b.updates
    for key in a.STATE:
        if isinstance(getattr(a, key), torch.nn.Module):
            for pa, pb in zip(getattr(a, key).parameters(), getattr(b, key).parameters()):
                assert torch.equal(pa, pb), key


@pytest.mark.parametrize("name", LEARNERS)
def test_targets_start_as_copies_take_no_gradient_and_move_once_per_cycle(name):
    agent = _make(name, polyak=0.9)
    for net, target in agent.TARGETS.items():
        for p, pt in zip(getattr(agent, net).parameters(), getattr(agent, target).parameters()):
            assert torch.equal(p, pt) and not pt.requires_grad
    before = {t: [p.clone() for p in getattr(agent, t).parameters()] for t in agent.TARGETS.values()}
    agent.train_iteration()
    for net, target in agent.TARGETS.items():
        for old, new, p in zip(before[target], getattr(agent, target).parameters(), getattr(agent, net).parameters()):
            torch.testing.assert_close(new, 0.9 * old + 0.1 * p.detach())


@pytest.mark.parametrize("name", WITH_TARGETS)
def test_tau_moves_the_targets_after_every_gradient_step_and_not_per_cycle(name):
    agent = _make(name, tau=0.25, polyak=0.0)  # polyak=0 would make the targets copies if it still applied
    agent.train_iteration()
    before = {t: [p.clone() for p in getattr(agent, t).parameters()] for t in agent.TARGETS.values()}
    agent.learn()
    for net, target in agent.TARGETS.items():
        for old, new, p in zip(before[target], getattr(agent, target).parameters(), getattr(agent, net).parameters()):
            torch.testing.assert_close(new, 0.75 * old + 0.25 * p.detach())
    moved = [not torch.equal(p, pt) for net, target in agent.TARGETS.items()
             for p, pt in zip(getattr(agent, net).parameters(), getattr(agent, target).parameters())]
    assert any(moved)  # not a copy: the per-cycle step (polyak=0) did not apply


@pytest.mark.parametrize("name", LEARNERS)
def test_inference_builds_networks_only(name):
    agent = _make(name, inference=True)
    assert agent.memory is None and agent.envs is None
    obs = {"observation": np.zeros((2, *agent.spec.obs_shape), agent.spec.obs_dtype),
           "desired_goal": np.zeros((2, *agent.spec.goal_shape), agent.spec.goal_dtype)}
    assert len(agent.act(obs)) == 2


def test_cycle_metrics_average_each_key_over_the_updates_that_report_it():
    episodes = {"length": np.array([3, 2]), "returns": np.array([-3.0, -1.0]), "success": np.array([False, True])}
    result = cycle_result(episodes, [{"a": 1.0, "b": 4.0}, {"a": 3.0}, {"a": 5.0, "b": 6.0}], {"c": 7.0})
    assert result.metrics == {"a": 3.0, "b": 5.0, "c": 7.0}
    assert (result.env_steps, result.episode_successes) == (5, [0.0, 1.0])
