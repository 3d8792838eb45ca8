"""The FetchPush profile's phase clock, and the Fetch copies that read their joints by address.

The clock's tests run always (a fake clock: no sleeping, no MuJoCo). The joint tests build Fetch
envs and are skipped when gymnasium_robotics or mujoco cannot be imported (CI has no robotics extra).
"""

import importlib.util
import pickle
import sys

import numpy as np
import pytest

from bench.phases import ROOT, PhaseClock
from bench.profile import Side, time_sides

MISSING = [m for m in ("gymnasium_robotics", "mujoco") if importlib.util.find_spec(m) is None]
needs_robotics = pytest.mark.skipif(bool(MISSING), reason=f"robotics extra not installed ({', '.join(MISSING)})")


class FakeTime:
    """A clock that moves only when the code under test says it worked for a while."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def work(self, seconds: float) -> None:
        self.now += seconds


class Worker:
    def __init__(self, time: FakeTime):
        self.time = time

    def inner(self) -> str:
        self.time.work(3.0)
        return "inner"

    def outer(self) -> str:
        self.time.work(1.0)
        self.inner()
        self.time.work(0.5)
        return "outer"


def test_phases_charge_each_second_to_the_innermost_call_running():
    time = FakeTime()
    clock, worker = PhaseClock(clock=time), Worker(time)
    clock.wrap(worker, "outer", "outer")
    clock.wrap(worker, "inner", "inner")
    clock.start()
    assert worker.outer() == "outer"  # wrapped calls still return what they returned
    time.work(0.25)  # outside every wrapped call: the root phase
    worker.inner()
    clock.stop()
    assert clock.seconds == {"outer": 1.5, "inner": 6.0, ROOT: 0.25}
    assert clock.calls == {"outer": 1, "inner": 2}


def test_an_opaque_phase_keeps_its_nested_calls_and_restore_unwraps():
    time = FakeTime()
    clock, worker, original = PhaseClock(clock=time), Worker(time), Worker.__dict__["inner"]
    clock.wrap(worker, "outer", "evaluation", opaque=True)
    clock.wrap(worker, "inner", "inner")
    clock.wrap(Worker, "inner", "class-level")  # a class's function, as torch.Tensor.backward is wrapped
    clock.start()
    worker.outer()
    clock.stop()
    assert clock.seconds == {"evaluation": 4.5, ROOT: 0.0}
    assert Worker.__dict__["inner"] is not original
    clock.restore()
    assert "outer" not in vars(worker) and "inner" not in vars(worker)
    assert Worker.__dict__["inner"] is original


def test_each_side_is_timed_with_its_own_torch_threads():
    import torch

    seen: dict[str, set[int]] = {"one": set(), "two": set()}

    def side(name: str, threads: int) -> Side:
        def work(n: int) -> int:
            seen[name].add(torch.get_num_threads())
            return n
        return Side("ours", name, "64", 8, collect=work, learn=work, threads=threads)

    before = torch.get_num_threads()
    try:
        rates = time_sides([side("one", 1), side("two", 2)], steps=10, updates=3, repeats=2)
    finally:
        torch.set_num_threads(before)
    assert seen == {"one": {1}, "two": {2}}  # the second side's setting did not leak into the first's turns
    assert [r.learner for r in rates] == ["one", "two"] and all(r.updates_per_s for r in rates)


@needs_robotics
def test_joints_read_by_address_give_the_same_observations_bit_for_bit():
    import gymnasium as gym

    from her_rl.envs.families import ensure_registered
    from her_rl.envs.fetch import CachedJointUtils

    ensure_registered("FetchPush-v4")
    stock, cached = gym.make("FetchPush-v4"), gym.make("FetchPush-v4")
    cached.unwrapped._utils = pickle.loads(pickle.dumps(CachedJointUtils()))  # as AsyncVectorEnv sends it
    actions = np.random.default_rng(0).uniform(-1, 1, (60, 4)).astype(np.float32)
    for seed in (0, 1):
        a, _ = stock.reset(seed=seed)
        b, _ = cached.reset(seed=seed)
        for action in actions:
            assert all(np.array_equal(a[k], b[k]) and a[k].dtype == b[k].dtype for k in a)
            a, b = stock.step(action)[0], cached.step(action)[0]
    assert cached.unwrapped._utils._addresses is not None  # the fast path ran, not the module's reader
    stock.close(), cached.close()


@needs_robotics
def test_learners_collect_in_fetch_copies_that_read_joints_by_address_and_other_envs_are_left_alone():
    from her_rl.algos.cycle import cycle_envs
    from her_rl.envs.fetch import CachedJointUtils, cache_joint_lookups

    fetch_push = {"name": "fetch_push", "id": "FetchPush-v4", "kwargs": {}, "vectorization": "sync"}
    envs, _ = cycle_envs(fetch_push, 2, seed=0, algo="her_ddpg")
    try:
        assert all(isinstance(env.unwrapped._utils, CachedJointUtils) for env in envs.envs)
    finally:
        envs.close()
    bits, _ = cycle_envs({"name": "bitflip", "id": "her_rl/BitFlip-v0", "kwargs": {"n": 4}}, 2, seed=0, algo="her_dqn")
    assert cache_joint_lookups(bits) is bits and not hasattr(bits, "_utils")
    assert "gymnasium_robotics.utils.mujoco_utils" in sys.modules


@needs_robotics
def test_a_variant_her_run_would_refuse_is_one_line_and_exit_2(capsys):
    from conftest import load_script, unload_script

    script = load_script("profile_fetch")
    try:
        with pytest.raises(SystemExit) as stop:
            script.main(["--algos", "her_ddpg", "--peers", "--no-async", "--variant", "threads=0"])
    finally:
        unload_script("profile_fetch")
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.endswith(" error: --variant 'threads=0': threads=0 is not allowed: threads must be an integer in [1, 1024]")


@pytest.mark.parametrize("counts", [["1", "0"], ["2", "1025"]])
def test_a_peer_thread_count_outside_1_to_1024_is_one_line_and_exit_2(capsys, counts):
    from conftest import load_script, unload_script

    script = load_script("profile_fetch")
    try:
        with pytest.raises(SystemExit) as stop:
            script.main(["--peer-threads", *counts])
    finally:
        unload_script("profile_fetch")
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.endswith(f" error: --peer-threads: each count must be 1 to 1024, got {' '.join(counts)}")
