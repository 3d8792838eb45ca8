import numpy as np
import pytest
import torch

from her_rl.rl import RND

torch.set_num_threads(1)


def _make(**kw):
    return RND(6, hidden=(64, 64), embed_dim=16, lr=1e-3, seed=0, **kw)


def test_reward_lower_on_learned_inputs():
    rng = np.random.default_rng(0)
    rnd = _make()
    familiar = rng.normal(size=(512, 6)).astype(np.float32) * 0.3
    novel = familiar + np.float32(2.0)
    rnd.update_obs_stats(np.concatenate([familiar, novel]))  # whitening knows both regions
    before = rnd.intrinsic_reward(familiar).mean().item()
    target0 = [p.clone() for p in rnd.target.parameters()]
    rnd.remember(familiar)
    losses = [rnd.learn(n_epochs=1, chunk_size=128) for _ in range(40)]
    assert losses[-1] < 0.5 * losses[0]
    r_fam = rnd.intrinsic_reward(familiar)
    r_nov = rnd.intrinsic_reward(novel)
    assert r_fam.shape == (512,) and not r_fam.requires_grad
    assert r_fam.mean().item() < 0.5 * before
    assert r_nov.mean().item() > 3 * r_fam.mean().item()
    for p, p0 in zip(rnd.target.parameters(), target0):  # the target is frozen
        assert torch.equal(p, p0) and not p.requires_grad


def test_predictor_loss_targets_frozen_net():
    rnd = _make()
    x = torch.randn(32, 6)
    loss = rnd.predictor_loss(x)
    z = rnd.whiten(x)
    expected = (rnd.predictor(z) - rnd.target(z)).pow(2).mean()
    assert loss.item() == pytest.approx(expected.item(), rel=1e-5)
    loss.backward()
    assert all(p.grad is None for p in rnd.target.parameters())
    assert all(p.grad is not None for p in rnd.predictor.parameters())
    assert rnd.predictor_loss(x, fraction=0.25).item() > 0


def test_whitening_clipped():
    rnd = _make()
    rnd.update_obs_stats(np.random.default_rng(0).normal(size=(1000, 6)))
    assert rnd.whiten(torch.full((2, 6), 100.0)).max().item() == pytest.approx(5.0)


def test_normalize_rewards_uses_running_discounted_return():
    rnd = RND(2, hidden=(8,), embed_dim=4, gamma_int=0.5, seed=0)
    out = rnd.normalize_rewards(torch.ones(2, 1))  # returns 1, 1.5 -> std 0.25
    torch.testing.assert_close(out, torch.full((2, 1), 4.0), rtol=1e-3, atol=1e-3)
    rnd.normalize_rewards(torch.ones(1, 1))  # state carried over: return 1.75, not 1
    assert rnd.ret_rms.mean == pytest.approx((1 + 1.5 + 1.75) / 3, rel=1e-3)
    assert rnd.normalize_rewards(torch.rand(5, 3)).shape == (5, 3)


def test_memory_eviction_input_from_and_state_dict(tmp_path):
    rnd = RND(5, hidden=(8,), embed_dim=4, memory_capacity=10, seed=0)
    x = RND.input_from(torch.randn(25, 3), torch.nn.functional.one_hot(torch.arange(25) % 2, 2).float())
    assert x.shape == (25, 5)
    rnd.remember(x[:4])
    rnd.remember(x[4:])
    assert rnd.memory_size == 10 and rnd.memory.shape == (10, 5)
    rnd.update_obs_stats(x)
    rnd.normalize_rewards(torch.rand(3, 2))
    torch.save(rnd.state_dict(), tmp_path / "rnd.pt")
    other = RND(5, hidden=(8,), embed_dim=4, memory_capacity=10, seed=1)
    other.load_state_dict(torch.load(tmp_path / "rnd.pt", weights_only=True))
    np.testing.assert_allclose(other.obs_rms.mean, rnd.obs_rms.mean)
    torch.testing.assert_close(other.intrinsic_reward(x), rnd.intrinsic_reward(x))
    # the running intrinsic return goes on where it was: the next rewards are scaled alike
    r = torch.rand(4, 2)
    torch.testing.assert_close(other.normalize_rewards(r), rnd.normalize_rewards(r))
    assert other.ret_rms.mean == pytest.approx(rnd.ret_rms.mean)


