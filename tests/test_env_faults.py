"""A user's env fault is one line: ``her-run: error: env <id>: <what failed, where>``, exit 2 before
training (construction, the first reset and step), 4 during it (the run folder keeps its last
checkpoint and resumes); an env that never ends its episodes is truncated at a stated limit.

The CLI cases run as concurrent ``her-run`` subprocesses (one fixture starts them all); the others
call ``her_rl.train`` in this process, which raises the same EnvError.
"""

import json
import os
import shlex
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from gymnasium import spaces

import her_rl
from her_rl.folder import checkpoint
from her_rl.envs.output_checks import check_obs
from her_rl.errors import EnvError

USER_ENVS = textwrap.dedent('''
    import os

    import gymnasium as gym
    import numpy as np
    from gymnasium import spaces


    class SteadyLine(gym.Env):  # a well-behaved plain env; each subclass below breaks one thing
        def __init__(self):
            self.observation_space = spaces.Box(0, 10, (2,), np.float32)
            self.action_space = spaces.Discrete(2)

        def obs(self):
            return np.array([self.t, 1.0], np.float32)

        def reset(self, seed=None, options=None):
            super().reset(seed=seed)
            self.t = 0
            return self.obs(), {}

        def step(self, action):
            self.t += 1
            return self.obs(), 1.0, self.t >= 5, False, {}


    class CtorRaises(SteadyLine):
        def __init__(self):
            raise RuntimeError("no licence for this simulator")


    class ResetRaises(SteadyLine):
        def reset(self, seed=None, options=None):
            return {}["start"], {}


    class StepRaises(SteadyLine):
        def step(self, action):
            raise RuntimeError("the simulator crashed")


    STEPS = [0]


    class StepRaisesLater(SteadyLine):  # after FAULT_AFTER steps of this process (unset: never)
        def step(self, action):
            STEPS[0] += 1
            if STEPS[0] > int(os.environ.get("FAULT_AFTER", 10**9)):
                raise RuntimeError("the simulator crashed")
            return super().step(action)


    class CtorExits(SteadyLine):
        def __init__(self):
            raise SystemExit(0)


    class StepExits(SteadyLine):  # sys.exit(3) at once, or sys.exit(0) after FAULT_AFTER steps of this process
        def step(self, action):
            STEPS[0] += 1
            after = os.environ.get("FAULT_AFTER")
            if after is None or STEPS[0] > int(after):
                raise SystemExit(0 if after else 3)
            return super().step(action)


    class StepInterrupts(SteadyLine):
        def step(self, action):
            raise KeyboardInterrupt


    class CloseRaises(SteadyLine):
        def close(self):
            raise OSError("cannot release the device")


    class WrongShape(SteadyLine):
        def obs(self):
            return np.zeros(3, np.float32)


    class Strings(SteadyLine):
        def obs(self):
            return np.array(["a", "b"])


    class RewardNone(SteadyLine):
        def step(self, action):
            obs, _, terminated, truncated, info = super().step(action)
            return obs, None, terminated, truncated, info


    class NotBool(SteadyLine):
        def step(self, action):
            obs, reward, terminated, truncated, info = super().step(action)
            return obs, reward, "no", truncated, info


    class OldStep(SteadyLine):
        def step(self, action):
            obs, reward, terminated, truncated, info = super().step(action)
            return obs, reward, terminated or truncated, info


    class ObsOnly(SteadyLine):
        def reset(self, seed=None, options=None):
            return super().reset(seed=seed)[0]


    class EndlessLine(SteadyLine):  # never terminates, registered without a time limit
        def step(self, action):
            self.t = (self.t + 1) % 10
            return self.obs(), float(self.t == 0), False, False, {}


    class SteadyGoal(gym.Env):  # a well-behaved goal env
        def __init__(self):
            cell = spaces.Box(0, 3, (2,), np.float32)
            self.observation_space = spaces.Dict(observation=cell, achieved_goal=cell, desired_goal=cell)
            self.action_space = spaces.Discrete(4)

        def compute_reward(self, achieved_goal, desired_goal, info):
            return -np.any(achieved_goal != desired_goal, axis=-1).astype(np.float32)

        def obs(self):
            return {"observation": self.pos.copy(), "achieved_goal": self.pos.copy(), "desired_goal": self.goal.copy()}

        def reset(self, seed=None, options=None):
            super().reset(seed=seed)
            self.pos, self.goal = self.np_random.integers(0, 4, (2, 2)).astype(np.float32)
            return self.obs(), {}

        def step(self, action):
            move = np.eye(2, dtype=np.float32)[int(action) % 2] * (1 - int(action) // 2 * 2)
            self.pos = np.clip(self.pos + move, 0, 3)
            reward = float(self.compute_reward(self.pos, self.goal, None))
            return self.obs(), reward, False, False, {"is_success": reward == 0}


    class ScalarReward(SteadyGoal):
        def compute_reward(self, achieved_goal, desired_goal, info):
            return -float(np.any(achieved_goal != desired_goal))


    class RewardRaises(SteadyGoal):
        def compute_reward(self, achieved_goal, desired_goal, info):
            return achieved_goal - desired_goal["x"]


    class RewardShapeLater(SteadyGoal):  # one reward per goal for the first batches, then one per batch
        calls = 0

        def compute_reward(self, achieved_goal, desired_goal, info):
            rewards = super().compute_reward(achieved_goal, desired_goal, info)
            if np.ndim(achieved_goal) > 1:
                RewardShapeLater.calls += 1
                return rewards if RewardShapeLater.calls <= 3 else rewards.mean()
            return rewards


    class FlatReset(SteadyGoal):
        def reset(self, seed=None, options=None):
            return super().reset(seed=seed)[0]["observation"], {}


    for cls in (SteadyLine, CtorRaises, ResetRaises, StepRaises, StepRaisesLater, CtorExits, StepExits, StepInterrupts,
                CloseRaises, WrongShape, Strings,
                RewardNone, NotBool, OldStep, ObsOnly, SteadyGoal, ScalarReward, RewardRaises, RewardShapeLater,
                FlatReset):
        gym.register(id=f"{cls.__name__}-v0", entry_point=cls, max_episode_steps=8)
    gym.register(id="EndlessLine-v0", entry_point=EndlessLine)
''')

