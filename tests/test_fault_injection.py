"""Fault injection: ``her-run`` SIGKILLed at random moments and resumed by folder ends with the same
weights and results as a run that never stopped, for each of the seven algorithms.

Each case trains once in-process without a stop, then as a ``her-run`` subprocess that is killed
once or twice (a seeded random delay after it has written a checkpoint, up to 40% of the first
run's wall time: mid-iteration, mid-save or mid-evaluation) and resumed with ``resume=true`` until
it ends. ``HER_RL_FAULT_SEED=<int>`` draws
other moments, for a longer soak: ``for s in $(seq 20); do HER_RL_FAULT_SEED=$s pytest -q
tests/test_fault_injection.py; done``.
"""

import json
import os
import random
import signal
import subprocess
import time
import zlib

import forked
import pytest
import torch

from her_rl.folder import checkpoint
from her_rl.run.runner import main

FAST = ["progress=false", "eval.stop_when_solved=false", "eval.episodes=4", "eval.every_iterations=3",
        "checkpoint.every_s=0"]
SMALL = ["algo.hidden=[64,64]", "algo.updates_per_cycle=10", "algo.batch_size=64"]  # off-policy iterations of ~50 ms
PUSH = ["env=push", "env.kwargs.actions=continuous", *SMALL]
CASES = {  # about 2 s of training each, so that a kill lands in the middle
    "her_dqn": ["algo=her_dqn", "env=bitflip", "n=6", *SMALL, "budget.env_steps=1500"],
    "her_ddpg": ["algo=her_ddpg", *PUSH, "budget.env_steps=32000"],
    "her_sac": ["algo=her_sac", *PUSH, "budget.env_steps=24000"],
    "her_td3": ["algo=her_td3", *PUSH, "budget.env_steps=32000"],
    "her_redq": ["algo=her_redq", *PUSH, "algo.ensemble=3", "budget.env_steps=24000"],
    "ppo": ["algo=ppo", "env=cartpole", "budget.env_steps=3000"],
    "reinforce": ["algo=reinforce", "env=cartpole", "budget.env_steps=3000"],
    "rnd_ppo": ["algo=rnd_ppo", "env=deep_sea", "budget.env_steps=4000"],
}
NOT_COMPARED = ("wall_time_s", "sps", "checkpoint")  # timings, and the folder the run lives in
MAX_DELAY = 0.4  # of the uninterrupted run's wall time: the first kill lands before the run ends
TIMEOUT_S = 120


def written(path):
    """Which checkpoint file is there now (None: none yet); a new save replaces the file."""
    try:
        stat = path.stat()
    except FileNotFoundError:
        return None
    return stat.st_ino, stat.st_mtime_ns


def kill_after_a_checkpoint(command, folder, delay, log):
    """Start ``command``; once it has written a new checkpoint, wait ``delay`` s and SIGKILL it.
    Returns whether the kill landed (False: the run had ended by then)."""
    ckpt, before = folder / "checkpoint.pt", written(folder / "checkpoint.pt")
    with open(log, "ab") as err:
        proc = forked.Popen(command, stdout=subprocess.DEVNULL, stderr=err)
    try:
        deadline = time.monotonic() + TIMEOUT_S
        while written(ckpt) in (None, before) and proc.poll() is None:
            assert time.monotonic() < deadline, "no checkpoint written in time"
            time.sleep(0.01)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)  # a process that has ended is not signalled
        proc.wait(timeout=TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode in (0, -signal.SIGKILL), log.read_text()
    return proc.returncode == -signal.SIGKILL


def tensors(state, prefix=""):
    """Every tensor of a nested state dict, by its path."""
    if isinstance(state, torch.Tensor):
        return {prefix: state}
    items = state.items() if isinstance(state, dict) else enumerate(state) if isinstance(state, (list, tuple)) else []
    return {k: v for key, value in items for k, v in tensors(value, f"{prefix}/{key}").items()}


def outcome(folder):
    results = json.loads((folder / "results.json").read_text())
    return ({k: v for k, v in results.items() if k not in NOT_COMPARED},
            tensors(checkpoint.load(folder / "checkpoint.pt")["agent"]))


@pytest.mark.parametrize("algo", list(CASES))
def test_a_run_killed_at_random_moments_and_resumed_ends_as_one_that_never_stopped(tmp_path, her_run, algo):
    args = [*FAST, *CASES[algo]]
    wall = main(args, out_dir=tmp_path / "whole")["wall_time_s"]
    seed = int(os.environ.get("HER_RL_FAULT_SEED", 0))
    rng = random.Random(zlib.crc32(f"{algo}-{seed}".encode()))
    folder, log = tmp_path / "killed", tmp_path / "stderr.log"
    command = [her_run, *args, f"hydra.run.dir={folder}"]
    kills = 0
    for _ in range(rng.choice([1, 2])):
        if not kill_after_a_checkpoint(command, folder, rng.uniform(0.0, MAX_DELAY * wall), log):
            break  # the resumed run ended before the kill: nothing left to resume
        kills += 1
        command = [her_run, "resume=true", f"hydra.run.dir={folder}"]
    else:
        done = forked.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=TIMEOUT_S)
        assert done.returncode == 0, done.stderr
        assert "warning" not in done.stderr
    assert kills >= 1, "the run ended before it could be killed"
    print(f"{algo}: killed {kills} time(s)")  # shown with pytest -s
    (numbers, weights), (whole_numbers, whole_weights) = outcome(folder), outcome(tmp_path / "whole")
    assert numbers == whole_numbers
    assert weights.keys() == whole_weights.keys() and len(weights) > 4
    assert not [k for k in weights if not torch.equal(weights[k], whole_weights[k])]
    assert "warning" not in log.read_text()
