import numpy as np
import pytest

from her_rl.rl import GaussianNoise, OUNoise


def test_ou_mean_reversion():
    theta, dt = 0.5, 0.05
    ou = OUNoise(4000, theta=theta, sigma=0.2, mu=1.0, dt=dt, seed=0)
    ou.state = np.full(4000, 6.0)  # displaced by 5 from mu
    for _ in range(20):
        x = ou.sample()
    # E[x_k] = mu + 5 (1 - theta dt)^k
    assert x.mean() == pytest.approx(1.0 + 5 * (1 - theta * dt) ** 20, abs=0.02)
    ou.reset()
    np.testing.assert_array_equal(ou.state, np.ones(4000))


def test_ou_stationary_statistics():
    theta, sigma, dt = 0.15, 0.3, 0.1
    ou = OUNoise(5000, theta=theta, sigma=sigma, mu=-0.5, dt=dt, seed=1)
    for _ in range(600):  # 600 * theta * dt = 9 relaxation times
        x = ou.sample()
    # Exact stationary std of the Euler scheme; equals sigma / sqrt(2 theta) as dt -> 0.
    std = sigma * np.sqrt(dt / (1 - (1 - theta * dt) ** 2))
    assert std == pytest.approx(sigma / np.sqrt(2 * theta), rel=0.01)
    assert x.mean() == pytest.approx(-0.5, abs=4 * std / np.sqrt(5000))
    assert x.std() == pytest.approx(std, rel=0.04)


def test_ou_time_average_single_process():
    ou = OUNoise(1, theta=1.0, sigma=0.5, mu=2.0, dt=0.1, seed=2)
    xs = np.array([ou.sample()[0] for _ in range(20000)])
    assert xs.mean() == pytest.approx(2.0, abs=0.05)
    assert xs.std() == pytest.approx(0.5 / np.sqrt(2.0), rel=0.1)


def test_gaussian_noise():
    g = GaussianNoise((3,), sigma=0.3, seed=0)
    xs = np.stack([g.sample() for _ in range(20000)])
    assert xs.shape == (20000, 3)
    assert xs.std() == pytest.approx(0.3, rel=0.03) and abs(xs.mean()) < 0.01
    np.testing.assert_array_equal(GaussianNoise(2, 1.0, seed=5).sample(), GaussianNoise(2, 1.0, seed=5).sample())
