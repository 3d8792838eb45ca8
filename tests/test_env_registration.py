"""Env ids register on ``import her_rl``; gymnasium.make / make_vec and our make_vec build the right classes."""

import json
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
from omegaconf import OmegaConf

import her_rl
from her_rl.envs import make_vec
from her_rl.envs.bitflip import BitFlipEnv, BitFlipVectorEnv
from her_rl.envs.drag import DragVectorEnv
from her_rl.envs.push import PushVectorEnv
from her_rl.envs.table_settings import check_table_kwargs
from her_rl.errors import ConfigError
from her_rl.config.compose import compose

IDS = ["her_rl/BitFlip-v0", "her_rl/Push-v0", "her_rl/Drag-v0", "her_rl/DeepSea-v0"]


def test_import_her_rl_registers_every_id_in_a_fresh_interpreter():
    code = f"""
import json, gymnasium as gym, her_rl
out = {{}}
for env_id in {IDS!r}:
    env = gym.make(env_id)
    env.reset(seed=0)
    out[env_id] = [type(env.unwrapped).__name__, type(gym.make_vec(env_id, num_envs=3)).__name__,
                   env.spec.max_episode_steps]
print(json.dumps(out))
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout.strip().splitlines()[-1])
    for env_id in IDS:
        single, batched, limit = out[env_id]
        assert batched == single.replace("Env", "VectorEnv")  # the vector entry point, not a sync loop
        assert limit is None  # no TimeLimit wrapper: the envs truncate themselves


@pytest.mark.parametrize("name, cls", [("push", PushVectorEnv), ("drag", DragVectorEnv)])
def test_config_groups_build_the_batched_env_and_forward_kwargs(name, cls):
    cfg = OmegaConf.to_container(compose([f"env={name}", "algo=her_dqn"]).env, resolve=True)
    assert cfg["name"] == name and cfg["solved_return"] is None and cfg["eval_episodes"] == 100
    defaults = check_table_kwargs(name)
    assert check_table_kwargs(name, **cfg["kwargs"]) == defaults  # the group holds the defaults
    envs = make_vec(cfg, 5, seed=0)
    assert isinstance(envs, cls) and envs.max_episode_steps == 50 and envs.action_space.shape == (5,)
    cfg["kwargs"].update(actions="continuous", max_episode_steps=7)
    envs = make_vec(cfg, 5, seed=0)
    assert envs.max_episode_steps == 7 and envs.single_action_space.shape == ((3,) if name == "drag" else (2,))


@pytest.mark.parametrize("env_id, kwargs", [("her_rl/Push-v0", {}), ("her_rl/BitFlip-v0", {"n": 6})])
def test_make_vec_is_reproducible_for_a_seed(env_id, kwargs):
    cfg = {"name": "x", "id": env_id, "kwargs": kwargs}
    first = [make_vec(cfg, 8, seed=s).reset()[0]["desired_goal"] for s in (1, 1, 2)]
    np.testing.assert_array_equal(first[0], first[1])
    assert not np.array_equal(first[0], first[2])


def test_make_vec_turns_unknown_ids_and_bad_kwargs_into_one_line_config_errors():
    with pytest.raises(ConfigError, match="unknown gymnasium env id"):
        make_vec({"name": "x", "id": "her_rl/NoSuch-v0", "kwargs": {}}, 2)
    for kwargs, key in [({"block_size": 2.0}, "block_size"), ({"colour": "red"}, "colour")]:
        with pytest.raises(ConfigError, match=key) as err:
            make_vec({"name": "push", "id": "her_rl/Push-v0", "kwargs": kwargs}, 2)
        assert "\n" not in str(err.value)


def test_bitflip_goal_env_additions():
    env, envs = BitFlipEnv(n=5), BitFlipVectorEnv(3, n=5)
    assert env.max_episode_steps == envs.max_episode_steps == 5
    a = np.array([[0, 1, 1], [1, 1, 1]])
    assert env.compute_terminated(a, np.ones_like(a), None).tolist() == [False, True]
    assert envs.compute_terminated(a[None], np.ones_like(a)[None], None).shape == (1, 2)
