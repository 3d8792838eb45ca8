"""Batched envs sized against the memory the process may use before any copy is built: the training copies
with what one iteration keeps of them (a HER cycle's episodes, an on-policy rollout) and the evaluation
copies; from the command line and from a saved config alike, one line and exit 2, nothing written.

A small limit is faked by replacing ``her_rl.rl.memory.headroom``; one test runs her-run under a real
address-space limit (``ulimit -v``)."""

import os
import subprocess

import numpy as np
import pytest
from gymnasium import spaces

import her_rl
from her_rl.algos.rollout import rollout_bytes
from her_rl.errors import ConfigError
from her_rl.rl import memory
from her_rl.rl.her import episode_bytes

SMALL = ["algo=her_dqn", "env=bitflip", "n=4", "progress=false", "eval.episodes=5", "algo.hidden=[8]",
         "algo.buffer_size=64", "algo.batch_size=8"]
LIMIT = "its address-space limit, ulimit -v"


def fake_limit(monkeypatch, nbytes: int) -> None:
    monkeypatch.setattr(memory, "headroom", lambda: (nbytes, LIMIT))


def one_error_line(p) -> str:
    assert "Traceback" not in p.stderr + p.stdout, p.stderr
    assert p.returncode == 2, (p.returncode, p.stderr)
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("her-run: error: "), p.stderr
    return lines[0]


def test_space_bytes_from_shape_and_dtype_alone():
    bits = spaces.MultiBinary(4096)
    goal = spaces.Dict({"observation": bits, "achieved_goal": bits, "desired_goal": bits})
    assert memory.space_bytes(goal) == 3 * 4096  # int8
    assert memory.space_bytes(goal, itemsize=4) == 3 * 4096 * 4
    assert memory.space_bytes(spaces.Box(0, 1, (256 * 256,), np.float32)) == 256 * 256 * 4
    assert memory.space_bytes(spaces.Discrete(10**12)) == 8  # one integer, however many values
    assert memory.space_bytes(spaces.Tuple((spaces.Discrete(3), spaces.Box(0, 1, (2, 3))))) == 8 + 6 * 4
    assert memory.space_bytes(spaces.Text(10)) == 0  # no fixed shape: not counted
    huge = spaces.MultiBinary([10**6, 10**6])  # described, never allocated
    assert memory.space_bytes(huge) == 10**12


def test_the_estimates_count_what_collect_allocates():
    bits = spaces.MultiBinary(8)
    goal = spaces.Dict({"observation": bits, "achieved_goal": bits, "desired_goal": bits})
    # observation and achieved goal for T + 1 steps (int8 bits), an int64 action for T steps, per copy
    assert episode_bytes(16, 8, goal, spaces.Discrete(8)) == 16 * (9 * (8 + 8) + 8 * 8)
    box = spaces.Box(-1, 1, (3,), np.float32)
    floats = spaces.Dict({"observation": spaces.Box(-1, 1, (10,)), "achieved_goal": box, "desired_goal": box})
    assert episode_bytes(2, 50, floats, box) == 2 * (51 * (10 + 3) * 4 + 50 * 3 * 4)
    # obs and obs_raw, one value head, an int64 action, logp, reward and three flags; twice (list, then stacked)
    assert rollout_bytes(8, 32, 4, spaces.Discrete(2), 1) == 2 * 8 * 33 * (2 * 4 * 4 + 4 + 8 + 4 + 4 + 3)


