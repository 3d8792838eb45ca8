"""HER-REDQ: the ensemble critic equals independent critics, targets take the minimum of a random
subset and bound the bootstrap, every critic steps, bad keys are refused, and it learns push."""

import numpy as np
import pytest
import torch

from her_rl.algos.her_redq import HerREDQ
from her_rl.errors import ConfigError
from her_rl.rl.nets import Critic, EnsembleCritic
from her_rl.config.compose import compose
from her_rl.run.runner import run

PUSH = {"name": "push", "id": "her_rl/Push-v0", "kwargs": {"actions": "continuous", "max_episode_steps": 10}}


def _redq(**kwargs):
    torch.manual_seed(0)
    return HerREDQ(env=PUSH, seed=0, **{"hidden": (16, 16), "episodes_per_cycle": 4, "updates_per_step": None,
                                        "updates_per_cycle": 4, "batch_size": 8, "ensemble": 4, **kwargs})


@pytest.mark.parametrize("layer_norm", [False, True])
def test_each_ensemble_member_is_the_critic_its_weights_make(layer_norm):
    torch.manual_seed(1)
    ens = EnsembleCritic(3, 5, 2, (8, 8), layer_norm=layer_norm)
    with torch.no_grad():
        for g in ens.gains or []:
            g.normal_()  # members with different layer-norm gains
    x, a = torch.randn(6, 5), torch.randn(6, 2)
    out = ens(x, a)
    assert out.shape == (3, 6)
    for i in range(3):
        single = Critic(5, 2, (8, 8), layer_norm=layer_norm)
        linears = [m for m in single.net if isinstance(m, torch.nn.Linear)]
        norms = [m for m in single.net if isinstance(m, torch.nn.LayerNorm)]
        with torch.no_grad():
            for lin, w, b in zip(linears, ens.weights, ens.biases):
                lin.weight.copy_(w[i].T)
                lin.bias.copy_(b[i, 0])
            for norm, g, s in zip(norms, ens.gains or [], ens.shifts or []):
                norm.weight.copy_(g[i, 0])
                norm.bias.copy_(s[i, 0])
        torch.testing.assert_close(out[i], single(x, a))
    members = torch.tensor([2, 0])
    torch.testing.assert_close(ens(x, a, members=members), out[members])  # only the chosen members are computed


def test_target_is_the_minimum_of_a_random_subset_bounded_to_the_return_range():
    agent = _redq(gamma=0.9, subset=2, autotune=False, alpha_init=1e-8)
    values = torch.tensor([[-1.0, 5.0], [-3.0, 5.0], [-2.0, 5.0], [-20.0, 5.0]])  # member i, sample j
    agent.critics_target.forward = lambda x, a, members=None: values if members is None else values[members]
    t = {"x_next": torch.zeros(2, agent.inputs.dim), "reward": torch.zeros(2), "discount": torch.full((2,), 0.9),
         "not_done": torch.ones(2)}

    def bootstraps():
        ys = [agent.soft_target(t) for _ in range(200)]
        assert all(abs(y[1].item() - 0.9 * min(5.0, 0.0 if agent.clip_target else 5.0)) < 1e-4 for y in ys)
        return {round(y[0].item() / 0.9, 3) for y in ys}

    # pairs of members: min(-1,-3)=-3, min(-1,-2)=-2, and any pair with -20 gives -20, bounded to -1/(1-0.9) = -10
    assert bootstraps() == {-3.0, -2.0, -10.0}  # 5 is bounded to 0 (rewards are -1 or 0 per step)
    agent.clip_target = False
    assert bootstraps() == {-3.0, -2.0, -20.0}


def test_an_update_steps_every_critic_and_the_actor():
    agent = _redq()
    agent.train_iteration()
    before = [p.detach().clone() for p in agent.critics.parameters()]
    actor = [p.detach().clone() for p in agent.actor.parameters()]
    t = agent.tensors(agent.memory.sample(8))
    metrics = agent.update(t)
    after = list(agent.critics.parameters())
    assert all(not torch.equal(b, a) for b, a in zip(before, after))
    for i in range(agent.ensemble):  # each member moved
        assert not torch.equal(before[0][i], after[0][i])
    assert any(not torch.equal(b, a) for b, a in zip(actor, agent.actor.parameters()))
    assert np.isfinite(list(metrics.values())).all()


@pytest.mark.parametrize("bad, message", [
    ({"subset": 5, "ensemble": 4}, "algo.subset=5 is not allowed: it is larger than algo.ensemble (4)"),
    ({"ensemble": 1}, "algo.ensemble must be an integer in [2, 100]"),
    ({"layer_norm": "yes"}, "algo.layer_norm must be true or false"),
])
def test_bad_redq_keys_are_refused(bad, message):
    with pytest.raises(ConfigError) as err:
        _redq(**bad)
    assert message in str(err.value)


def test_her_redq_learns_a_small_continuous_push(tmp_path):
    cfg = compose(["algo=her_redq", "env=push", "env.kwargs.actions=continuous", "env.kwargs.block_size=0.2",
                   "env.kwargs.step_size=0.1", "env.kwargs.success_distance=0.1", "env.kwargs.gripper_range=0.15", "env.kwargs.goal_range=0.15", "env.kwargs.max_episode_steps=15",
                   "algo.hidden=[64,64]", "algo.batch_size=128", "algo.episodes_per_cycle=4", "algo.ensemble=5",
                   "algo.updates_per_step=0.5", "eval.every_iterations=5", "eval.success_threshold=0.9",
                   "budget.env_steps=30000", "progress=false", "seed=0"])
    results = run(cfg, out_dir=tmp_path)
    assert results["solved"] and results["eval_success_rate"] >= 0.9, results
