"""her_rl/config/registry.py: algorithm and env names, the only _target_ each algo may name, and which algo fits which env."""

import sys
from pathlib import Path

import numpy as np
import pytest
from gymnasium import spaces

from her_rl.config import registry
from her_rl.algos.base import RUNTIME_ARGS
from her_rl.envs.probe import EnvSpaces
from her_rl.config.registry import (ALGOS, ENVS, accepted_params, action_kind, algo_info, target_of,
                                    build_agent, check_algo_keys, check_env_name, check_pairing, resolve_target)
from her_rl.errors import ConfigError

CONF_ENV = Path(registry.__file__).resolve().parents[1] / "conf" / "env"

BITS = spaces.MultiBinary(4)
GOAL_OBS = spaces.Dict({"observation": BITS, "achieved_goal": BITS, "desired_goal": BITS})
BOX_OBS = spaces.Box(-1.0, 1.0, (3,), np.float32)
GOAL_DISCRETE = EnvSpaces(GOAL_OBS, spaces.Discrete(4), goal_env=True)
GOAL_CONTINUOUS = EnvSpaces(GOAL_OBS, spaces.Box(-1.0, 1.0, (2,), np.float32), goal_env=True)
PLAIN_DISCRETE = EnvSpaces(BOX_OBS, spaces.Discrete(2), goal_env=False)
PLAIN_CONTINUOUS = EnvSpaces(BOX_OBS, spaces.Box(-2.0, 2.0, (1,), np.float32), goal_env=False)
GOAL_MULTI = EnvSpaces(GOAL_OBS, spaces.MultiDiscrete([2, 2]), goal_env=True)

HER_DISCRETE = ["her_dqn"]
HER_CONTINUOUS = ["her_ddpg", "her_sac", "her_td3", "her_redq", "her_crossq"]
ON_POLICY = ["reinforce", "ppo", "rnd_ppo"]


def one_line(exc_info) -> str:
    message = str(exc_info.value)
    assert "\n" not in message, message
    return message


# names --------------------------------------------------------------------------------------------------------------

def test_the_registered_algorithms():
    assert sorted(ALGOS) == sorted(HER_DISCRETE + HER_CONTINUOUS + ON_POLICY)
    for name in HER_DISCRETE + HER_CONTINUOUS:
        assert algo_info(name).needs_goal_env
    for name in ON_POLICY:
        assert not algo_info(name).needs_goal_env
        assert set(algo_info(name).action_spaces) == {"discrete", "continuous"}
    assert algo_info("her_dqn").action_spaces == ("discrete",)
    assert all(algo_info(name).action_spaces == ("continuous",) for name in HER_CONTINUOUS)


@pytest.mark.parametrize("name", ["nope", "HER_DQN", "", "her_dqn ", "dqn"])
def test_algo_info_refuses_an_unknown_name_listing_the_choices(name):
    with pytest.raises(ConfigError) as info:
        algo_info(name)
    message = one_line(info)
    assert message == f"unknown algo '{name}'; valid choices: {', '.join(sorted(ALGOS))}"


def test_envs_are_the_files_of_conf_env():
    files = sorted(p.stem for p in CONF_ENV.glob("*.yaml"))
    assert files and list(ENVS) == files
    assert {"bitflip", "cartpole", "pendulum", "gym"} <= set(ENVS)
    for name in ENVS:
        check_env_name(name)


@pytest.mark.parametrize("name", ["bitflp", "BitFlip", "her_rl/BitFlip-v0", "bitflip.yaml", "", "../config"])
def test_check_env_name_refuses_an_unknown_name_listing_the_choices(name):
    with pytest.raises(ConfigError) as info:
        check_env_name(name)
    assert one_line(info) == f"unknown env '{name}'; valid choices: {', '.join(ENVS)}"


# _target_ -----------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(ALGOS))
def test_resolve_target_gives_the_registered_class(name):
    target = target_of(name)
    cls = resolve_target(name, None)
    assert isinstance(cls, type) and f"{cls.__module__}.{cls.__qualname__}" == target
    assert resolve_target(name, target) is cls


@pytest.mark.parametrize("target", ["os.system", "subprocess.Popen", "builtins.eval", "her_rl.algos.ppo.PPO",
                                    "her_rl.algos.her_dqn.HerDQN ", ""])
def test_resolve_target_refuses_any_other_target(target):
    with pytest.raises(ConfigError) as info:
        resolve_target("her_dqn", target)
    message = one_line(info)
    assert f"_target_ '{target}'" in message and "'her_rl.algos.her_dqn.HerDQN'" in message
    assert "only registered builders may be used" in message


