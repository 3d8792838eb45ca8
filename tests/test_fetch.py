"""The MuJoCo Fetch tasks (the robotics extra): configs, vector envs, what a hindsight learner reads.

Tests that build a Fetch env are skipped when gymnasium_robotics or mujoco cannot be imported (CI
installs them: ``make install-extras``; ``pip install -e ".[robotics]"`` does too). The refusals
without the extra run always: the missing packages are simulated, nothing is uninstalled.
"""

import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest
from gymnasium import spaces

import her_rl  # noqa: F401  (registers the env ids)
from her_rl.envs import families, fetch
from her_rl.errors import ConfigError
from her_rl.config.registry import ENVS

FETCH = {"fetch_reach": "FetchReach-v4", "fetch_push": "FetchPush-v4", "fetch_slide": "FetchSlide-v4",
         "fetch_pick_and_place": "FetchPickAndPlace-v4"}
MISSING = [m for m in ("gymnasium_robotics", "mujoco") if importlib.util.find_spec(m) is None]
needs_robotics = pytest.mark.skipif(bool(MISSING), reason=f"robotics extra not installed ({', '.join(MISSING)} "
                                    "missing): pip install -e \".[robotics]\"")
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def _one_line_refusal(p) -> str:
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert "Traceback" not in p.stderr and p.stderr.strip().count("\n") == 0, p.stderr
    assert p.stderr.startswith("her-run: error: ")
    return p.stderr.strip()


# ---- without the extra (always run) -----------------------------------------------------------

def test_fetch_names_are_env_groups():
    assert set(FETCH) <= set(ENVS)
    assert not fetch.needs_robotics("her_rl/Push-v0") and fetch.needs_robotics("FetchPush-v4")
    families.ensure_registered("CartPole-v1")  # other ids: nothing imported, nothing refused


@pytest.mark.parametrize("blocked", ["gymnasium_robotics", "mujoco"])
def test_missing_extra_is_one_line_naming_the_install_command(monkeypatch, blocked):
    monkeypatch.setitem(sys.modules, blocked, None)  # `import blocked` now raises ImportError
    with pytest.raises(ConfigError) as err:
        families.ensure_registered("FetchPush-v4", "fetch_push")
    message = str(err.value)
    assert message.startswith("env 'fetch_push' needs the robotics extra") and "\n" not in message
    assert 'pip install -e ".[robotics]" (gymnasium-robotics 1.4.2, mujoco 3.3.7)' in message


def test_mujoco_4_is_refused(monkeypatch):
    monkeypatch.setitem(sys.modules, "mujoco", type(sys)("mujoco"))
    sys.modules["mujoco"].__version__ = "4.0.0"
    with pytest.raises(ConfigError, match=r"needs mujoco 3.x; mujoco 4.0.0 is installed: pip install"):
        families.ensure_registered("FetchReach-v4", "fetch_reach")


def test_make_vec_and_the_config_probe_refuse_without_the_extra(monkeypatch):
    from her_rl.envs.probe import probe_env
    from her_rl.envs import make_vec

    monkeypatch.setitem(sys.modules, "gymnasium_robotics", None)
    cfg = {"name": "fetch_slide", "id": "FetchSlide-v4", "kwargs": {}, "vectorization": "sync"}
    for build in (lambda: make_vec(cfg, 2), lambda: probe_env(cfg)):
        with pytest.raises(ConfigError, match=r"env 'fetch_slide' needs the robotics extra"):
            build()


def test_her_run_without_the_extra_exits_2_with_one_line_and_no_folder(her_run, tmp_path):
    for module in ("mujoco", "gymnasium_robotics"):  # found before site-packages: importing them fails
        shadow = tmp_path / "shadow" / module
        shadow.mkdir(parents=True)
        (shadow / "__init__.py").write_text(f"raise ModuleNotFoundError({f'No module named {module!r}'!r}, "
                                            f"name={module!r})\n")
    work = tmp_path / "work"
    work.mkdir()
    p = subprocess.run([her_run, "env=fetch_push", "progress=false"], cwd=work, capture_output=True, text=True,
                       env={**ENV, "PYTHONPATH": str(tmp_path / "shadow")}, timeout=120)
    line = _one_line_refusal(p)
    assert line == ('her-run: error: env \'fetch_push\' needs the robotics extra (mujoco is not installed): '
                    'pip install -e ".[robotics]" (gymnasium-robotics 1.4.2, mujoco 3.3.7)')
    assert list(work.iterdir()) == []