@pytest.mark.parametrize("args,limit,what,lower", [
    (["algo=her_dqn", "env=bitflip", "n=4096", "algo.episodes_per_cycle=4096"], 2 * 10**9,
     "a batched env of 4,096 training copies of her_rl/BitFlip-v0 with the 4,097 steps of each one iteration "
     "keeps needs 137.7 GB", "lower algo.episodes_per_cycle"),
    (["algo=ppo", "env=deep_sea", "size=256", "algo.num_envs=4096"], 2 * 10**9,
     "a batched env of 4,096 training copies of her_rl/DeepSea-v0 with the 33 steps of each", "lower algo.num_envs "
     "or algo.num_steps"),
    (["algo=ppo", "env=cartpole", "algo.num_steps=1000000000"], 2 * 10**9,
     "a batched env of 8 training copies of CartPole-v1 with the 1,000,000,001 steps of each", "lower algo.num_envs "
     "or algo.num_steps"),
    (["algo=rnd_ppo", "env=mountaincar", "algo.rnd_init_steps=1000000000"], 2 * 10**9,
     "with the 1,000,000,001 steps of each", "lower algo.num_envs or algo.rnd_init_steps"),
    (["algo=reinforce", "env=cartpole", "algo.num_envs=4096"], 10**8,  # one episode each: CartPole's 500 steps
     "a batched env of 4,096 training copies of CartPole-v1 with the 501 steps of each", "lower algo.num_envs"),
    (["algo=ppo", "env=deep_sea", "size=256", "algo.num_envs=1", "eval.episodes=4096"], 2 * 10**9,
     "a batched env of 4,096 evaluation copies of her_rl/DeepSea-v0 needs 2.1 GB", "lower eval.episodes"),
])
def test_copies_past_the_limit_are_one_line_and_nothing_is_written(her_run_here, tmp_path, monkeypatch, args, limit,
                                                                   what, lower):
    fake_limit(monkeypatch, limit)
    line = one_error_line(her_run_here([*args, "progress=false", f"hydra.run.dir={tmp_path}/run"], tmp_path))
    assert what in line and line.endswith(lower) and f"({memory.gigabytes(limit)}, {LIMIT})" in line, line
    assert os.listdir(tmp_path) == []


def test_the_copies_that_fit_are_not_refused(monkeypatch, tmp_path):
    """The same run's sizes with room enough (the estimate is of the arrays' own bytes, nothing added)."""
    fake_limit(monkeypatch, 10**6)
    her_rl.train([*SMALL, "algo.episodes_per_cycle=64", "budget.env_steps=64"], out_dir=tmp_path / "run")
    assert (tmp_path / "run" / "results.json").is_file()


def test_a_saved_config_is_sized_at_resume(monkeypatch, tmp_path):
    """A run folder whose saved config asks for more copies than this process may use (trained where it
    fitted, resumed under a smaller limit): refused before its learner builds a copy, the folder untouched."""
    run = tmp_path / "run"
    her_rl.train([*SMALL, "algo.episodes_per_cycle=4096", "budget.env_steps=100"], out_dir=run)
    before = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}
    fake_limit(monkeypatch, 100_000)  # 5 evaluation copies fit, 4,096 training copies do not
    with pytest.raises(ConfigError, match=r"a batched env of 4,096 training copies of her_rl/BitFlip-v0 with the 5 "
                                          r"steps of each one iteration keeps needs 0\.\d MB.*lower algo\.episodes_per_cycle"):
        her_rl.train(["resume=true", "budget.env_steps=200"], out_dir=run)
    assert {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()} == before


def test_load_sizes_only_its_evaluation_copies(monkeypatch, tmp_path):
    """load= builds no training copies: a saved run of 4,096 of them is evaluated under a limit they
    would not fit, and its evaluation copies are still sized."""
    run = tmp_path / "run"
    her_rl.train([*SMALL, "algo.episodes_per_cycle=4096", "budget.env_steps=100"], out_dir=run)
    fake_limit(monkeypatch, 100_000)
    report = her_rl.train([f"load={run}"], out_dir=tmp_path / "eval")
    assert report["episodes"] == 5
    with pytest.raises(ConfigError, match=r"a batched env of 4,096 evaluation copies .* lower eval\.episodes"):
        her_rl.train([f"load={run}", "eval.episodes=4096"], out_dir=tmp_path / "eval2")


def test_under_a_real_address_space_limit(her_run, tmp_path):
    """her-run itself under ``ulimit -v`` 6 GB: a cycle of 4,096 episodes of 4,096 bits (numpy's
    _ArrayMemoryError traceback before) is one line, exit 2, no run folder."""
    import resource

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (6 * 2**30, 6 * 2**30))

    p = subprocess.run([her_run, "algo=her_dqn", "env=bitflip", "n=4096", "algo.episodes_per_cycle=4096",
                        "algo.buffer_size=4096", "algo.batch_size=32", "progress=false", f"hydra.run.dir={tmp_path}/new"],
                       cwd=tmp_path, env={**os.environ, "HYDRA_FULL_ERROR": "0"}, text=True, capture_output=True,
                       timeout=300, preexec_fn=limit)
    line = one_error_line(p)
    assert "4,096 training copies" in line and "ulimit -v" in line and "lower algo.episodes_per_cycle" in line, line
    assert not (tmp_path / "new").exists()