FAST = ["progress=false", "eval.episodes=2"]
PPO = ["algo=ppo", "budget.env_steps=64", *FAST]
HER = ["algo=her_dqn", "budget.env_steps=64", *FAST]
LATER = ["algo=ppo", "budget.env_steps=2000", "checkpoint.every_s=0", *FAST]
CLI = {  # name: (env class, arguments, extra environment, exit status, what the error line says)
    "constructor": ("CtorRaises", PPO, {}, 2, "the constructor raised RuntimeError: no licence for this simulator "
                                              "(faulty_envs.py:"),
    "step": ("StepRaises", PPO, {}, 2, "step raised RuntimeError: the simulator crashed (faulty_envs.py:"),
    "close": ("CloseRaises", PPO, {}, 2, "close raised OSError: cannot release the device (faulty_envs.py:"),
    "scalar_reward": ("ScalarReward", HER, {}, 2, "compute_reward returned a float (-0.0) for a batch of 1 goal; "
                                                  "it must return one reward per goal"),
    "mid_training": ("StepRaisesLater", LATER, {"FAULT_AFTER": "600"}, 4,
                     "step raised RuntimeError: the simulator crashed (faulty_envs.py:"),
    "endless": ("EndlessLine", PPO, {}, 0, None),
    # what an env does is the env's fault, an exit or a Ctrl-C it raises itself included
    "constructor_exits": ("CtorExits", PPO, {}, 2, "the constructor raised SystemExit: 0 (faulty_envs.py:"),
    "step_exits_3": ("StepExits", PPO, {}, 2, "step raised SystemExit: 3 (faulty_envs.py:"),
    "step_interrupts": ("StepInterrupts", PPO, {}, 2, "step raised KeyboardInterrupt (faulty_envs.py:"),
    "exits_mid_training": ("StepExits", LATER, {"FAULT_AFTER": "600"}, 4, "step raised SystemExit: 0 (faulty_envs.py:"),
}
TIMEOUT_S = 240


@pytest.fixture(scope="module")
def user_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("user")
    (folder / "faulty_envs.py").write_text(USER_ENVS)
    return folder


def _command(her_run, env, args, folder):
    return [her_run, "env=gym", f"env.id=faulty_envs:{env}-v0", *args, f"hydra.run.dir={folder}"]


@pytest.fixture(scope="module")
def cli_runs(user_dir):
    """Every CLI case started at once, then waited for: name -> CompletedProcess."""
    her_run = str(Path(sys.executable).with_name("her-run"))  # conftest's her_run, for a module-scoped fixture
    procs = {}
    for name, (env, args, extra, _, _) in CLI.items():
        procs[name] = subprocess.Popen(_command(her_run, env, args, user_dir / name), cwd=user_dir, text=True,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, **extra})
    deadline, done = time.monotonic() + TIMEOUT_S, {}
    try:
        for name, proc in procs.items():
            out, err = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
            done[name] = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return done


@pytest.mark.parametrize("name", [n for n, case in CLI.items() if case[3]])
def test_an_env_fault_is_one_line_from_the_cli(cli_runs, user_dir, name):
    env, _, _, code, message = CLI[name]
    done = cli_runs[name]
    assert done.returncode == code, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("her-run: error: env")]
    assert len(errors) == 1 and "Traceback" not in done.stderr, done.stderr
    assert errors[0].startswith(f"her-run: error: env faulty_envs:{env}-v0: {message}"), errors[0]
    if name in ("constructor", "constructor_exits", "close", "scalar_reward"):  # refused before the run folder is made
        assert not (user_dir / name).exists()


