import numpy as np
import pytest
import torch

from her_rl.rl import ReplayBuffer

SPEC = {"obs": {"observation": ((3,), np.int8), "desired_goal": ((3,), np.int8)},
        "action": ((), np.int64), "reward": ((), np.float32)}


def _batch(start, n):
    i = np.arange(start, start + n)
    return dict(obs={"observation": np.tile(i[:, None], (1, 3)).astype(np.int8),
                     "desired_goal": -np.tile(i[:, None], (1, 3)).astype(np.int8)},
                action=i, reward=i.astype(np.float32) / 2)


def test_add_and_get_nested():
    buf = ReplayBuffer(10, SPEC)
    buf.add(**_batch(0, 4))
    assert len(buf) == 4 and buf.pos == 4 and not buf.full
    got = buf.get(np.array([1, 3]))
    assert got["action"].tolist() == [1, 3]
    assert got["obs"]["desired_goal"][1].tolist() == [-3, -3, -3]
    assert got["obs"]["observation"].dtype == np.int8 and got["reward"].dtype == np.float32


def test_wraparound_and_oversized_batch():
    buf = ReplayBuffer(5, SPEC)
    buf.add(**_batch(0, 3))
    buf.add(**_batch(3, 4))  # items 5, 6 wrap to slots 0, 1
    assert buf.full and len(buf) == 5 and buf.pos == 2
    assert buf.data["action"].tolist() == [5, 6, 2, 3, 4]
    buf.add(**_batch(100, 12))  # B > capacity: only the last 5 survive, at their ring slots
    assert buf.pos == (2 + 12) % 5 and len(buf) == 5
    assert sorted(buf.data["action"].tolist()) == [107, 108, 109, 110, 111]
    assert buf.data["action"][(buf.pos - 1) % 5] == 111


def test_sample_only_stored_items():
    buf = ReplayBuffer(100, SPEC)
    buf.add(**_batch(0, 7))
    s = buf.sample(500, np.random.default_rng(0))
    assert s["action"].shape == (500,) and set(s["action"].tolist()) == set(range(7))
    np.testing.assert_array_equal(s["obs"]["observation"][:, 0], s["action"])
    with pytest.raises(ValueError):
        ReplayBuffer(3, SPEC).sample(1, np.random.default_rng(0))


def test_bad_fields_raise():
    buf = ReplayBuffer(5, SPEC)
    b = _batch(0, 2)
    with pytest.raises(KeyError):
        buf.add(obs=b["obs"], action=b["action"])
    b["reward"] = np.zeros((3,), np.float32)
    with pytest.raises(ValueError):
        buf.add(**b)


def test_episode_items():
    T, n = 6, 4
    buf = ReplayBuffer(3, {"obs": ((T + 1, n), np.float32), "actions": ((T,), np.int64)})
    obs = np.random.default_rng(1).normal(size=(2, T + 1, n)).astype(np.float32)
    buf.add(obs=obs, actions=np.arange(2 * T).reshape(2, T))
    np.testing.assert_array_equal(buf.get([1])["obs"][0], obs[1])
    assert buf.sample(4, np.random.default_rng(0))["actions"].shape == (4, T)


def test_save_load_round_trip(tmp_path):
    buf = ReplayBuffer(5, SPEC)
    buf.add(**_batch(0, 7))  # wrapped
    buf.save(tmp_path / "buf")  # np.savez appends .npz
    other = ReplayBuffer(5, SPEC)
    other.load(tmp_path / "buf")
    assert (other.pos, len(other), other.full) == (buf.pos, len(buf), buf.full)
    for k in ("action", "reward"):
        np.testing.assert_array_equal(other.data[k], buf.data[k])
    np.testing.assert_array_equal(other.data["obs"]["observation"], buf.data["obs"]["observation"])
    part = ReplayBuffer(5, SPEC)
    part.add(**_batch(0, 2))
    part.save(tmp_path / "part.npz")
    fresh = ReplayBuffer(5, SPEC)
    fresh.load(tmp_path / "part.npz")
    assert (fresh.pos, len(fresh)) == (2, 2) and fresh.get([0, 1])["action"].tolist() == [0, 1]
    with pytest.raises(ValueError):
        ReplayBuffer(6, SPEC).load(tmp_path / "part.npz")


def test_state_dict_weights_only(tmp_path):
    buf = ReplayBuffer(5, SPEC)
    buf.add(**_batch(0, 6))
    sd = buf.state_dict()
    buf.add(**_batch(50, 1))  # the snapshot must not alias the live storage
    torch.save(sd, tmp_path / "ckpt.pt")
    loaded = torch.load(tmp_path / "ckpt.pt", weights_only=True)
    other = ReplayBuffer(5, SPEC)
    other.load_state_dict(loaded)
    assert other.pos == 1 and len(other) == 5
    assert other.data["action"].tolist() == [5, 1, 2, 3, 4]
