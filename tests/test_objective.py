"""her-run returns an objective, so Hydra's Optuna sweeper can tune it."""

import os

import forked
import pytest
import yaml

from her_rl.run.sweep import objective

ENV = {**os.environ, "HYDRA_FULL_ERROR": "0", "OMP_NUM_THREADS": "1"}


def test_objective_is_the_final_eval_metric_or_minus_the_steps_to_solve():
    goal = {"env_steps": 5000, "eval_success_rate": 0.75, "eval_return": -3.0, "solved_at_env_steps": None}
    assert objective(goal) == 0.75
    assert objective({"env_steps": 10, "eval_return": 200.0}) == 200.0
    assert objective(goal, "steps_to_solve") == -10000.0  # unsolved: twice the steps it used
    assert objective({**goal, "solved_at_env_steps": 1200}, "steps_to_solve") == -1200.0
    assert objective({"checkpoint": "x.pt", "eval_success_rate": 1.0}) is None  # load= evaluations


def test_optuna_sweeper_tunes_two_her_dqn_keys(her_run, tmp_path):
    pytest.importorskip("hydra_plugins.hydra_optuna_sweeper", reason="the tune extra (hydra-optuna-sweeper) is not installed")
    sweep = tmp_path / "opt"
    p = forked.run([her_run, "-m", "hydra/sweeper=optuna", "hydra.sweeper.n_trials=3", "hydra.sweeper.direction=maximize",
                    "algo.lr=interval(0.0001,0.01)", "algo.polyak=choice(0.5,0.9)", "n=4", "budget.env_steps=300",
                    "progress=false", f"hydra.sweep.dir={sweep}"], cwd=tmp_path, env=ENV,
                   text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    best = yaml.safe_load((sweep / "optimization_results.yaml").read_text())
    assert set(best["best_params"]) == {"algo.lr", "algo.polyak"} and 0.0 <= best["best_value"] <= 1.0
    assert (sweep / "summary.md").read_text().count("| algo.lr=") == 3
