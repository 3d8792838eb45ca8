"""HER-CrossQ: batch renormalisation as defined, one joint critic pass of current and next
state-actions, no target networks, a delayed actor, and an agent that learns a small push."""

import pytest
import torch

from her_rl.algos.her_crossq import HerCrossQ
from her_rl.errors import ConfigError
from her_rl.rl.batch_renorm import BatchRenorm, RenormCritic
from her_rl.config.compose import compose
from her_rl.run.runner import run

PUSH = {"name": "push", "id": "her_rl/Push-v0", "kwargs": {"actions": "continuous", "max_episode_steps": 10}}


def _agent(**kwargs):
    torch.manual_seed(0)
    return HerCrossQ(env=PUSH, seed=0, **{"hidden": (16, 16), "episodes_per_cycle": 4, "updates_per_cycle": 3,
                                          "batch_size": 8, **kwargs})


def test_batch_renorm_is_batch_norm_during_warmup_and_running_statistics_at_inference():
    torch.manual_seed(0)
    layer, x = BatchRenorm(3, momentum=0.1, warmup=10), torch.randn(64, 3) * 2 + 1
    reference = torch.nn.functional.batch_norm(x, None, None, training=True, eps=layer.eps)
    torch.testing.assert_close(layer(x), reference)
    torch.testing.assert_close(layer.running_mean, 0.1 * x.mean(0))
    torch.testing.assert_close(layer.running_var, 0.9 + 0.1 * x.var(0, unbiased=False))
    layer.eval()
    expected = (x - layer.running_mean) / torch.sqrt(layer.running_var + layer.eps)
    torch.testing.assert_close(layer(x), expected)


def test_batch_renorm_corrects_towards_the_running_statistics_without_gradient_through_r_and_d():
    torch.manual_seed(0)
    layer = BatchRenorm(4, momentum=0.5, warmup=0, r_max=1.5, d_max=0.5)
    layer.running_mean.fill_(0.3)
    layer.running_var.fill_(4.0)
    x = (torch.randn(32, 4) * 0.5 - 1).requires_grad_(True)
    out = layer(x)
    with torch.no_grad():
        mean, std = x.mean(0), torch.sqrt(x.var(0, unbiased=False) + layer.eps)
        running_std = torch.sqrt(torch.tensor(4.0) + layer.eps)
        r = (std / running_std).clamp(1 / 1.5, 1.5)
        d = ((mean - 0.3) / running_std).clamp(-0.5, 0.5)
    torch.testing.assert_close(out, (x - mean) / std * r + d)
    # the gradient is the batch-norm gradient scaled by r: r and d are constants of the backward pass
    weights = torch.randn(32, 4)
    (grad,) = torch.autograd.grad((out * weights).sum(), x)
    x2 = x.detach().clone().requires_grad_(True)
    plain = (x2 - x2.mean(0)) / torch.sqrt(x2.var(0, unbiased=False) + layer.eps)
    (grad_plain,) = torch.autograd.grad((plain * r * weights).sum(), x2)
    torch.testing.assert_close(grad, grad_plain)


def _autograd_renorm(layer, x, r=None, d=None):
    """The layer's formula through autograd alone, for the written-out backward to be checked against."""
    if not layer.training:
        return (x - layer.running_mean) / torch.sqrt(layer.running_var + layer.eps) * layer.weight + layer.bias
    x_hat = (x - x.mean(0)) / torch.sqrt(x.var(0, unbiased=False) + layer.eps)
    if r is not None:
        x_hat = x_hat * r + d
    return x_hat * layer.weight + layer.bias