def test_a_fault_during_training_keeps_the_last_checkpoint_and_resumes(cli_runs, her_run, user_dir):
    folder, line = user_dir / "mid_training", cli_runs["mid_training"].stderr
    assert "training stopped at env step" in line and "is kept" in line and "resume=true" in line, line
    assert not (folder / "results.json").exists() and not list(folder.glob("*.tmp"))  # nothing half-written
    saved = checkpoint.load(folder / "checkpoint.pt")["runner"]["env_steps"]
    assert 0 < saved <= 600
    command = shlex.split(line.strip().splitlines()[-1].split("continue with ")[1])  # the line's own command
    assert command[:2] == ["her-run", "resume=true"] and "env.id=faulty_envs:StepRaisesLater-v0" in command
    again = subprocess.run([her_run, *command[1:], "progress=false"], cwd=user_dir,
                           capture_output=True, text=True, timeout=TIMEOUT_S)
    assert again.returncode == 0, again.stderr
    assert json.loads((folder / "results.json").read_text())["env_steps"] >= 2000


def test_an_endless_env_is_truncated_at_the_stated_limit(cli_runs, user_dir):
    done = cli_runs["endless"]
    assert done.returncode == 0, done.stderr
    assert ("env faulty_envs:EndlessLine-v0 has no time limit of its own: her-rl truncates its episodes after "
            "1,000 steps") in done.stdout
    results = json.loads((user_dir / "endless" / "results.json").read_text())
    assert results["eval_return"] == 100.0 and results["eval_terminated_rate"] == 0.0  # 1,000 steps, a reward every 10


@pytest.fixture
def in_user_dir(user_dir, monkeypatch):
    monkeypatch.chdir(user_dir)
    monkeypatch.syspath_prepend(str(user_dir))
    return user_dir


@pytest.mark.parametrize("env,args,message", [
    ("ResetRaises", PPO, "reset raised KeyError: 'start' (faulty_envs.py:"),
    ("WrongShape", PPO, "reset's observation has shape (3,); the observation space Box(0.0, 10.0, (2,), float32) "
                        "wants (2,)"),
    ("Strings", PPO, "reset's observation has dtype <U1; the observation space"),
    ("RewardNone", PPO, "step's reward is None; it must be a number"),
    ("NotBool", PPO, "step's terminated is a str ('no'); it must be a bool"),
    ("OldStep", PPO, "step returned 4 values (obs, reward, done, info: the old gym API); gymnasium's step returns 5"),
    ("ObsOnly", PPO, "reset returned an array of shape (2,) and dtype float32, not (observation, info)"),
    ("FlatReset", HER, "reset's observation is an array of shape (2,) and dtype float32, but the observation space "
                       "is a Dict (observation, achieved_goal, desired_goal)"),
    ("RewardRaises", HER, "compute_reward raised IndexError"),
    ("RewardShapeLater", [*HER[:-3], "budget.env_steps=2000", *FAST], "compute_reward returned a float32"),
])
def test_an_env_fault_is_one_env_error(in_user_dir, tmp_path, env, args, message):
    with pytest.raises(EnvError) as raised:
        her_rl.train(["env=gym", f"env.id=faulty_envs:{env}-v0", *args], out_dir=tmp_path / "run")
    assert raised.value.exit_code == 2 and "\n" not in str(raised.value)
    assert str(raised.value).startswith(f"env faulty_envs:{env}-v0: {message}"), str(raised.value)


def test_env_max_episode_steps_truncates_training_and_evaluation(in_user_dir, tmp_path, capsys):
    results = her_rl.train(["env=gym", "env.id=faulty_envs:EndlessLine-v0", "env.max_episode_steps=20", *PPO],
                           out_dir=tmp_path / "run")
    assert results["eval_return"] == 2.0 and results["eval_terminated_rate"] == 0.0  # 20 steps, a reward every 10
    assert results["episodes"] > 0  # training episodes ended too
    assert "has no time limit of its own" not in capsys.readouterr().out  # the limit was given, not applied


def test_env_gym_needs_an_id(her_run_here, tmp_path):
    done = her_run_here(["env=gym", "algo=ppo"], tmp_path)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("her-run: error: env=gym needs env.id=<gymnasium id>, e.g. env.id=CartPole-v1")
    assert not list(tmp_path.iterdir())


def test_observations_are_checked_by_shape_and_kind_not_exact_dtype():
    box = spaces.Box(0, 1, (2,), np.float32)
    assert check_obs(np.zeros(2), box) is None  # float64 for float32: a cast within the kind, as SyncVectorEnv does
    assert check_obs([0, 1], box) is None
    assert check_obs(np.zeros((4, 2)), box, batch=(4,)) is None
    assert "shape (3,)" in check_obs(np.zeros(3), box)
    assert "dtype object" in check_obs(np.array([None, 1.0]), box)
    assert "dtype float64" in check_obs(np.zeros(2), spaces.Box(0, 1, (2,), np.int64))
    goal = spaces.Dict(observation=box, achieved_goal=box, desired_goal=box)
    assert "has no key 'desired_goal'" in check_obs({"observation": np.zeros(2), "achieved_goal": np.zeros(2)}, goal)
