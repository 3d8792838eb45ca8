"""her_rl.bench: what the benchmark scripts share (medians with unsolved seeds, the job loop, the
JSON report, a run of ours read back from its metrics file)."""

import json
import os
from pathlib import Path

from her_rl.bench import each_result, first_reaching, run_ours, to_target, write_report


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
