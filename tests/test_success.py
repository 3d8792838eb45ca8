"""Success however the env says it, and TD targets bounded by the env's own reward range."""

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from her_rl.algos.hindsight import clip_to_return_range
from her_rl.rl.success import EpisodeSuccess, SuccessRule, return_bounds, reward_probe

HERE = Path(__file__).resolve().parent


def sparse(low, high):
    return lambda a, g, info: np.where(np.all(np.asarray(a) == np.asarray(g), axis=-1), high, low).astype(np.float32)


def test_success_is_read_from_is_success_then_success_then_a_named_key():
    assert SuccessRule().at_step({"is_success": np.array([1, 0])}, None).tolist() == [True, False]
    assert SuccessRule().at_step({"success": np.array([0, 1])}, None).tolist() == [False, True]
    # gymnasium's loop over copies marks which copies reported the key
    masked = {"success": np.array([True, True]), "_success": np.array([True, False])}
    assert SuccessRule().at_step(masked, None).tolist() == [True, False]
    assert SuccessRule("reached").at_step({"reached": [True], "is_success": [False]}, None).tolist() == [True]
    assert SuccessRule().at_step({}, None) is None  # a task without success: nothing to tell


def test_without_a_key_success_is_compute_reward_at_the_goal():
    reward = sparse(0.0, 1.0)
    rule = SuccessRule(goal_reward=1.0, compute_reward=reward)
    obs = {"achieved_goal": np.array([[1.0, 2.0], [0.0, 0.0]]), "desired_goal": np.array([[1.0, 2.0], [1.0, 0.0]])}
    assert rule.at_step({}, obs).tolist() == [True, False]


def test_last_step_and_any_step_success_are_kept_apart():
    track = EpisodeSuccess(SuccessRule(), 2)
    track.step({"success": np.array([True, False])}, None, live=np.array([True, True]))
    track.step({"success": np.array([False, False])}, None, live=np.array([True, True]))
    track.step({"success": np.array([True, True])}, None, live=np.array([True, False]))  # copy 1 has ended
    assert track.last.tolist() == [True, False] and track.any.tolist() == [True, False]
    assert track.rates() == {"success_rate": 0.5, "any_success_rate": 0.5}
    assert EpisodeSuccess(SuccessRule(), 2).rates() == {}  # never told: no metric, not 0.0


@pytest.mark.parametrize("low, high", [(-1.0, 0.0), (0.0, 1.0)])
def test_the_reward_range_is_probed_through_compute_reward(low, high):
    achieved = np.array([[0.0, 0.0], [1.0, 1.0], [2.0, 2.0]])
    desired = np.array([[3.0, 0.0], [1.0, 4.0], [0.0, 2.0]])
    probe = reward_probe(sparse(low, high), achieved, desired)
    assert probe.goal_reward == high and probe.bounds == (low, high)


def test_a_dense_reward_has_no_probed_range_unless_declared():
    dense = lambda a, g, info: -np.linalg.norm(np.asarray(a) - np.asarray(g), axis=-1)  # noqa: E731
    achieved, desired = np.array([[0.0, 0.0], [1.0, 1.0]]), np.array([[3.0, 0.0], [1.0, 5.0]])
    assert reward_probe(dense, achieved, desired).bounds is None
    assert reward_probe(dense, achieved, desired, declared=[-5, 0]).bounds == (-5.0, 0.0)


def test_targets_are_clamped_to_the_returns_of_the_env_reward_range():
    gamma = 0.9
    y = torch.tensor([-20.0, -5.0, 0.5, 5.0, 20.0])
    assert clip_to_return_range(y, gamma, (-1.0, 0.0)).tolist() == pytest.approx([-10.0, -5.0, 0.0, 0.0, 0.0])
    assert clip_to_return_range(y, gamma, (0.0, 1.0)).tolist() == pytest.approx([0.0, 0.0, 0.5, 5.0, 10.0])
    assert clip_to_return_range(y, gamma, None).tolist() == y.tolist()  # unknown range: not clamped
    assert return_bounds((0.0, 1.0), gamma) == pytest.approx((0.0, 10.0))


@pytest.fixture
def user_dir(tmp_path):
    shutil.copy(HERE / "grid_goal_variants.py", tmp_path / "grid_goal_variants.py")
    return tmp_path


@pytest.mark.parametrize("env_id, warns", [("GridSuccess-v0", False), ("GridZeroOne-v0", False),
                                           ("GridSilent-v0", True)])
def test_her_dqn_solves_a_grid_that_says_success_its_own_way(her_run, user_dir, env_id, warns):
    """info["success"] (the mazes' key), a 0/1 reward (every target clipped to 0 under a -1/0 bound),
    and no success in the info at all: each is solved with the defaults and reported as solved."""
    proc = subprocess.run([her_run, "env=gym", f"env.id=grid_goal_variants:{env_id}", "budget.env_steps=20000",
                           "progress=false", "hydra.run.dir=run"], capture_output=True, text=True, cwd=user_dir,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr
    results = json.loads((user_dir / "run" / "results.json").read_text())
    assert results["solved"] and results["eval_success_rate"] >= 0.9 and results["eval_any_success_rate"] >= 0.9
    warning = [line for line in proc.stderr.splitlines() if "success is read from compute_reward" in line]
    assert len(warning) == (1 if warns else 0), proc.stderr
    metrics = [json.loads(line) for line in (user_dir / "run" / "metrics.jsonl").read_text().splitlines()]
    assert any("eval/success_rate" in row and "eval/any_success_rate" in row for row in metrics)


def test_a_task_without_success_reports_no_success_metric(her_run, tmp_path):
    proc = subprocess.run([her_run, "algo=ppo", "env=cartpole", "budget.env_steps=1000", "progress=false",
                           "hydra.run.dir=run"], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert "eval_success_rate" not in results and "eval_any_success_rate" not in results
    assert 1000 <= results["env_steps"] <= 1000 + 8 * 32  # within one rollout of ppo's 8 x 32 steps
    metrics = (tmp_path / "run" / "metrics.jsonl").read_text()
    assert "success_rate" not in metrics