def test_a_refused_target_is_never_imported(tmp_path, monkeypatch):
    mark = tmp_path / "imported"
    (tmp_path / "her_rl_test_payload.py").write_text(
        f"from pathlib import Path\nPath({str(mark)!r}).write_text('ran')\nclass Evil:\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        with pytest.raises(ConfigError):
            resolve_target("ppo", "her_rl_test_payload.Evil")
        with pytest.raises(ConfigError):
            build_agent({"name": "ppo", "_target_": "her_rl_test_payload.Evil"})
        assert not mark.exists() and "her_rl_test_payload" not in sys.modules
    finally:
        sys.modules.pop("her_rl_test_payload", None)


def test_resolve_target_refuses_an_unknown_algo():
    with pytest.raises(ConfigError, match=r"^unknown algo 'os'; valid choices: "):
        resolve_target("os", "os.system")


# pairing ------------------------------------------------------------------------------------------------------------

def test_action_kind():
    assert action_kind(spaces.Discrete(3)) == "discrete"
    assert action_kind(spaces.Box(-1, 1, (2,))) == "continuous"
    assert action_kind(spaces.MultiDiscrete([2, 2])) is None
    assert action_kind(spaces.MultiBinary(3)) is None


@pytest.mark.parametrize("algo, env_spaces", [
    *[(name, GOAL_DISCRETE) for name in HER_DISCRETE],
    *[(name, GOAL_CONTINUOUS) for name in HER_CONTINUOUS],
    *[(name, spaces_) for name in ON_POLICY for spaces_ in (PLAIN_DISCRETE, PLAIN_CONTINUOUS, GOAL_DISCRETE)],
])
def test_check_pairing_accepts_what_the_algorithm_can_learn(algo, env_spaces):
    check_pairing(algo, "some_env", "Some-v0", env_spaces)


@pytest.mark.parametrize("algo", HER_DISCRETE)
def test_a_discrete_action_learner_is_refused_on_a_continuous_goal_env(algo):
    with pytest.raises(ConfigError) as info:
        check_pairing(algo, "push", "her_rl/Push-v0", GOAL_CONTINUOUS)
    message = one_line(info)
    assert message.startswith(f"algo '{algo}' acts in discrete action spaces; 'push' (her_rl/Push-v0) has action space Box")


@pytest.mark.parametrize("algo", HER_CONTINUOUS)
def test_a_continuous_action_learner_is_refused_on_a_discrete_goal_env(algo):
    with pytest.raises(ConfigError) as info:
        check_pairing(algo, "bitflip", "her_rl/BitFlip-v0", GOAL_DISCRETE)
    assert one_line(info) == (f"algo '{algo}' acts in continuous action spaces; 'bitflip' (her_rl/BitFlip-v0) has "
                              "action space Discrete(4) (algo=her_dqn fits it; with no algo= her-rl picks that)")


@pytest.mark.parametrize("algo", HER_DISCRETE + HER_CONTINUOUS)
@pytest.mark.parametrize("env_spaces", [PLAIN_DISCRETE, PLAIN_CONTINUOUS])
def test_a_her_learner_is_refused_on_a_non_goal_env(algo, env_spaces):
    with pytest.raises(ConfigError) as info:
        check_pairing(algo, "cartpole", "CartPole-v1", env_spaces)
    message = one_line(info)
    assert message.startswith(f"algo '{algo}' needs a goal-conditioned env")
    assert message.endswith("'cartpole' (CartPole-v1) has none (algo=ppo fits it; with no algo= her-rl picks that)")


@pytest.mark.parametrize("algo", sorted(ALGOS))
def test_an_action_space_no_algorithm_acts_in_is_refused(algo):
    with pytest.raises(ConfigError) as info:
        check_pairing(algo, "multi", "Multi-v0", GOAL_MULTI)
    assert "MultiDiscrete" in one_line(info)


def test_check_pairing_refuses_an_unknown_algo():
    with pytest.raises(ConfigError, match="^unknown algo 'dqn'"):
        check_pairing("dqn", "bitflip", "her_rl/BitFlip-v0", GOAL_DISCRETE)


def test_check_pairing_on_probed_envs():
    from her_rl.envs.probe import probe_env

    bitflip = probe_env({"name": "bitflip", "id": "her_rl/BitFlip-v0", "kwargs": {"n": 4}})
    pendulum = probe_env({"name": "pendulum", "id": "Pendulum-v1", "kwargs": {}})
    assert bitflip.goal_env and not pendulum.goal_env
    check_pairing("her_dqn", "bitflip", "her_rl/BitFlip-v0", bitflip)
    check_pairing("ppo", "pendulum", "Pendulum-v1", pendulum)
    with pytest.raises(ConfigError, match="acts in continuous action spaces"):
        check_pairing("her_ddpg", "bitflip", "her_rl/BitFlip-v0", bitflip)
    with pytest.raises(ConfigError, match="needs a goal-conditioned env"):
        check_pairing("her_sac", "pendulum", "Pendulum-v1", pendulum)


# hyperparameters ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(ALGOS))
def test_accepted_params_are_hyperparameters_only(name):
    params = accepted_params(name)
    assert params and len(params) == len(set(params))
    assert not set(params) & set(RUNTIME_ARGS)
    assert any("lr" in p for p in params)  # every learner has a learning rate


def test_accepted_params_of_her_dqn():
    params = set(accepted_params("her_dqn"))
    assert {"lr", "gamma", "hidden", "k", "strategy", "batch_size", "buffer_size"} <= params
    assert {"env", "seed", "device", "inference", "name", "_target_"}.isdisjoint(params)


def test_check_algo_keys_accepts_its_params_name_and_target():
    check_algo_keys("her_dqn", ["name", "_target_", *accepted_params("her_dqn")])
    check_algo_keys("ppo", [])


@pytest.mark.parametrize("keys, unknown", [(["lrr"], ["lrr"]), (["lr", "zz", "aa"], ["aa", "zz"]),
                                           (["seed"], ["seed"]), (["env", "device"], ["device", "env"])])
def test_check_algo_keys_refuses_unknown_and_runtime_keys(keys, unknown):
    with pytest.raises(ConfigError) as info:
        check_algo_keys("her_dqn", keys)
    message = one_line(info)
    assert message == (f"algo 'her_dqn' has no parameter(s) {unknown}; accepted: "
                       f"{', '.join(sorted(accepted_params('her_dqn')))}")


def test_build_agent_refuses_an_unknown_key_before_building():
    with pytest.raises(ConfigError, match=r"^algo 'ppo' has no parameter\(s\) \['learning_rate'\]"):
        build_agent({"name": "ppo", "_target_": target_of("ppo"), "learning_rate": 0.1}, env=None, seed=0)
