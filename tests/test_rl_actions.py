import math

import numpy as np
import pytest
import torch

from her_rl.rl import ContinuousAction, DiscreteAction, NormalPolicyHead

torch.set_num_threads(1)


def test_detects_probs_vs_logits():
    a = DiscreteAction(torch.tensor([0.25, 0.75]))
    torch.testing.assert_close(a.probs, torch.tensor([[0.25, 0.75]]))
    b = DiscreteAction(torch.tensor([0.0, math.log(3.0)]))  # logits (row sums != 1)
    torch.testing.assert_close(b.probs, torch.tensor([[0.25, 0.75]]))
    c = DiscreteAction(logits=torch.tensor([0.5, 0.5]))  # explicit keyword wins over the guess
    torch.testing.assert_close(c.probs, torch.tensor([[0.5, 0.5]]))
    d = DiscreteAction(np.array([[0.1, 0.9], [1.0, 0.0]]))
    assert d.size() == (2, 2) and d.idx[1].item() == 0


def test_attributes_with_given_idx():
    a = DiscreteAction(probs=torch.tensor([[0.2, 0.8], [0.6, 0.4]]), idx=[1, 0])
    assert a.idx.tolist() == [1, 0] and a.action() == 0 and a.action(0) == 1
    torch.testing.assert_close(a.prob, torch.tensor([0.8, 0.6]))
    torch.testing.assert_close(a.log_prob, torch.log(torch.tensor([0.8, 0.6])))
    torch.testing.assert_close(a.one_hot, torch.tensor([[0.0, 1.0], [1.0, 0.0]]))
    ent = -(0.2 * math.log(0.2) + 0.8 * math.log(0.8))
    assert a.entropy[0].item() == pytest.approx(ent, rel=1e-5)
    torch.testing.assert_close(a.log_prob_of([0, 0]), torch.log(torch.tensor([0.2, 0.6])))
    assert len(a) == 2 and a.size(0) == 2 and a.size(1) == 2 and a.n == 2


def test_sampling_follows_probs():
    g = torch.Generator().manual_seed(0)
    a = DiscreteAction(probs=torch.tensor([0.1, 0.9]).expand(4000, 2), generator=g)
    assert a.idx.float().mean().item() == pytest.approx(0.9, abs=0.02)
    assert DiscreteAction(logits=torch.tensor([[0.0, 5.0, 1.0]]), greedy=True).action() == 1


def test_concatenation_and_slicing_keep_graph():
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


def test_type_and_value_errors():
    a = DiscreteAction(logits=torch.zeros(2))
    with pytest.raises(TypeError):
        a + torch.zeros(2)
    with pytest.raises(TypeError):
        a += 1
    with pytest.raises(ValueError):
        a + DiscreteAction(logits=torch.zeros(3))
    with pytest.raises(ValueError):
        DiscreteAction([]).append(a).append(DiscreteAction(logits=torch.zeros(4)))


def test_normal_head_shapes_and_mode():
    head = NormalPolicyHead(5, 3)
    out = head(torch.randn(7, 5))
    assert isinstance(out, ContinuousAction)
    a = out.sample()
    assert a.shape == (7, 3) and out.log_prob(a).shape == (7,) and out.entropy().shape == (7,)
    torch.testing.assert_close(out.mode(), out.mean)
    sd = NormalPolicyHead(5, 3, state_dependent_std=True, squash=True)(torch.randn(7, 5))
    assert sd.sample().abs().max() < 1 and sd.mode().abs().max() < 1


def test_squashed_log_prob_matches_change_of_variables():
    mean, std = torch.tensor([[0.3, -1.0]]), torch.tensor([[0.5, 2.0]])
    act = ContinuousAction(mean, std, squash=True)
    u = torch.tensor([[0.2, -1.5]])
    naive = torch.distributions.Normal(mean, std).log_prob(u).sum(-1) - torch.log(1 - torch.tanh(u) ** 2).sum(-1)
    torch.testing.assert_close(act.log_prob(torch.tanh(u)), naive, rtol=1e-4, atol=1e-4)
    a, lp = act.sample_with_log_prob()
    torch.testing.assert_close(act.log_prob(a), lp, rtol=1e-3, atol=1e-3)
    # Large pre-tanh values stay finite (the naive formula gives inf here).
    big = ContinuousAction(torch.tensor([[20.0]]), torch.tensor([[1.0]]), squash=True)
    assert torch.isfinite(big._log_prob_pre(torch.tensor([[20.0]]))).all()


def test_squashed_density_integrates_to_one():
    act = ContinuousAction(torch.tensor([[0.4]]), torch.tensor([[0.7]]), squash=True)
    a = torch.linspace(-0.9999, 0.9999, 20001).reshape(-1, 1)
    dens = act.log_prob(a).exp()
    assert torch.trapezoid(dens, a.squeeze(1)).item() == pytest.approx(1.0, abs=2e-3)


def test_minibatch_indexing_with_index_tensor():
    a = DiscreteAction(logits=torch.randn(6, 3), idx=[0, 1, 2, 0, 1, 2])
    mb = a[torch.tensor([1, 4, 5])]
    assert mb.idx.tolist() == [1, 1, 2]
    torch.testing.assert_close(mb.log_prob, a.log_prob[[1, 4, 5]])
    torch.testing.assert_close(a.detach().log_prob, a.log_prob)
