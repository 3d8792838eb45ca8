import numpy as np
import pytest

from her_rl.rl import RewardHistory


def test_running_statistics_window():
    h = RewardHistory(window=3)
    assert len(h) == 0 and np.isnan(h.running_mean)
    for x in (1.0, 2.0, 3.0, 10.0):
        h.append(x)
    assert len(h) == 4
    assert h.running_mean == pytest.approx(5.0)
    assert h.running_std == pytest.approx(np.std([2.0, 3.0, 10.0]))


def test_running_curves_match_brute_force():
    rng = np.random.default_rng(0)
    h = RewardHistory(window=5)
    xs = rng.normal(size=23) * 10
    for x in xs:
        h.append(x)
    mean, std = h.running_curves()
    for i in range(len(xs)):
        w = xs[max(0, i - 4): i + 1]
        assert mean[i] == pytest.approx(w.mean()) and std[i] == pytest.approx(w.std(), abs=1e-6)


def test_plot_writes_png(tmp_path):
    h = RewardHistory(window=10)
    for i in range(50):
        h.append(i + np.sin(i))
    out = tmp_path / "sub" / "curve.png"
    h.plot(out, title="test")
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 1000