def test_vectorization_key_is_checked():
    from her_rl.config import checks

    env = {"name": "fetch_push", "id": "FetchPush-v4", "kwargs": {}, "solved_return": None, "eval_episodes": 20}
    for mode in ("sync", "async", None):
        checks.check_env({**env, "vectorization": mode})
    with pytest.raises(ConfigError, match=r"env.vectorization='threads' is not allowed: .* one of sync, async"):
        checks.check_env({**env, "vectorization": "threads"})


# ---- with the extra -------------------------------------------------------------------------

@needs_robotics
@pytest.mark.parametrize("name", sorted(FETCH))
def test_each_fetch_config_composes_and_builds(name):
    from her_rl.rl.her import goal_env_spec
    from her_rl.config.checks import resolved
    from her_rl.envs.probe import probe_env
    from her_rl.envs import make_vec
    from her_rl.config.compose import compose
    from her_rl.config.checks import check_env

    env_cfg = resolved(compose([f"env={name}", "algo=her_dqn"]))["env"]
    assert env_cfg["id"] == FETCH[name] and env_cfg["vectorization"] in fetch.VECTORIZATION
    check_env(env_cfg)
    probed = probe_env(env_cfg)
    assert probed.goal_env and isinstance(probed.action_space, spaces.Box)
    envs = make_vec(env_cfg, 2, seed=0)
    try:
        spec = goal_env_spec(envs, env_cfg, "test")
        assert spec.horizon == 50 and not spec.binary
        assert isinstance(spec.action_space, spaces.Box) and spec.action_space.shape == (4,)
        assert spec.obs_dtype == np.float32 and spec.goal_dtype == np.float32 and spec.goal_shape == (3,)
        assert spec.obs_shape == ((10,) if name == "fetch_reach" else (25,))
        far = np.zeros((3, 3)), np.full((3, 3), 1.0)
        np.testing.assert_array_equal(spec.compute_reward(*far, None), [-1.0, -1.0, -1.0])
        np.testing.assert_array_equal(spec.compute_reward(far[0], far[0] + 0.04 / np.sqrt(3), None), [0.0] * 3)
    finally:
        envs.close()


@needs_robotics
@pytest.mark.parametrize("mode", fetch.VECTORIZATION)
def test_relabelled_rewards_match_compute_reward_of_the_new_goal(mode):
    from her_rl.envs import make_vec
    from her_rl.rl.her import HindsightMemory, HindsightSettings, collect_episodes, goal_env_spec

    env_cfg = {"name": "fetch_push", "id": "FetchPush-v4", "kwargs": {}, "vectorization": mode}
    envs = make_vec(env_cfg, 3, seed=0)
    try:
        assert type(envs).__name__ == ("SyncVectorEnv" if mode == "sync" else "GoalVectorEnv")
        spec = goal_env_spec(envs, env_cfg, "test")
        assert spec.horizon == 50 and spec.compute_terminated is not None
        episodes = collect_episodes(envs, spec, lambda obs: envs.action_space.sample(), seed=1)
    finally:
        envs.close()
    assert episodes["obs"].shape == (3, 51, 25) and episodes["action"].shape == (3, 50, 4)
    assert (episodes["length"] == 50).all() and (episodes["returns"] <= 0).all()
    memory = HindsightMemory(spec, HindsightSettings(buffer_size=8 * spec.horizon, strategy="future", k=4), seed=0)
    memory.remember(*(episodes[k] for k in ("obs", "achieved_goal", "desired_goal", "action", "length")))
    batch = memory.sample(2000)
    next_object = batch["next_obs"][:, 3:6]  # FetchPush observation: grip position, then object position
    by_hand = -(np.linalg.norm(next_object - batch["goal"], axis=-1) > 0.05).astype(np.float32)
    np.testing.assert_array_equal(batch["reward"], by_hand)
    np.testing.assert_array_equal(batch["reward"], spec.compute_reward(next_object, batch["goal"], None))
    relabelled = ~np.isin(batch["goal"][:, 0], episodes["desired_goal"][:, 0])
    assert relabelled.mean() > 0.6 and (batch["reward"][relabelled] == 0).any() and not batch["terminated"].any()


@needs_robotics
def test_her_dqn_is_refused_on_fetch_box_actions(her_run, tmp_path):
    p = subprocess.run([her_run, "algo=her_dqn", "env=fetch_reach", "progress=false"], cwd=tmp_path,
                       capture_output=True, text=True, env=ENV, timeout=120)
    line = _one_line_refusal(p)
    assert "algo 'her_dqn' acts in discrete action spaces; 'fetch_reach' (FetchReach-v4) has action space Box" in line
    assert list(tmp_path.iterdir()) == []
