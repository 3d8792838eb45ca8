"""A run folder made before the package was regrouped into rooms (commit f9a471e: her_dqn on 4-bit
flip, 200 env steps, no replay memory saved) still loads, evaluates with load= and resumes."""

import json
import shutil
from pathlib import Path

import numpy as np

import her_rl
from her_rl.folder import rundir
from her_rl.run import runner

FIXTURE = Path(__file__).parent / "fixtures" / "run_before_rooms"


def _copy(tmp_path: Path) -> Path:
    folder = tmp_path / "old"
    shutil.copytree(FIXTURE, folder)
    return folder


def test_an_old_run_folder_loads_as_a_policy(tmp_path):
    policy = her_rl.load(_copy(tmp_path))
    obs = {"observation": np.zeros(4, np.float32), "achieved_goal": np.zeros(4, np.float32),
           "desired_goal": np.ones(4, np.float32)}
    action, state = policy.predict(obs, deterministic=True)
    assert state is None and int(action) in range(4)


def test_an_old_run_folder_is_evaluated_by_load(tmp_path):
    folder = _copy(tmp_path)
    report = her_rl.train([f"load={folder}", "eval.episodes=10"])
    assert report["episodes"] == 10 and 0.0 <= report["eval_success_rate"] <= 1.0
    assert (folder / "eval.json").is_file()


def test_an_old_run_folder_resumes_to_a_larger_budget(tmp_path):
    folder = _copy(tmp_path)
    results = runner.main(["resume=true", "budget.env_steps=400", "progress=false"], out_dir=folder)
    assert results["env_steps"] >= 400 and results["checkpoint"] == str(folder / rundir.CHECKPOINT)
    events = [json.loads(line)["event"] for line in (folder / rundir.HISTORY).read_text().splitlines()]
    assert events[0] == "start" and "resume" in events[1:]
