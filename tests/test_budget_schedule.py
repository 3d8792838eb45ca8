"""The hindsight learners' schedule follows env steps, and a budget is honoured to one lock-step.

A 300-step env gets about as many env steps per cycle as a 50-step one (fewer, longer episodes) and
the same gradient steps per env step; a budget of B env steps ends at B plus at most one lock-step
of the batched envs, 300-step episodes included (the episodes still running are cut there)."""

import shutil
from pathlib import Path

import pytest

import her_rl
from her_rl.algos.cycle import PAPER_EPISODES, PAPER_HORIZON, cycle_episodes, updates_for_cycle

HERE = Path(__file__).resolve().parent


@pytest.mark.parametrize("horizon, episodes", [(10, 16), (50, 16), (100, 8), (300, 3), (700, 1), (5000, 1)])
def test_episodes_per_cycle_follow_the_episode_length(horizon, episodes):
    assert cycle_episodes(None, horizon) == episodes
    assert cycle_episodes(5, horizon) == 5  # a given value is kept


def test_a_300_step_env_gets_the_update_to_data_ratio_of_a_50_step_one():
    short = updates_for_cycle(40, None, PAPER_EPISODES * PAPER_HORIZON, PAPER_HORIZON) / (PAPER_EPISODES * PAPER_HORIZON)
    steps = cycle_episodes(None, 300) * 300
    long = updates_for_cycle(40, None, steps, 300) / steps
    assert long == pytest.approx(short, rel=0.1)
    assert updates_for_cycle(40, 0.5, 900, 300) == 450  # updates_per_step wins when set


@pytest.fixture
def user_dir(tmp_path, monkeypatch):
    shutil.copy(HERE / "grid_goal_variants.py", tmp_path / "grid_goal_variants.py")
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


@pytest.mark.parametrize("budget", [1, 299, 1000])
def test_a_budget_ends_within_one_lock_step_on_300_step_episodes(user_dir, budget):
    results = her_rl.train(["algo=her_dqn", "env=gym", "env.id=grid_goal_variants:GridZeroOne-v0",
                            "+env.kwargs.max_steps=300", "+env.kwargs.max_episode_steps=300", "+env.kwargs.terminate=false", "+env.kwargs.size=40",
                            f"budget.env_steps={budget}", "eval.episodes=2", "progress=false", "algo.hidden=[16]",
                            "algo.batch_size=16"], out_dir=user_dir / f"run{budget}")
    assert budget <= results["env_steps"] <= budget + cycle_episodes(None, 300)
