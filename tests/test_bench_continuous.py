"""scripts/bench_continuous.py: argument checks, the table, and one tiny run of ours (no SB3, no MuJoCo)."""

import json

import pytest
from conftest import load_script, unload_script


@pytest.fixture(scope="module")
def bench():
    yield load_script("bench_continuous")
    unload_script("bench_continuous")


@pytest.mark.parametrize("argv, message", [
    (["--eval-episodes", "10"], "at least 20"),
    (["--budget", "1000", "--eval-every", "300"], "multiple of --eval-every"),
    (["--envs", "push", "--sides", "ours", "--budget", "1000", "--eval-every", "500"], "whole number of her_sac cycles"),
])
def test_bad_arguments_are_refused(bench, capsys, argv, message):
    with pytest.raises(SystemExit) as exit_info:
        bench.main(argv)
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


def test_table_rows_and_medians(bench):
    row = {"env": "push", "side": "ours", "algo": "her_sac", "seed": 0, "target": 0.9, "reached": True,
           "steps_to_target": 8000, "wall_to_target": 3.5, "env_steps": 8000, "wall_s": 3.5, "final_success": 0.95,
           "best_success": 0.95, "curve": [(800, 1.0, 0.1), (8000, 3.5, 0.95)]}
    table = bench.format_table([row, {**row, "side": "sb3", "reached": False, "steps_to_target": None,
                                      "wall_to_target": None, "final_success": 0.5, "best_success": 0.5}])
    assert "| push | her_sac | 0 | 8,000 (>= 0.9) | 3.5 | 8,000 | 3.5 | 0.95 | 0.95 |" in table
    assert "| **push** | **SB3 SAC + HER** | 0/1 reached | - (median) |" in table
    assert bench.success_at(row, 5000) == 0.1 and bench.success_at(row, 100) is None


def test_a_tiny_run_of_ours_keeps_its_folder_and_curve(bench, tmp_path):
    out = tmp_path / "rows.json"
    assert bench.main(["--envs", "push", "--sides", "ours", "--budget", "1600", "--eval-every", "800",
                       "--override", "algo.updates_per_cycle=2", "--keep", str(tmp_path / "runs"),
                       "--json", str(out)]) == 0
    (row,) = json.loads(out.read_text())["rows"]
    assert [step for step, _, _ in row["curve"]] == [800, 1600] and row["env_steps"] == 1600
    assert (tmp_path / "runs" / "her_sac-push-s0" / "results.json").exists()
