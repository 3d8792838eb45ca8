import math

import numpy as np
import pytest
import torch

from her_rl.rl import ContinuousAction, DiscreteAction, NormalPolicyHead

torch.set_num_threads(1)


def test_discrete_action_tells_probs_from_logits():
    a = DiscreteAction(torch.tensor([0.25, 0.75]))
    torch.testing.assert_close(a.probs, torch.tensor([[0.25, 0.75]]))
    b = DiscreteAction(torch.tensor([0.0, math.log(3.0)]))  # logits (row sums != 1)
    torch.testing.assert_close(b.probs, torch.tensor([[0.25, 0.75]]))
    c = DiscreteAction(logits=torch.tensor([0.5, 0.5]))  # explicit keyword wins over the guess
    torch.testing.assert_close(c.probs, torch.tensor([[0.5, 0.5]]))
    d = DiscreteAction(np.array([[0.1, 0.9], [1.0, 0.0]]))
    assert d.size() == (2, 2) and d.idx[1].item() == 0


def test_discrete_action_scores_given_indices():
    a = DiscreteAction(probs=torch.tensor([[0.2, 0.8], [0.6, 0.4]]), idx=[1, 0])
    assert a.idx.tolist() == [1, 0] and a.action() == 0 and a.action(0) == 1
    torch.testing.assert_close(a.prob, torch.tensor([0.8, 0.6]))
    torch.testing.assert_close(a.log_prob, torch.log(torch.tensor([0.8, 0.6])))
    torch.testing.assert_close(a.one_hot, torch.tensor([[0.0, 1.0], [1.0, 0.0]]))
    ent = -(0.2 * math.log(0.2) + 0.8 * math.log(0.8))
    assert a.entropy[0].item() == pytest.approx(ent, rel=1e-5)
    torch.testing.assert_close(a.log_prob_of([0, 0]), torch.log(torch.tensor([0.2, 0.6])))
    assert len(a) == 2 and a.size(0) == 2 and a.size(1) == 2 and a.n == 2


def test_discrete_action_samples_follow_probs_and_greedy_takes_the_argmax():
    g = torch.Generator().manual_seed(0)
    a = DiscreteAction(probs=torch.tensor([0.1, 0.9]).expand(4000, 2), generator=g)
    assert a.idx.float().mean().item() == pytest.approx(0.9, abs=0.02)
    assert DiscreteAction(logits=torch.tensor([[0.0, 5.0, 1.0]]), greedy=True).action() == 1


def test_discrete_action_concatenation_and_slicing_keep_the_graph():
    logits = torch.zeros(2, requires_grad=True)
    acc = DiscreteAction([])
    assert len(acc) == 0 and acc.size(0) == 0
    for i in range(3):
        acc += DiscreteAction(logits=logits * (i + 1), idx=[i % 2])
    acc.append(DiscreteAction(logits=logits, idx=[1]))
    acc.push(DiscreteAction(logits=logits, idx=[0]))
    assert len(acc) == 5 and acc.idx.tolist() == [0, 1, 0, 1, 0]
    both = acc + acc
    assert len(both) == 10 and len(acc) == 5  # + is not in place
    part = acc[1:3]
    assert isinstance(part, DiscreteAction) and part.idx.tolist() == [1, 0]
    assert acc[-1].idx.tolist() == [0] and acc[2].action() == 0
    acc.log_prob.sum().backward()
    assert logits.grad is not None


def test_discrete_action_refuses_other_operands_and_mismatched_sizes():
    a = DiscreteAction(logits=torch.zeros(2))
    with pytest.raises(TypeError):
        a + torch.zeros(2)
    with pytest.raises(TypeError):
        a += 1
    with pytest.raises(ValueError):
        a + DiscreteAction(logits=torch.zeros(3))
    with pytest.raises(ValueError):
        DiscreteAction([]).append(a).append(DiscreteAction(logits=torch.zeros(4)))


