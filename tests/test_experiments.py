"""Named experiments (conf/experiment/*.yaml) compose into the sweeps (or, *_frontier, the single runs) they promise."""

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
        if name.endswith("_frontier"):  # a single run's setting (seed=N picks the seed)
            pytest.importorskip("gymnasium_robotics", reason='the robotics extra is not installed (pip install -e ".[robotics]")')
            assert str(full.hydra.mode) != "RunMode.MULTIRUN" and not params
            validate(compose(config_name="config", overrides=[f"experiment={name}"]))
            return
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


def test_the_fetch_frontier_presets_hold_their_measured_settings():
    pytest.importorskip("gymnasium_robotics", reason='the robotics extra is not installed (pip install -e ".[robotics]")')
    with initialize_config_module(config_module="her_rl.conf", version_base="1.3"):
        push = compose(config_name="config", overrides=["experiment=fetch_push_frontier"])
        slide = compose(config_name="config", overrides=["experiment=fetch_slide_frontier"])
    assert (push.algo.name, push.env.id, push.algo.episodes_per_cycle, push.algo.updates_per_cycle) == \
        ("her_crossq", "FetchPush-v4", 2, 40)  # 0.4 updates per env step
    assert (push.budget.env_steps, push.eval.every_env_steps, push.eval.episodes) == (200_000, 10_000, 50)
    assert (slide.env.id, slide.algo.n_step, slide.algo.episodes_per_cycle, slide.budget.env_steps) == ("FetchSlide-v4", 3, 8, 1_000_000)
    assert (slide.algo.batch_size, slide.algo.precision) == (1024, "bfloat16")  # 0.6 held on 3 seeds
