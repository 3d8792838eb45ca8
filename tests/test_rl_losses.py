import math

import pytest
import torch

from her_rl.rl import ClipLoss, DiscreteAction, EntropyLoss, NormalPolicyHead, PGLoss, Rewards

torch.set_num_threads(1)


def test_pg_loss_values_and_reduction():
    lp = torch.log(torch.tensor([0.5, 0.25]))
    ret = torch.tensor([2.0, 4.0])
    expected_sum = -(math.log(0.5) * 2 + math.log(0.25) * 4)
    assert PGLoss()(lp, ret).item() == pytest.approx(expected_sum / 2)
    assert PGLoss("sum")(lp, ret).item() == pytest.approx(expected_sum)
    with pytest.raises(ValueError):
        PGLoss("max")


def test_pg_loss_accepts_action_and_rewards_and_detaches_returns():
    logits = torch.zeros(3, 2, requires_grad=True)
    act = DiscreteAction(logits=logits, idx=[0, 1, 0])
    ret = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    loss = PGLoss()(act, ret)
    assert loss.item() == pytest.approx(math.log(2) * 2.0)
    loss.backward()
    assert logits.grad is not None and ret.grad is None
    rw = Rewards([1.0, 1.0, 1.0])  # reward-to-go with gamma=1: 3, 2, 1
    assert PGLoss()(act.log_prob, rw).item() == pytest.approx(math.log(2) * 2.0)


@pytest.mark.parametrize(
    "ratio, adv, expected, clipped",
    [
        (1.1, 1.0, 1.1, False),   # inside the range
        (1.5, 1.0, 1.2, True),    # above 1+eps with A>0: clipped
        (1.5, -1.0, -1.5, False),  # above 1+eps with A<0: pessimistic unclipped term
        (0.5, -1.0, -0.8, True),  # below 1-eps with A<0: clipped
        (0.5, 1.0, 0.5, False),   # below 1-eps with A>0: unclipped
    ],
)
def test_clip_loss_cases(ratio, adv, expected, clipped):
    lp = torch.tensor([math.log(ratio)], requires_grad=True)
    loss = ClipLoss(0.2)(lp, torch.zeros(1), torch.tensor([adv]))
    assert loss.item() == pytest.approx(-expected, rel=1e-6)
    loss.backward()
    if clipped:
        assert lp.grad.item() == 0.0
    else:  # d/dlp of -(r A) = -r A
        assert lp.grad.item() == pytest.approx(-ratio * adv, rel=1e-6)


def test_clip_loss_eps_override_and_mean():
    lp = torch.log(torch.tensor([1.5, 1.0]))
    old = torch.zeros(2)
    adv = torch.tensor([1.0, 2.0])
    assert ClipLoss(0.2)(lp, old, adv).item() == pytest.approx(-(1.2 + 2.0) / 2)
    assert ClipLoss(0.2)(lp, old, adv, eps=0.6).item() == pytest.approx(-(1.5 + 2.0) / 2)


@pytest.mark.parametrize("k", [2, 5])
def test_entropy_loss_uniform(k):
    logits = torch.zeros(3, k)
    assert EntropyLoss()(DiscreteAction(logits=logits)).item() == pytest.approx(-math.log(k), rel=1e-6)
    assert EntropyLoss()(torch.distributions.Categorical(logits=logits)).item() == pytest.approx(-math.log(k))
    assert EntropyLoss()(torch.full((4,), math.log(k))).item() == pytest.approx(-math.log(k))


def test_entropy_loss_deterministic_and_gaussian():
    assert EntropyLoss()(DiscreteAction(probs=torch.tensor([[1.0, 0.0, 0.0]]))).item() == pytest.approx(0.0)
    head = NormalPolicyHead(3, 2, log_std_init=math.log(0.5))
    act = head(torch.zeros(4, 3))
    expected = 2 * 0.5 * math.log(2 * math.pi * math.e * 0.25)
    assert EntropyLoss()(act).item() == pytest.approx(-expected, rel=1e-5)
