"""Config composition: groups, per-pair tuned settings, and value checks."""

import pytest

from her_rl.config.checks import validate
from her_rl.errors import ConfigError
from her_rl.config.compose import compose


def test_defaults_compose_and_validate():
    cfg = compose([])
    validate(cfg)
    assert (cfg.algo.name, cfg.env.name, cfg.n, cfg.eval.episodes) == ("her_dqn", "bitflip", 15, 100)
    assert cfg.env.kwargs.n == 15


def test_tuned_pair_settings_apply_and_command_line_still_wins():
    assert compose(["algo=rnd_ppo", "env=deep_sea"]).algo.normalize_obs is False
    assert compose(["algo=rnd_ppo", "env=mountaincar"]).algo.normalize_obs is True
    assert compose(["algo=rnd_ppo", "env=deep_sea", "algo.normalize_obs=true"]).algo.normalize_obs is True
    pendulum, cartpole = compose(["algo=ppo", "env=pendulum"]), compose(["algo=ppo", "env=cartpole"])
    assert pendulum.algo.num_steps == 256 and cartpole.algo.num_steps == 32


def test_env_groups_set_their_evaluation_size():
    assert compose(["algo=ppo", "env=cartpole"]).eval.episodes == 20
    assert compose(["algo=ppo", "env=cartpole", "eval.episodes=5"]).eval.episodes == 5


@pytest.mark.parametrize("override, message", [
    ("eval.success_threshold=1.5", "success_threshold"),
    ("budget.env_steps=0", "budget.env_steps"),
    ("device=tpu", "device must be one of"),
    ("threads=0", "threads"),
    ("seed=-1", "seed"),
])
def test_invalid_values_are_config_errors(override, message):
    with pytest.raises(ConfigError, match=message):
        validate(compose([override]))
