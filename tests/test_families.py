"""Third-party goal-env families by their own ids (her_rl/envs/families.py): gymnasium-robotics'
mazes and Fetch, panda-gym, and SB3's BitFlippingEnv registered from a user module.

CI installs the robotics, panda and bench extras, so these run there; elsewhere a missing extra
skips only the tests that build its envs (the refusals without it are simulated and always run).
"""

import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import her_rl
from her_rl.envs import families
from her_rl.errors import ConfigError

ENV = {**os.environ, "OMP_NUM_THREADS": "1"}
HAS = {m: importlib.util.find_spec(m) is not None for m in ("gymnasium_robotics", "mujoco", "panda_gym",
                                                              "pybullet", "stable_baselines3")}
needs_robotics = pytest.mark.skipif(not (HAS["gymnasium_robotics"] and HAS["mujoco"]),
                                    reason='robotics extra not installed: pip install -e ".[robotics]"')
needs_panda = pytest.mark.skipif(not (HAS["panda_gym"] and HAS["pybullet"]),
                                 reason='panda extra not installed: pip install -e ".[panda]"')
needs_sb3 = pytest.mark.skipif(not HAS["stable_baselines3"], reason='bench extra not installed')
TINY = ["progress=false", "eval.episodes=2", "eval.every_iterations=1", "algo.hidden=[16]", "algo.batch_size=16",
        "checkpoint.every_s=0"]


@pytest.mark.parametrize("env_id, family", [
    ("PointMaze_UMaze-v3", "gymnasium-robotics"), ("AntMaze_UMaze-v5", "gymnasium-robotics"),
    ("FetchPush-v4", "gymnasium-robotics"), ("HandReach-v3", "gymnasium-robotics"),
    ("gymnasium_robotics:PointMaze_UMaze-v3", "gymnasium-robotics"), ("PandaReach-v3", "panda-gym"),
    ("panda_gym:PandaPush-v3", "panda-gym"), ("CartPole-v1", None), ("mymod:PandaLike-v0", None),
    ("her_rl/Push-v0", None)])
def test_an_id_names_its_family_by_its_own_name_or_its_module(env_id, family):
    found = families.family_of(env_id)
    assert (found.name if found else None) == family


@pytest.mark.parametrize("blocked, env_id, extra", [("gymnasium_robotics", "PointMaze_UMaze-v3", "robotics"),
                                                    ("panda_gym", "PandaReach-v3", "panda")])
def test_a_missing_extra_is_one_line_naming_its_install(monkeypatch, blocked, env_id, extra):
    monkeypatch.setitem(sys.modules, blocked, None)  # `import blocked` now raises ImportError
    with pytest.raises(ConfigError) as err:
        families.ensure_registered(env_id, "gym")
    message = str(err.value)
    assert message.startswith(f"env.id '{env_id}' needs the {extra} extra") and "\n" not in message
    assert f'pip install -e ".[{extra}]"' in message


@needs_robotics
def test_an_unknown_id_of_a_family_lists_what_the_family_registers():
    with pytest.raises(ConfigError) as err:
        families.ensure_registered("PointMaze_Nowhere-v3")
    message = str(err.value)
    assert "unknown gymnasium-robotics env id 'PointMaze_Nowhere-v3'" in message
    assert "PointMaze_UMaze-v3" in message and "Dense" not in message and "\n" not in message


@needs_robotics
@pytest.mark.parametrize("env_id", ["PointMaze_UMaze-v3", "gymnasium_robotics:PointMaze_UMaze-v3"])
def test_point_maze_trains_by_its_own_id_and_reports_its_success_key(tmp_path, env_id):
    results = her_rl.train(["algo=her_sac", "env=gym", f"env.id={env_id}", "budget.env_steps=600", *TINY],
                           out_dir=tmp_path / "run")
    assert 600 <= results["env_steps"] <= 600 + 3  # one lock-step of its 3 copies at most
    # the maze says success as info["success"]: read it, at the last step and at any step
    assert 0.0 <= results["eval_success_rate"] <= results["eval_any_success_rate"] <= 1.0
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert any("eval/any_success_rate" in row for row in rows)