def test_normal_policy_head_shapes_and_mode():
    head = NormalPolicyHead(5, 3)
    out = head(torch.randn(7, 5))
    assert isinstance(out, ContinuousAction)
    a = out.sample()
    assert a.shape == (7, 3) and out.log_prob(a).shape == (7,) and out.entropy().shape == (7,)
    torch.testing.assert_close(out.mode(), out.mean)
    sd = NormalPolicyHead(5, 3, state_dependent_std=True, squash=True)(torch.randn(7, 5))
    assert sd.sample().abs().max() < 1 and sd.mode().abs().max() < 1


def test_continuous_action_squashed_log_prob_matches_change_of_variables():
    mean, std = torch.tensor([[0.3, -1.0]]), torch.tensor([[0.5, 2.0]])
    act = ContinuousAction(mean, std, squash=True)
    u = torch.tensor([[0.2, -1.5]])
    naive = torch.distributions.Normal(mean, std).log_prob(u).sum(-1) - torch.log(1 - torch.tanh(u) ** 2).sum(-1)
    torch.testing.assert_close(act.log_prob(torch.tanh(u)), naive, rtol=1e-4, atol=1e-4)
    a, lp = act.sample_with_log_prob()
    torch.testing.assert_close(act.log_prob(a), lp, rtol=1e-3, atol=1e-3)


def test_continuous_action_log_prob_of_saturated_samples_stays_finite_and_exact():
    # Pre-tanh samples near 20: tanh rounds to 1, where log(1 - tanh(u)^2) is -inf; the sample's
    # own log-prob must still be the density, log N(u) - log(sech(u)^2) = log N(u) - log 4 + 2u + 2 log1p(e^-2u).
    big = ContinuousAction(torch.tensor([[20.0, -20.0]]), torch.tensor([[0.1, 0.1]]), squash=True)
    a, lp = big.sample_with_log_prob(torch.Generator().manual_seed(0))
    assert a.abs().eq(1.0).all() and torch.isfinite(lp).all()
    u = big.mean + big.std * torch.randn(big.mean.shape, generator=torch.Generator().manual_seed(0))
    sech2 = math.log(4.0) - 2 * u.abs() - 2 * torch.log1p(torch.exp(-2 * u.abs()))
    expected = (torch.distributions.Normal(big.mean, big.std).log_prob(u) - sech2).sum(-1)
    torch.testing.assert_close(lp, expected, rtol=1e-5, atol=1e-4)


def test_continuous_action_squashed_density_integrates_to_one():
    act = ContinuousAction(torch.tensor([[0.4]]), torch.tensor([[0.7]]), squash=True)
    a = torch.linspace(-0.9999, 0.9999, 20001).reshape(-1, 1)
    dens = act.log_prob(a).exp()
    assert torch.trapezoid(dens, a.squeeze(1)).item() == pytest.approx(1.0, abs=2e-3)


def test_discrete_action_minibatch_indexing_with_an_index_tensor():
    a = DiscreteAction(logits=torch.randn(6, 3), idx=[0, 1, 2, 0, 1, 2])
    mb = a[torch.tensor([1, 4, 5])]
    assert mb.idx.tolist() == [1, 1, 2]
    torch.testing.assert_close(mb.log_prob, a.log_prob[[1, 4, 5]])
    torch.testing.assert_close(a.detach().log_prob, a.log_prob)


def test_continuous_action_samples_are_reparameterised_and_reproducible_with_a_generator():
    mean = torch.zeros(64, 2, requires_grad=True)
    std = torch.full((64, 2), 0.5, requires_grad=True)
    act = ContinuousAction(mean, std)
    a1, lp1 = act.sample_with_log_prob(torch.Generator().manual_seed(3))
    a2, lp2 = act.sample_with_log_prob(torch.Generator().manual_seed(3))
    torch.testing.assert_close(a1, a2)
    torch.testing.assert_close(lp1, lp2)
    assert not torch.equal(a1, act.sample_with_log_prob(torch.Generator().manual_seed(4))[0])
    torch.testing.assert_close(lp1, torch.distributions.Normal(mean, std).log_prob(a1).sum(-1))  # unsquashed
    torch.testing.assert_close(act.log_prob(a1), lp1)
    a1.sum().backward()
    assert mean.grad is not None and std.grad is not None and std.grad.abs().sum() > 0


