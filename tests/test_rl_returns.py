import numpy as np
import pytest
import torch

from her_rl.rl import Rewards, discounted_returns, gae

torch.set_num_threads(1)


def test_discounted_returns_simple():
    out = discounted_returns(np.array([1.0, 1.0, 1.0]), 0.5)
    assert isinstance(out, np.ndarray)
    np.testing.assert_allclose(out, [1.75, 1.5, 1.0])


def test_discounted_returns_done_boundary():
    # done after step 1: step 0 sees only step 1, steps 2..3 form a new episode.
    out = discounted_returns(torch.tensor([1.0, 2.0, 3.0, 4.0]), 0.5, dones=torch.tensor([0, 1, 0, 0]))
    assert isinstance(out, torch.Tensor)
    torch.testing.assert_close(out, torch.tensor([2.0, 2.0, 5.0, 4.0]))


def test_discounted_returns_two_envs():
    r = np.array([[1.0, 1.0], [1.0, 1.0], [1.0, 1.0]])
    d = np.array([[False, True], [False, False], [False, False]])
    out = discounted_returns(r, 0.5, dones=d)
    np.testing.assert_allclose(out[:, 0], [1.75, 1.5, 1.0])
    np.testing.assert_allclose(out[:, 1], [1.0, 1.5, 1.0])


def test_discounted_returns_normalize():
    out = discounted_returns(torch.arange(10.0), 0.9, normalize=True)
    assert abs(out.mean().item()) < 1e-5
    assert out.std().item() == pytest.approx(1.0, abs=1e-4)


def test_rewards_container():
    rw = Rewards()
    for r in (1.0, 2.0, 3.0):
        rw.append(r)
    rw.append(4.0, done=True)
    rw.append(5.0)
    assert len(rw) == 5 and rw.sum() == 15.0
    assert isinstance(rw[1:3], Rewards) and rw[1:3].sum() == 5.0 and rw[0] == 1.0
    g = rw.discounted(1.0)
    torch.testing.assert_close(g, torch.tensor([10.0, 9.0, 7.0, 4.0, 5.0]))
    n = rw.discounted(0.5, normalize=True)
    assert abs(n.mean().item()) < 1e-5


def _hand_batch():
    # env 0 terminates at t=2; env 1 is truncated after t=1 (V(final obs)=5), new episode at t=2.
    r = torch.tensor([[1.0, 1.0], [0.0, 1.0], [2.0, 1.0]])
    v = torch.tensor([[0.5, 1.0], [0.4, 2.0], [0.3, 3.0]])
    nv = torch.tensor([[0.4, 2.0], [0.3, 5.0], [0.9, 4.0]])
    term = torch.tensor([[0, 0], [0, 0], [1, 0]], dtype=torch.bool)
    trunc = torch.tensor([[0, 0], [0, 1], [0, 0]], dtype=torch.bool)
    return r, v, nv, term, term | trunc


def test_gae_hand_computed():
    r, v, nv, term, dones = _hand_batch()
    adv, ret = gae(r, v, nv, term, dones, gamma=0.9, lam=0.8)
    expected = torch.tensor([[1.64768, 4.32], [1.094, 3.5], [1.7, 1.6]])
    torch.testing.assert_close(adv, expected)
    torch.testing.assert_close(ret, expected + v)


def test_gae_lambda_one_is_bootstrapped_mc_and_lambda_zero_is_td():
    r, v, nv, term, dones = _hand_batch()
    _, ret = gae(r.numpy(), v.numpy(), nv.numpy(), term.numpy(), dones.numpy(), gamma=0.9, lam=1.0)
    # MC return; bootstrapped from V(final obs) at the truncation and at the rollout end, not at termination.
    torch.testing.assert_close(ret, torch.tensor([[2.62, 5.95], [1.8, 5.5], [2.0, 4.6]]))
    adv0, _ = gae(r, v, nv, term, dones, gamma=0.9, lam=0.0)
    torch.testing.assert_close(adv0, r + 0.9 * (~term).float() * nv - v)


def _brute_lambda_return(r, nv, term, dones, gamma, lam):
    """Weighted average of n-step returns, truncated at the episode/rollout end."""
    T, N = r.shape
    out = np.zeros((T, N))
    for i in range(N):
        for t in range(T):
            end = t
            while end < T - 1 and not dones[end, i]:
                end += 1
            L = end - t + 1
            g_n = []
            for n in range(1, L + 1):
                j = t + n - 1
                g = sum(gamma**k * r[t + k, i] for k in range(n))
                g += gamma**n * (1 - term[j, i]) * nv[j, i]
                g_n.append(g)
            lr = sum((1 - lam) * lam ** (n - 1) * g_n[n - 1] for n in range(1, L))
            out[t, i] = lr + lam ** (L - 1) * g_n[L - 1]
    return out


def test_gae_matches_brute_force_lambda_return():
    rng = np.random.default_rng(0)
    T, N = 12, 4
    r = rng.normal(size=(T, N))
    v = rng.normal(size=(T, N))
    nv = rng.normal(size=(T, N))
    term = rng.random((T, N)) < 0.15
    trunc = (rng.random((T, N)) < 0.15) & ~term
    dones = term | trunc
    # Within an episode the next observation of step t IS the observation of step t+1.
    nv[:-1] = np.where(dones[:-1], nv[:-1], v[1:])
    _, ret = gae(r, v, nv, term, dones, gamma=0.95, lam=0.7)
    expected = _brute_lambda_return(r, nv, term.astype(float), dones, 0.95, 0.7)
    np.testing.assert_allclose(ret.numpy(), expected, rtol=1e-4, atol=1e-4)


def test_rewards_container_vector_envs():
    rw = Rewards()
    rw.append(np.array([1.0, 1.0]), done=np.array([False, True]))
    rw.append(torch.tensor([1.0, 1.0]))
    g = rw.discounted(0.5)
    torch.testing.assert_close(g, torch.tensor([[1.5, 1.0], [1.0, 1.0]]))
    assert rw.sum() == 4.0