@needs_robotics
def test_fetch_push_runs_by_its_gymnasium_id(tmp_path):
    results = her_rl.train(["algo=her_ddpg", "env=gym", "env.id=FetchPush-v4", "budget.env_steps=400", *TINY],
                           out_dir=tmp_path / "run")
    assert results["env_id"] == "FetchPush-v4" and "eval_success_rate" in results


@needs_panda
def test_panda_gym_trains_by_its_own_id_and_pybullet_prints_nothing(her_run, tmp_path):
    p = subprocess.run([her_run, "algo=her_sac", "env=gym", "env.id=PandaReach-v3", "budget.env_steps=200",
                        *TINY, f"hydra.run.dir={tmp_path / 'run'}"], cwd=tmp_path, capture_output=True,
                       text=True, env=ENV, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "argv[" not in p.stdout + p.stderr and "pybullet build time" not in p.stdout + p.stderr
    assert p.stdout.strip().splitlines()[-1].startswith(("solved", "not solved"))


SB3_BITFLIP = '''import gymnasium as gym
gym.register(id="SB3BitFlip-v0", entry_point="stable_baselines3.common.envs:BitFlippingEnv",
             kwargs={"n_bits": 6, "max_steps": 6}, max_episode_steps=6)
'''


@pytest.fixture
def fresh_sb3_bitflip():
    """The id and module the test's user module makes, absent while it runs and as they were after it
    (the Env families page registers the same id from a module of the same name)."""
    import gymnasium as gym

    saved = gym.registry.pop("SB3BitFlip-v0", None), sys.modules.pop("sb3_bitflip", None)
    yield
    gym.registry.pop("SB3BitFlip-v0", None)
    sys.modules.pop("sb3_bitflip", None)
    if saved[0] is not None:
        gym.registry["SB3BitFlip-v0"] = saved[0]
    if saved[1] is not None:
        sys.modules["sb3_bitflip"] = saved[1]


@needs_sb3
def test_sb3_bit_flipping_env_from_a_user_module_is_solved(tmp_path, monkeypatch, fresh_sb3_bitflip):
    (tmp_path / "sb3_bitflip.py").write_text(SB3_BITFLIP)
    monkeypatch.syspath_prepend(str(tmp_path))
    results = her_rl.train(["algo=her_dqn", "env=gym", "env.id=sb3_bitflip:SB3BitFlip-v0",
                            "budget.env_steps=20000", "progress=false", "eval.episodes=20"],
                           out_dir=tmp_path / "run")
    assert results["solved"] and results["eval_success_rate"] >= 0.9
    # the saved policy acts on the user's env as gymnasium.make builds it (the module is imported)
    report = her_rl.evaluate(her_rl.load(tmp_path / "run"), episodes=20)
    assert report["success_rate"] >= 0.9


@needs_robotics
@pytest.mark.parametrize("args, says", [
    (["env.id=gymnasium_robotics:PointMaze_UMaze-v3", "algo=her_dqn"], "algo 'her_dqn' acts in discrete"),
    (["env.id=FrankaKitchen-v1"], "env FrankaKitchen-v1: no learner of her-rl reads its observations")])
def test_a_refusal_is_its_one_line_with_no_notice_or_warning_of_the_family_before_it(her_run, tmp_path, args, says):
    p = subprocess.run([her_run, "env=gym", *args, f"hydra.run.dir={tmp_path / 'run'}"], cwd=tmp_path,
                       capture_output=True, text=True, env=ENV, timeout=300)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.startswith(f"her-run: error: {says}") and p.stderr.count("\n") == 1, p.stderr
    assert not (tmp_path / "run").exists()
