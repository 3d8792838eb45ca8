"""bench: what the benchmark scripts share (medians with unsolved seeds, the job loop, the
JSON report, a run of ours read back from its metrics file)."""

import json
import os
from pathlib import Path

import pytest

from bench import each_result, first_reaching, run_ours, to_target, write_report


def _row(reached, steps, wall, ran=10_000, ran_s=60.0):
    return {"reached": reached, "steps_to_target": steps if reached else None, "wall_to_target": wall if reached else None,
            "env_steps": ran, "wall_s": ran_s}


def test_a_seed_that_missed_the_target_counts_as_more_than_it_ran():
    hit = [_row(True, 1000, 5.0), _row(True, 3000, 9.0)]
    assert to_target(hit) == (2, 2000, 7.0)
    assert to_target([*hit, _row(True, 2000, 6.0), _row(False, 0, 0)]) == (3, 2500, 7.5)  # above the middle: exact
    assert to_target([*hit, _row(False, 0, 0, ran=1500, ran_s=4.0)]) == (2, None, None)  # at the middle: a bound only
    assert to_target([_row(False, 0, 0)]) == (0, None, None) and to_target([]) == (0, None, None)
    assert first_reaching([(800, 1.0, 0.5), (1600, 2.0, 0.9), (2400, 3.0, 1.0)], 0.9) == (1600, 2.0, 0.9)
    assert first_reaching([(800, 1.0, 0.5)], 0.9) is None


def _pid(job):
    return job, os.getpid()


def test_jobs_run_in_order_here_or_one_fresh_process_each():
    assert list(each_result(_pid, [1, 2, 3])) == [(1, os.getpid()), (2, os.getpid()), (3, os.getpid())]
    results = list(each_result(_pid, [1, 2, 3], at_once=2))
    assert [job for job, _ in results] == [1, 2, 3]
    assert len({pid for _, pid in results} | {os.getpid()}) == 4


def test_the_report_is_rewritten_whole_with_paths_as_text(tmp_path):
    path = tmp_path / "deep" / "rows.json"
    write_report(path, {"settings": {"json": path, "seeds": [0, 1]}, "rows": [{"curve": [(800, 1.0, 0.5)]}]})
    write_report(path, {"settings": {"json": path}, "rows": []})
    assert json.loads(path.read_text()) == {"settings": {"json": str(path)}, "rows": []}
    assert [p.name for p in path.parent.iterdir()] == ["rows.json"]  # no temporary file left


def test_a_run_of_ours_is_read_back_from_its_metrics_even_from_a_temporary_folder(tmp_path, capsys):
    run = run_ours(["n=4", "progress=false", "budget.env_steps=300", "eval.every_env_steps=100",
                    "eval.stop_when_solved=false"])
    assert "steps ->" not in capsys.readouterr().out  # the run's own line goes to stderr
    assert not Path(run.results["checkpoint"]).parent.exists()
    curve = run.curve()
    assert [s for s, _, _ in curve] == [p.step for p in run.metrics["eval/success_rate"]] and len(curve) >= 3
    assert curve[-1][0] == run.results["env_steps"] and curve[-1][2] == round(run.results["eval_success_rate"], 3)
    assert all(0 < wall < 60 for _, wall, _ in curve) and [w for _, w, _ in curve] == sorted(w for _, w, _ in curve)
    assert run.first_step_above("charts/success_rate", -1.0) == run.metrics["charts/success_rate"][0].step
    assert run.first_step_above("charts/success_rate", 1.0) is None
    kept = run_ours(["n=4", "progress=false", "budget.env_steps=100"], tmp_path / "kept")
    assert (tmp_path / "kept" / "metrics.jsonl").is_file() and kept.metrics["charts/SPS"]


def test_rows_are_written_as_json_after_every_run_and_read_back(tmp_path):
    import argparse

    from bench import Row, run_jobs, write_rows

    path = tmp_path / "rows.json"
    seen = []

    def run(job):
        seen.append(json.loads(path.read_text())["rows"] if path.exists() else None)
        return Row("ours", job, True, 100 * job, 1.5)

    settings = argparse.Namespace(seeds=[1, 2], json=path)
    assert run_jobs(run, [1, 2], path=path, settings=settings) == [Row("ours", 1, True, 100, 1.5),
                                                                   Row("ours", 2, True, 200, 1.5)]
    assert seen == [None, [{"side": "ours", "seed": 1, "solved": True, "env_steps": 100, "wall_s": 1.5, "n": 0}]]
    assert json.loads(path.read_text()) == {"settings": {"seeds": [1, 2], "json": str(path)},
                                            "rows": [{"side": "ours", "seed": s, "solved": True, "env_steps": 100 * s,
                                                      "wall_s": 1.5, "n": 0} for s in (1, 2)]}
    write_rows(path, {"ours": [{"seed": 0}]}, summary={"ours": 1}, args=settings)
    assert list(json.loads(path.read_text())) == ["rows", "summary", "args"]


