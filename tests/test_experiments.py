"""Named experiments (conf/experiment/*.yaml) compose into the sweeps they promise."""

from pathlib import Path

import pytest
from hydra import compose, initialize_config_module

EXPERIMENTS = sorted(p.stem for p in (Path(__file__).parents[1] / "her_rl" / "conf" / "experiment").glob("*.yaml"))


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_experiment_presets_compose_and_pass_the_config_checks(name):
    from her_rl.config.checks import validate

    with initialize_config_module(config_module="her_rl.conf", version_base="1.3"):
        full = compose(config_name="config", overrides=[f"experiment={name}"], return_hydra_config=True)
        params = full.hydra.sweeper.params
        assert str(full.hydra.mode) == "RunMode.MULTIRUN" and params
        for i in (0, -1):  # the first and the last job of the sweep
            picks = [f"{key}={str(values).split(',')[i]}" for key, values in params.items()]
            validate(compose(config_name="config", overrides=[f"experiment={name}", *picks]))


def test_the_her_figure_sweeps_bits_and_strategies_at_one_budget():
    with initialize_config_module(config_module="her_rl.conf", version_base="1.3"):
        cfg = compose(config_name="config", overrides=["experiment=her_bitflip_figure"], return_hydra_config=True)
    params = cfg.hydra.sweeper.params
    assert set(str(params["algo.strategy"]).split(",")) == {"none", "final", "future"}
    assert len(str(params.n).split(",")) >= 5 and cfg.budget.env_steps > 0
