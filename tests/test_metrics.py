"""metrics.jsonl: every run's scalars as text, purged on resume like TensorBoard, read back by tag."""

import json

import pytest

from her_rl.run.logger import RunLogger
from her_rl.folder.metrics import METRICS, read_metrics
from her_rl.run.runner import main as run_main

RUN = ["n=4", "progress=false", "eval.stop_when_solved=false", "eval.every_env_steps=100"]


def _steps(folder):
    return [json.loads(line)["step"] for line in (folder / METRICS).read_text().splitlines()]


def test_a_run_writes_one_line_per_step_and_its_last_eval_is_the_results(tmp_path):
    results = run_main([*RUN, "budget.env_steps=300"], out_dir=tmp_path)
    steps = _steps(tmp_path)
    assert steps == sorted(set(steps)) and steps[-1] == results["env_steps"]  # increasing, never twice
    metrics = read_metrics(tmp_path)
    assert {"charts/SPS", "charts/success_rate", "losses/td_loss", "eval/return"} <= set(metrics)
    last = {tag: points[-1] for tag, points in metrics.items() if tag.startswith("eval/")}
    assert last["eval/success_rate"].step == results["env_steps"]
    assert last["eval/success_rate"].value == results["eval_success_rate"]
    assert last["eval/return"].value == results["eval_return"]
    assert len(metrics["eval/success_rate"]) >= 3  # every 100 env steps, and at the end
    assert metrics["eval/success_rate"] == sorted(metrics["eval/success_rate"])


def test_resume_drops_what_a_killed_run_logged_after_its_checkpoint(tmp_path):
    first = run_main([*RUN, "budget.env_steps=300"], out_dir=tmp_path)
    with open(tmp_path / METRICS, "a") as f:  # as a run killed after its checkpoint leaves the file
        f.write(json.dumps({"step": first["env_steps"] + 5, "wall_time": 0.0, "eval/success_rate": -1.0}) + "\n")
        f.write('{"step": 99999, "eval/succ')
    results = run_main(["resume=true", "budget.env_steps=600"], out_dir=tmp_path)
    steps = _steps(tmp_path)
    assert steps == sorted(set(steps)) and steps[-1] == results["env_steps"] > first["env_steps"]
    evals = read_metrics(tmp_path)["eval/success_rate"]
    assert all(p.value >= 0 for p in evals) and 99999 not in steps
    assert first["env_steps"] in [p.step for p in evals]  # what came before the checkpoint stays
    assert evals[-1].value == results["eval_success_rate"]


def test_logger_purges_from_the_start_step_and_merges_a_step_into_one_line(tmp_path):
    logger = RunLogger(tmp_path)
    for step in (10, 20, 30):
        logger.scalars({"charts/SPS": float(step)}, step)
        logger.scalars({"eval/return": -step}, step)
    logger.close()
    assert _steps(tmp_path) == [10, 20, 30]
    logger = RunLogger(tmp_path, start_step=21)  # resumed from the checkpoint at step 20
    logger.scalars({"charts/SPS": 25.0}, 25)
    logger.close()
    assert _steps(tmp_path) == [10, 20, 25]
    assert [p.value for p in read_metrics(tmp_path)["eval/return"]] == [-10, -20]
    RunLogger(tmp_path, start_step=0).close()  # a fresh start in a folder whose run never checkpointed
    assert (tmp_path / METRICS).read_text() == "" and read_metrics(tmp_path) == {}


def test_an_evaluation_is_on_disk_before_the_run_ends(tmp_path):
    logger = RunLogger(tmp_path)
    logger.scalars({"charts/SPS": 1.0}, 5)
    logger.scalars({"eval/success_rate": 0.5, "eval/return": float("nan")}, 5)
    line = json.loads((tmp_path / METRICS).read_text())  # not closed: as a killed run leaves it
    assert line["step"] == 5 and line["charts/SPS"] == 1.0 and line["eval/return"] is None
    logger.close()
    point = read_metrics(tmp_path)["eval/return"][0]
    assert point.step == 5 and point.value != point.value  # null reads back as NaN


def test_a_cut_last_line_is_skipped_and_a_damaged_one_is_named(tmp_path):
    (tmp_path / METRICS).write_text('{"step": 1, "wall_time": 2.5, "eval/return": 3.0}\n{"step": 2, "eval/re')
    assert read_metrics(tmp_path) == {"eval/return": [(1, 2.5, 3.0)]}
    (tmp_path / METRICS).write_text('{"step": 1}\nnot json\n{"step": 3}\n')
    with pytest.raises(ValueError, match="metrics.jsonl line 2 is not a JSON object with an integer step"):
        read_metrics(tmp_path)
    assert read_metrics(tmp_path / "missing") == {}


def test_a_folder_from_before_the_metrics_file_is_read_from_its_events(tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(log_dir=str(tmp_path / "tb"))
    for step, value in ((100, 0.25), (200, 0.75)):
        writer.add_scalar("eval/success_rate", value, step)
    writer.add_scalar("hparams/env_steps", 200.0, 0)
    writer.close()
    metrics = read_metrics(tmp_path)
    assert set(metrics) == {"eval/success_rate"}
    assert [(p.step, p.value) for p in metrics["eval/success_rate"]] == [(100, 0.25), (200, 0.75)]
