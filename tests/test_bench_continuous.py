"""scripts/bench_continuous.py over bench.continuous: argument checks, the table, one tiny run
of ours, one against a stand-in peer, and SB3 only when it is installed (no MuJoCo)."""

import json

import pytest
from conftest import load_script, unload_script

from bench import continuous, peers, zoo


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


def test_without_sb3_the_sb3_side_is_refused_in_one_line(bench, capsys, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "stable_baselines3", None)
    with pytest.raises(SystemExit) as exit_info:
        bench.main(["--envs", "push", "--sides", "sb3", "--budget", "800", "--eval-every", "800"])
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_info.value.code == 2 and "error: stable-baselines3 is not installed" in err[-1]


def test_table_rows_and_medians():
    row = {"env": "push", "side": "ours", "algo": "her_sac", "seed": 0, "target": 0.9, "reached": True,
           "steps_to_target": 8000, "wall_to_target": 3.5, "env_steps": 8000, "wall_s": 3.5, "final_success": 0.95,
           "best_success": 0.95, "curve": [(800, 1.0, 0.1), (8000, 3.5, 0.95)]}
    table = continuous.format_table([row, {**row, "side": "sb3", "reached": False, "steps_to_target": None,
                                           "wall_to_target": None, "final_success": 0.5, "best_success": 0.5}])
    assert "|---|---|---:|---:|---:|---:|---:|---:|---:|" in table
    assert "| push | her_sac | 0 | 8,000 (>= 0.9) | 3.5 | 8,000 | 3.5 | 0.95 | 0.95 |" in table
    assert "| **push** | **SB3 SAC + HER** | 0/1 reached | - (median) | - (median) | | | | |" in table
    assert "| **push** | **her_sac** | 1/1 reached | 8,000 (median) | 3.5 (median) | | | | |" in table
    assert continuous.success_at(row, 5000) == 0.1 and continuous.success_at(row, 100) is None


def test_a_tiny_run_of_ours_keeps_its_folder_and_curve(bench, tmp_path):
    out = tmp_path / "rows.json"
    assert bench.main(["--envs", "push", "--sides", "ours", "--budget", "1600", "--eval-every", "800",
                       "--override", "algo.updates_per_cycle=2", "--keep", str(tmp_path / "runs"),
                       "--json", str(out)]) == 0
    (row,) = json.loads(out.read_text())["rows"]
    assert [step for step, _, _ in row["curve"]] == [800, 1600] and row["env_steps"] == 1600
    assert (tmp_path / "runs" / "her_sac-push-s0" / "results.json").exists()


def test_a_stand_in_peer_gets_the_protocol_and_its_rows_are_read_back(bench, tmp_path, monkeypatch, capsys):
    asked = []

    def stand_in(env_id, kwargs, seed, protocol, episodes, horizon):
        asked.append((env_id, kwargs, seed, protocol, episodes, horizon))
        return peers.PeerRun([(800, 2.0, 0.4), (1600, 4.0, 0.95)], 1600, 4.1)

    monkeypatch.setattr(peers, "missing", lambda: None)
    monkeypatch.setattr(zoo, "sac_her", stand_in)
    out = tmp_path / "rows.json"
    assert bench.main(["--envs", "drag", "--sides", "sb3", "--seeds", "3", "--budget", "1600", "--eval-every", "800",
                       "--stop-at-target", "--sb3-max-seconds", "60", "--json", str(out)]) == 0
    assert asked == [("her_rl/Drag-v0", {"actions": "continuous"}, 3,
                      peers.Protocol(800, 1600, 0.9, 60.0, cap_at_evals=True), 20, 50)]
    (row,) = json.loads(out.read_text())["rows"]
    assert (row["reached"], row["steps_to_target"], row["wall_to_target"], row["final_success"]) == (True, 1600, 4.0, 0.95)
    assert row["curve"] == [[800, 2.0, 0.4], [1600, 4.0, 0.95]] and row["side"] == "sb3"
    assert "| drag | SB3 SAC + HER | 3 | 1,600 (>= 0.9) | 4.0 | 1,600 | 4.0 | 0.95 | 0.95 |" in capsys.readouterr().out


def test_the_sb3_peer_runs_its_budget_on_continuous_push():
    pytest.importorskip("stable_baselines3", reason="stable-baselines3 (the bench extra) is not installed")
    run = zoo.sac_her("her_rl/Push-v0", {"actions": "continuous"}, 0, peers.Protocol(100, 200), episodes=20)
    assert [step for step, _, _ in run.curve] == [100, 200] and run.env_steps == 200
    assert all(0.0 <= value <= 1.0 for _, _, value in run.curve)
