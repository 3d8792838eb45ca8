"""Exact resume of the on-policy learners: a run that crashed after a checkpoint and was resumed
by folder ends with the same weights and results as one that never stopped (PPO and RND-PPO
continue the saved training episodes; REINFORCE replays its seeded ones)."""

import json

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces

from her_rl.folder import checkpoint
from her_rl.run.runner import main

FAST = ["progress=false", "eval.every_iterations=2", "eval.stop_when_solved=false", "eval.episodes=2",
        "checkpoint.every_s=0"]
NOT_COMPARED = ("wall_time_s", "sps", "checkpoint")  # timings, and the folder the run lives in


def crash_in_iteration(monkeypatch, cls, n):
    """``cls``'s n-th training iteration (counted from now) raises, as a crash would."""
    original, calls = cls.train_iteration, []

    def crashing(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == n:
            raise RuntimeError("simulated crash")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(cls, "train_iteration", crashing)


def tensors(state, prefix=""):
    """Every tensor of a nested state dict, by its path."""
    if isinstance(state, torch.Tensor):
        return {prefix: state}
    if isinstance(state, dict):
        items = state.items()
    elif isinstance(state, (list, tuple)):
        items = enumerate(state)
    else:
        return {}
    return {k: v for key, value in items for k, v in tensors(value, f"{prefix}/{key}").items()}


def assert_same_run(a, b):
    ra, rb = (json.loads((d / "results.json").read_text()) for d in (a, b))
    assert {k: v for k, v in ra.items() if k not in NOT_COMPARED} == \
        {k: v for k, v in rb.items() if k not in NOT_COMPARED}
    sa, sb = (tensors(checkpoint.load(d / "checkpoint.pt")["agent"]) for d in (a, b))
    assert sa.keys() == sb.keys() and len(sa) > 4
    different = [k for k in sa if not torch.equal(sa[k], sb[k])]
    assert not different


CASES = [  # (algo class, overrides, budget, iteration that crashes)
    ("her_rl.algos.ppo:PPO", ["algo=ppo", "env=cartpole"], 2048, 5),
    ("her_rl.algos.ppo:PPO", ["algo=ppo", "env=pendulum"], 4096, 3),
    ("her_rl.algos.reinforce:Reinforce", ["algo=reinforce", "env=cartpole"], 1200, 6),
    ("her_rl.algos.reinforce:Reinforce", ["algo=reinforce", "env=cartpole", "algo.baseline=critic"], 800, 4),
    ("her_rl.algos.rnd_ppo:RNDPPO", ["algo=rnd_ppo", "env=deep_sea", "size=8"], 2048, 5),
    ("her_rl.algos.rnd_ppo:RNDPPO", ["algo=rnd_ppo", "env=mountaincar"], 2048, 4),
]


def algo_class(path):
    import importlib

    module, name = path.split(":")
    return getattr(importlib.import_module(module), name)


@pytest.mark.parametrize("cls, overrides, budget, crash_at", CASES, ids=lambda v: " ".join(v) if isinstance(v, list)
                         else None)
def test_crashed_and_resumed_run_ends_as_one_that_never_stopped(tmp_path, monkeypatch, capsys, cls, overrides,
                                                                budget, crash_at):
    args = [*FAST, *overrides, f"budget.env_steps={budget}"]
    main(args, out_dir=tmp_path / "whole")
    crash_in_iteration(monkeypatch, algo_class(cls), crash_at)
    with pytest.raises(RuntimeError, match="simulated crash"):
        main(args, out_dir=tmp_path / "split")
    monkeypatch.undo()
    assert checkpoint.load(tmp_path / "split" / "checkpoint.pt")["runner"]["iteration"] == crash_at - 1
    capsys.readouterr()
    main(["resume=true", "progress=false"], out_dir=tmp_path / "split")
    assert "warning" not in capsys.readouterr().err
    assert_same_run(tmp_path / "whole", tmp_path / "split")


def test_resumed_ppo_continues_the_episodes_it_was_in():
    """A restored learner's first iteration ends CartPole episodes longer than that iteration's own
    steps: they began before the checkpoint, which a restart could not give."""
    from her_rl.algos.ppo import PPO

    cartpole = {"name": "cartpole", "id": "CartPole-v1", "kwargs": {}}
    kw = dict(env=cartpole, num_envs=8, num_steps=8, epochs=1)
    first = PPO(**kw)
    for _ in range(2):
        first.train_iteration()
    saved = first.state_dict()
    assert saved["collector"]["envs"] is not None and int(saved["collector"]["ep_len"].max()) > 0
    resumed = PPO(**kw)
    resumed.load_state_dict(saved)
    a, b = first.train_iteration(), resumed.train_iteration()
    assert a.episode_lengths == b.episode_lengths and max(b.episode_lengths) > 8


class Counter(gym.Env):
    """An env of a module the snapshot does not know: its state cannot be saved."""

    observation_space = spaces.Box(0, 50, shape=(1,), dtype=np.float32)
    action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([0.0], dtype=np.float32), {}

    def step(self, action):
        self.t += 1
        return np.array([self.t], dtype=np.float32), 1.0, False, self.t >= 40, {}


def test_an_env_whose_state_cannot_be_saved_resumes_with_one_warning(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(gym.registry, "test_resume_exact/Counter-v0",
                        gym.envs.registration.EnvSpec("test_resume_exact/Counter-v0", entry_point=Counter))
    args = [*FAST, "algo=ppo", "env=gym", "env.id=test_resume_exact/Counter-v0", "algo.num_envs=2",
            "algo.num_steps=16", "budget.env_steps=256"]
    with monkeypatch.context() as patch:
        crash_in_iteration(patch, algo_class(CASES[0][0]), 3)
        with pytest.raises(RuntimeError):
            main(args, out_dir=tmp_path / "run")
    capsys.readouterr()
    results = main(["resume=true", "progress=false"], out_dir=tmp_path / "run")
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["her-run: warning: the state of env 'test_resume_exact/Counter-v0' cannot be saved: the resumed "
                   "training episodes restart, so this run will not end exactly as one that never stopped"]
    assert results["env_steps"] >= 256


def test_a_checkpoint_without_saved_episodes_still_resumes_and_says_so(tmp_path, monkeypatch, capsys):
    args = [*FAST, "algo=ppo", "env=cartpole", "algo.num_steps=16", "budget.env_steps=512"]
    crash_in_iteration(monkeypatch, algo_class(CASES[0][0]), 3)
    with pytest.raises(RuntimeError):
        main(args, out_dir=tmp_path / "run")
    monkeypatch.undo()
    path = tmp_path / "run" / "checkpoint.pt"
    old = checkpoint.load(path)
    del old["agent"]["collector"]  # as an earlier version wrote it
    checkpoint.save(old, path)
    capsys.readouterr()
    results = main(["resume=true", "progress=false"], out_dir=tmp_path / "run")
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("her-run: warning: the checkpoint holds no training episodes")
    assert results["env_steps"] >= 512


@pytest.mark.parametrize("env_id, kwargs", [
    ("CartPole-v1", {}), ("Pendulum-v1", {}), ("MountainCar-v0", {}), ("Acrobot-v1", {}),
    ("her_rl/DeepSea-v0", {"size": 5}), ("her_rl/BitFlip-v0", {"n": 4}),
    ("her_rl/Push-v0", {"actions": "continuous"}), ("her_rl/Drag-v0", {}),
])
def test_a_restored_env_steps_on_as_the_saved_one(env_id, kwargs):
    """Snapshot mid-episode, save and load it (weights_only), restore into a new env: the same
    actions give the same steps, episode ends and random resets."""
    import io

    from her_rl.envs import make_vec
    from her_rl.envs.state import env_state, restore_env_state

    cfg = {"id": env_id, "kwargs": kwargs}
    saved_env, new_env = make_vec(cfg, 3, seed=1), make_vec(cfg, 3, seed=2)
    saved_env.reset(seed=1)
    new_env.reset(seed=2)
    for _ in range(70):
        saved_env.step(saved_env.action_space.sample())
    buf = io.BytesIO()
    torch.save(env_state(saved_env), buf)
    buf.seek(0)
    restore_env_state(new_env, torch.load(buf, weights_only=True))
    for _ in range(300):
        actions = saved_env.action_space.sample()
        a, b = saved_env.step(actions), new_env.step(actions)
        for x, y in zip(a[:4], b[:4]):
            for key in (x if isinstance(x, dict) else [None]):
                assert np.array_equal(x if key is None else x[key], y if key is None else y[key])


def test_a_snapshot_of_another_env_is_refused():
    from her_rl.envs import make_vec
    from her_rl.envs.state import env_state, restore_env_state

    cartpole = env_state(make_vec({"id": "CartPole-v1"}, 2, seed=0))
    with pytest.raises(ValueError, match="the saved env state is of CartPoleVectorEnv, this env is SyncVectorEnv"):
        restore_env_state(make_vec({"id": "Pendulum-v1"}, 2, seed=0), cartpole)


@pytest.mark.parametrize("tamper", [
    lambda c: c.update(obs=c["obs"][:, :2]),
    lambda c: c.update(envs={"env": ("o", "DeepSeaVectorEnv", {})}),
    lambda c: c["envs"]["env"][2].update(surprise=("v", 1)),
    lambda c: c.update(envs="garbage"),
])
def test_a_tampered_episode_state_is_one_line_naming_the_checkpoint(tamper):
    from her_rl.algos.ppo import PPO
    from her_rl.run.runner import make_agent
    from her_rl.errors import CheckpointError

    cartpole = {"name": "cartpole", "id": "CartPole-v1", "kwargs": {}}
    state = PPO(env=cartpole, num_envs=2, num_steps=8, epochs=1).state_dict()
    tamper(state["collector"])
    config = {"algo": {"name": "ppo", "num_envs": 2, "num_steps": 8, "epochs": 1}, "env": cartpole, "seed": 0}
    with pytest.raises(CheckpointError, match=r"^cannot load checkpoint run/checkpoint.pt: its agent state does not "
                                              r"fit algo 'ppo' \(.+\)$"):
        make_agent(config, state=state, source="run/checkpoint.pt")