def test_continuous_action_entropy_is_the_gaussian_entropy_summed_over_dims():
    std = torch.tensor([[0.5, 2.0, 1.0]])
    for squash in (False, True):
        act = ContinuousAction(torch.zeros(1, 3), std, squash=squash)
        expected = (0.5 * math.log(2 * math.pi * math.e) + torch.log(std)).sum(-1)
        torch.testing.assert_close(act.entropy(), expected)
    assert "squash=True" in repr(act) and "(1, 3)" in repr(act)


def test_continuous_action_squashed_samples_and_mode_stay_in_bounds():
    act = ContinuousAction(torch.tensor([[3.0, -3.0]]).expand(1000, 2), torch.full((1000, 2), 2.0), squash=True)
    a = act.sample()
    assert a.abs().max() <= 1 and a[:, 0].mean() > 0.5 and a[:, 1].mean() < -0.5
    torch.testing.assert_close(act.mode(), torch.tanh(torch.tensor([[3.0, -3.0]])).expand(1000, 2))


def test_normal_policy_head_clamps_log_std_and_learns_it_per_state_when_asked():
    wide = NormalPolicyHead(4, 2, log_std_init=5.0)(torch.randn(3, 4))
    torch.testing.assert_close(wide.std, torch.full((3, 2), math.exp(2.0)))  # log-std clamped to 2
    narrow = NormalPolicyHead(4, 2, log_std_init=-30.0)(torch.randn(3, 4))
    torch.testing.assert_close(narrow.std, torch.full((3, 2), math.exp(-20.0)))
    head = NormalPolicyHead(4, 2, state_dependent_std=True, log_std_init=-1.0)
    with torch.no_grad():
        head.log_std.weight.fill_(0.1)
    out = head(torch.tensor([[0.0] * 4, [1.0] * 4]))
    torch.testing.assert_close(out.std.log(), torch.tensor([[-1.0, -1.0], [-0.6, -0.6]]))
    assert sum(p.numel() for p in NormalPolicyHead(4, 2).parameters()) == 4 * 2 + 2 + 2


def test_discrete_action_zero_probs_give_finite_entropy_and_are_never_sampled():
    a = DiscreteAction(probs=torch.tensor([0.0, 0.5, 0.5]).expand(500, 3), generator=torch.Generator().manual_seed(0))
    assert (a.idx != 0).all()
    torch.testing.assert_close(a.entropy, torch.full((500,), math.log(2.0)))
    torch.testing.assert_close(a.dist.entropy(), a.entropy)
    assert a.mode().ne(0).all() and a.log_prob_of([0] * 500).lt(-1e30).all()


def test_discrete_action_sums_steps_and_refuses_reads_of_an_empty_one():
    steps = [DiscreteAction(logits=torch.zeros(3), idx=[i]) for i in range(3)]
    total = sum(steps)
    assert isinstance(total, DiscreteAction) and total.idx.tolist() == [0, 1, 2]
    assert (DiscreteAction([]) + steps[1]).idx.tolist() == [1] and (steps[1] + DiscreteAction([])).idx.tolist() == [1]
    assert repr(DiscreteAction([])) == "DiscreteAction([])" and "idx=[0, 1, 2]" in repr(total)
    with pytest.raises(ValueError, match="empty"):
        DiscreteAction([]).log_prob
    with pytest.raises(ValueError, match="idx needs"):
        DiscreteAction(idx=[0])
    with pytest.raises(ValueError, match="only one"):
        DiscreteAction(torch.zeros(2), logits=torch.zeros(2))
    assert total.to("cpu").idx.tolist() == [0, 1, 2]