def test_a_row_is_read_off_its_curve_where_it_first_reaches_the_target():
    from bench import Row, solve_row, target_row

    curve = [(800, 1.0, 0.5), (1600, 2.0, 0.92), (2400, 3.0, 0.85)]
    assert solve_row("sb3", 1, 20, curve, 0.9, (2400, 3.5)) == Row("sb3", 1, True, 1600, 2.0, 20)
    assert solve_row("sb3", 1, 20, curve, 0.95, (2400, 3.5)) == Row("sb3", 1, False, 2400, 3.5, 20)
    assert target_row(curve, 0.9) == {"reached": True, "steps_to_target": 1600, "wall_to_target": 2.0,
                                      "env_steps": 2400, "wall_s": 3.0, "final_success": 0.85, "best_success": 0.92}
    assert target_row(curve, 0.95, env_steps=2500)["env_steps"] == 2500
    assert target_row([], 0.9) == {"reached": False, "steps_to_target": None, "wall_to_target": None,
                                   "env_steps": 0, "wall_s": None, "final_success": None, "best_success": 0.0}


def test_markdown_tables_and_the_to_target_medians():
    from bench.tables import fmt, markdown, target_table

    assert markdown(["a", "b"], "lr", [[1, ""], ["x", 2.5]]).splitlines() == ["| a | b |", "|---|---:|", "| 1 | |",
                                                                               "| x | 2.5 |"]
    assert fmt(None) == "-" and fmt(1234.56, 1) == "1,234.6"
    rows = [{"g": "push", **_row(True, 1000, 5.0)}, {"g": "push", **_row(False, 0, 0)}, {"g": "drag", **_row(True, 10, 1.0)}]
    table = target_table(rows, ["g", "x", "n", "steps", "wall", "extra"], "llrrrr",
                         lambda r: [r["g"], "", "", r["steps_to_target"], r["wall_to_target"], ""],
                         lambda r: (f"**{r['g']}**", ""))
    assert table.splitlines()[-2:] == ["| **push** | | 1/2 reached | - (median) | - (median) | |",
                                       "| **drag** | | 1/1 reached | 10 (median) | 1.0 (median) | |"]


def test_a_missing_sb3_is_one_line_before_anything_runs(monkeypatch):
    import sys

    from bench import peers

    monkeypatch.setitem(sys.modules, "stable_baselines3", None)
    assert peers.missing() == peers.INSTALL and "\n" not in peers.INSTALL and ".[bench]" in peers.INSTALL


def test_a_peer_wall_cap_ends_it_at_once_or_at_its_next_evaluation():
    pytest.importorskip("stable_baselines3", reason="stable-baselines3 (the bench extra) is not installed")
    from bench import peers

    at_eval = peers.dqn_her_bitflip(4, 0, peers.Protocol(every=200, steps=1000, max_seconds=0.0, cap_at_evals=True),
                                    episodes=5)
    assert [step for step, _, _ in at_eval.curve] == [200] and at_eval.env_steps == 200
    assert 0.0 <= at_eval.curve[0][2] <= 1.0 and round(at_eval.wall_s, 2) >= at_eval.curve[0][1] >= 0.0
    at_once = peers.dqn_her_bitflip(4, 0, peers.Protocol(every=200, steps=1000, max_seconds=0.0), episodes=5)
    assert at_once.curve == [] and at_once.env_steps < 200


def test_env_speed_lines_are_a_markdown_table():
    from bench.speed import env_speed_lines

    lines = "\n".join(env_speed_lines(["bitflip"], [4], steps=20, repeats=1, warmup=5, bits=5)).splitlines()
    assert lines[:2] == ["| env | class | copies | env steps/s | step calls/s |", "|---|---|---:|---:|---:|"]
    assert len(lines) == 3 and lines[2].startswith("| bitflip | ") and "| 4 | " in lines[2]