@pytest.mark.parametrize("phase", ["warmup", "renorm", "inference"])
def test_batch_renorm_values_and_gradients_equal_autograd_of_its_formula(phase):
    torch.manual_seed(1)
    layer = BatchRenorm(5, momentum=0.2, warmup=0 if phase == "renorm" else 10, r_max=1.5, d_max=0.5)
    with torch.no_grad():
        layer.weight.uniform_(0.5, 2.0), layer.bias.uniform_(-1, 1)
        layer.running_mean.fill_(0.3), layer.running_var.fill_(4.0)
    layer.train(phase != "inference")
    x = (torch.randn(48, 5) * 0.7 - 0.4).requires_grad_(True)
    r = d = None
    if phase == "renorm":
        with torch.no_grad():
            running_std = torch.sqrt(torch.tensor(4.0) + layer.eps)
            r = (torch.sqrt(x.var(0, unbiased=False) + layer.eps) / running_std).clamp(1 / 1.5, 1.5)
            d = ((x.mean(0) - 0.3) / running_std).clamp(-0.5, 0.5)
        assert not torch.allclose(r, torch.ones(5))  # the correction is in play
    weights = torch.randn(48, 5)
    expected = _autograd_renorm(layer, x, r, d)
    expected_grads = torch.autograd.grad((expected * weights).sum(), (x, layer.weight, layer.bias))
    out = layer(x)
    grads = torch.autograd.grad((out * weights).sum(), (x, layer.weight, layer.bias))
    torch.testing.assert_close(out, expected)
    for grad, expected_grad in zip(grads, expected_grads):
        torch.testing.assert_close(grad, expected_grad)
    assert int(layer.steps) == (0 if phase == "inference" else 1)


def test_crossq_has_no_targets_and_one_joint_critic_pass_per_update():
    agent = _agent()
    assert agent.TARGETS == {} and not hasattr(agent, "q1_target")
    assert isinstance(agent.q1, RenormCritic) and agent.critic_optimizer.defaults["betas"] == (0.5, 0.999)
    agent.train_iteration()
    calls = []

    def record(module, args):
        calls.append((len(args[0]), module.training))
    hooks = [agent.q1.register_forward_pre_hook(record), agent.q2.register_forward_pre_hook(record)]
    agent.updates = 0  # an update with an actor step
    agent.learn()
    for hook in hooks:
        hook.remove()
    batch = agent.batch_size
    assert calls[:2] == [(2 * batch, True), (2 * batch, True)]  # current and next together, batch statistics
    assert calls[2:] == [(batch, False), (batch, False)]  # the actor's step: running statistics
    assert agent.q1.training and agent.q2.training


def test_the_actor_steps_every_policy_delay_updates():
    agent = _agent(policy_delay=3)
    agent.train_iteration()
    agent.updates = 0
    changed = []
    for _ in range(6):
        before = [p.clone() for p in agent.actor.parameters()]
        metrics = agent.learn()
        changed.append(any(not torch.equal(a, b) for a, b in zip(before, agent.actor.parameters())))
        assert ("losses/actor_loss" in metrics) == changed[-1]
    assert changed == [True, False, False, True, False, False]


@pytest.mark.parametrize("bad, message", [
    ({"policy_delay": 0}, "algo.policy_delay must be an integer in [1, 1000]"),
    ({"adam_beta1": 1.0}, "algo.adam_beta1 must be a number in [0, 1)"),
    ({"renorm_momentum": 0.0}, "algo.renorm_momentum must be a number in (0, 1]"),
])
def test_bad_crossq_keys_are_refused(bad, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
        _agent(**bad)


def test_her_crossq_learns_a_small_continuous_push(tmp_path):
    cfg = compose(["algo=her_crossq", "env=push", "env.kwargs.actions=continuous", "env.kwargs.block_size=0.2",
                   "env.kwargs.step_size=0.1", "env.kwargs.success_distance=0.1", "env.kwargs.gripper_range=0.15",
                   "env.kwargs.goal_range=0.15", "env.kwargs.max_episode_steps=15", "algo.hidden=[64,64]",
                   "algo.batch_size=128", "algo.episodes_per_cycle=4", "algo.updates_per_step=0.5",
                   "algo.renorm_warmup=1000", "eval.every_iterations=5", "eval.success_threshold=0.9",
                   "budget.env_steps=30000", "progress=false", "seed=0"])
    results = run(cfg, out_dir=tmp_path)
    assert results["solved"] and results["eval_success_rate"] >= 0.9, results