def test_running_mean_std_parallel_merge_and_types():
    from her_rl.rl import RunningMeanStd

    rng = np.random.default_rng(0)
    data = rng.normal(3.0, 2.0, size=(1000, 2))
    rms = RunningMeanStd(shape=(2,), epsilon=1e-12)
    rms.update(data[:300])
    rms.update(torch.from_numpy(data[300:]))
    np.testing.assert_allclose(rms.mean, data.mean(0), rtol=1e-9)
    np.testing.assert_allclose(rms.var, data.var(0), rtol=1e-9)
    assert rms.count == pytest.approx(1000)
    assert isinstance(rms.normalize(data), np.ndarray)
    t = rms.normalize(torch.from_numpy(data).float(), clip=0.5)
    assert isinstance(t, torch.Tensor) and t.abs().max().item() <= 0.5
    scalar = RunningMeanStd()
    scalar.update([1.0, 2.0, 3.0])
    other = RunningMeanStd()
    other.load_state_dict(scalar.state_dict())
    assert other.std == pytest.approx(np.std([1.0, 2.0, 3.0]), rel=1e-3)


def test_unwhitened_inputs_keep_one_hot_novelty_stable_as_visit_counts_change():
    """With whiten_inputs=False the target embedding of a cell does not move when other cells
    are visited more often; with whitening it does (the drift that revives old novelty)."""
    cells = np.eye(6, dtype=np.float32)
    for whiten, should_move in ((False, False), (True, True)):
        rnd = _make(whiten_inputs=whiten)
        rnd.update_obs_stats(cells[[0, 1, 2]])
        before = rnd.target(rnd.whiten(cells[:1])).clone()
        rnd.update_obs_stats(np.repeat(cells[[3]], 200, axis=0))  # the policy moves to cell 3
        after = rnd.target(rnd.whiten(cells[:1]))
        assert torch.allclose(before, after) != should_move
    # off means the raw input reaches the nets: no centring, no clipping to [-5, 5]
    torch.testing.assert_close(_make(whiten_inputs=False).whiten(cells * 10), torch.from_numpy(cells * 10))


def test_zero_capacity_memory_stores_nothing_and_learn_is_a_no_op():
    rnd = _make(memory_capacity=0)
    rnd.remember(np.ones((10, 6), dtype=np.float32))
    assert rnd.memory_size == 0 and rnd.memory.shape == (0, 6) and rnd.learn() == 0.0
    with pytest.raises(ValueError):
        _make(memory_capacity=-1)


def test_forget_weighs_earlier_data_down_by_the_factor():
    from her_rl.rl import RunningMeanStd

    rng = np.random.default_rng(1)
    a, b = rng.normal(10.0, 3.0, 200), rng.normal(0.0, 1.0, 50)
    rms = RunningMeanStd(epsilon=1e-12)
    rms.update(a)
    rms.forget(0.25)
    rms.update(b)
    w = np.concatenate([np.full(a.size, 0.25), np.ones(b.size)])  # the weighted moments, by hand
    x = np.concatenate([a, b])
    mean = np.sum(w * x) / w.sum()
    assert rms.mean == pytest.approx(mean, rel=1e-9)
    assert rms.var == pytest.approx(np.sum(w * (x - mean) ** 2) / w.sum(), rel=1e-9)
    with pytest.raises(ValueError, match="forget factor"):
        rms.forget(0.0)


def test_decayed_return_std_follows_the_current_reward_scale():
    """All-history normalisation keeps the early large errors in the std, so later small rewards
    come out small; with ret_norm_decay the std follows the recent returns and they come out O(1)."""
    gen = torch.Generator().manual_seed(0)
    early = [torch.rand(8, 4, generator=gen) * 100 for _ in range(5)]
    late = [torch.rand(8, 4, generator=gen) for _ in range(40)]
    outs = {}
    for decay in (1.0, 0.5):
        rnd = RND(2, hidden=(8,), embed_dim=4, gamma_int=0.5, seed=0, ret_norm_decay=decay)
        for r in early + late[:-1]:
            rnd.normalize_rewards(r)
        outs[decay] = rnd.normalize_rewards(late[-1])
    assert outs[1.0].mean() < 0.2  # held down by the early std (~30)
    assert 0.5 < outs[0.5].mean() < 3.0  # recent returns: std ~0.33, mean reward 0.5
    with pytest.raises(ValueError, match="ret_norm_decay"):
        RND(2, ret_norm_decay=1.5)
