"""her-summary and the end-of-sweep callback: one row per setting, failed and running runs shown."""

import json
import os
import shutil

import numpy as np
import forked
import pytest

from her_rl.folder.rundir import RunLock
from her_rl.summary.report import main, summarise, write_summary
from her_rl.summary.runs import find_runs
from her_rl.summary.stats import bootstrap_ci

ENV = {**os.environ, "HYDRA_FULL_ERROR": "0", "OMP_NUM_THREADS": "1"}


def _fake_run(folder, overrides, results=None):
    folder.mkdir(parents=True)
    (folder / "history.jsonl").write_text(json.dumps({"event": "start", "overrides": overrides}) + "\n")
    if results is not None:
        (folder / "results.json").write_text(json.dumps(results))


def _results(seed, success, solved_at=None, wall=10.0):
    return {"seed": seed, "eval_success_rate": success, "solved": solved_at is not None,
            "solved_at_env_steps": solved_at, "wall_time_s": wall}


def test_rows_group_seeds_by_setting_and_show_failed_and_running_runs(tmp_path):
    _fake_run(tmp_path / "a0", ["n=10", "algo.strategy=future", "seed=0", "progress=false"], _results(0, 1.0, 1000, 5.0))
    _fake_run(tmp_path / "a1", ["n=10", "algo.strategy=future", "seed=1", "budget.env_steps=9"], _results(1, 0.9, 3000, 7.0))
    _fake_run(tmp_path / "a2", ["n=10", "algo.strategy=future", "seed=2"])  # no results, no live process: failed
    _fake_run(tmp_path / "b0", ["n=10", "algo.strategy=none", "seed=0"], _results(0, 0.0))
    _fake_run(tmp_path / "b1", ["n=10", "algo.strategy=none", "seed=1"])
    _fake_run(tmp_path / "b2", ["n=10", "algo.strategy=none", "seed=2"])
    (tmp_path / "b2" / ".her-run.lock").mkdir()  # a lock that is a folder: no live run can hold it
    lock = RunLock.acquire(tmp_path / "b1")  # a live run holds b1
    try:
        rows = {r["setting"]: r for r in summarise(find_runs(tmp_path))}
    finally:
        lock.release()
    her, plain = rows["algo.strategy=future n=10"], rows["algo.strategy=none n=10"]
    assert (her["seeds"], her["done"], her["failed"], her["running"], her["solved"]) == (3, 2, 1, 0, 2)
    assert (plain["seeds"], plain["done"], plain["failed"], plain["running"], plain["solved"]) == (3, 1, 1, 1, 0)
    assert her["mean"] == pytest.approx(0.95) and her["median_steps_to_solve"] == 2000
    assert her["median_wall_s"] == 6.0 and her["ci_low"] <= 0.95 <= her["ci_high"]


def test_bootstrap_interval_covers_the_mean_and_shrinks_with_more_runs():
    rng = np.random.default_rng(0)
    few, many = rng.normal(0.5, 0.1, 4), rng.normal(0.5, 0.1, 400)
    lo, hi = bootstrap_ci(few)
    assert lo <= few.mean() <= hi
    lo2, hi2 = bootstrap_ci(many)
    assert hi2 - lo2 < (hi - lo) / 2


def test_a_sweep_ends_with_a_summary_table_csv_and_plots(her_run, tmp_path):
    sweep = tmp_path / "sweep"
    p = forked.run([her_run, "-m", "n=3,4", "seed=0,1", "budget.env_steps=600", "progress=false",
                    "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", f"hydra.sweep.dir={sweep}"],
                   cwd=tmp_path, env=ENV, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    table = (sweep / "summary.md").read_text()
    assert "| n=3 | 2 |" in table and "| n=4 | 2 |" in table
    csv_text = (sweep / "summary.csv").read_text()
    assert csv_text.count("\n") == 3 and csv_text.startswith("n,metric,seeds,")  # a column per swept key
    assert [line.split(",")[0] for line in csv_text.splitlines()[1:]] == ["3", "4"]
    assert (sweep / "curves.png").stat().st_size > 0 and (sweep / "by_n.png").stat().st_size > 0
    # the command gives the same table again, for a sweep folder or any folder of runs
    (sweep / "summary.md").unlink()
    assert main([str(sweep), "--no-plots"]) == 0 and (sweep / "summary.md").read_text() == table
    # and its curves need no TensorBoard events: every run folder holds metrics.jsonl, with the same evaluations
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from her_rl.summary.plots import read_curve

    runs = find_runs(sweep)
    events = []
    for run in runs:
        acc = EventAccumulator(str(run.folder / "tb"), size_guidance={"scalars": 0})
        acc.Reload()
        events.append([(e.step, e.value) for e in acc.Scalars("eval/success_rate")])
        shutil.rmtree(run.folder / "tb")
    (sweep / "curves.png").unlink()
    assert main([str(sweep)]) == 0 and (sweep / "curves.png").stat().st_size > 0
    assert len(runs) == 4 and not list(sweep.glob("*/tb"))
    for run, logged in zip(runs, events):
        curve = read_curve(run)
        assert list(curve.steps) == [s for s, _ in logged] and list(curve.values) == pytest.approx([v for _, v in logged])


def test_a_folder_without_runs_is_one_line_and_exit_2(tmp_path, capsys):
    assert main([str(tmp_path)]) == 2
    assert main([str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert err.count("her-summary: error:") == 2 and "Traceback" not in err
    with pytest.raises(FileNotFoundError):
        write_summary(tmp_path)


def test_every_run_logs_its_config_and_hparams_with_final_metrics(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from her_rl.run.runner import main as run_main

    results = run_main(["n=4", "algo.lr=0.002", "progress=false", "budget.env_steps=300"], out_dir=tmp_path)
    acc = EventAccumulator(str(tmp_path / "tb"), size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    assert "hparams/eval_success_rate" in acc.Tags()["scalars"]
    assert acc.Scalars("hparams/env_steps")[0].value == results["env_steps"]
    plugin = acc.PluginTagToContent("hparams")  # the HParams tab's session summaries
    assert "_hparams_/session_start_info" in plugin and "_hparams_/experiment" in plugin
    from tensorboard.plugins.hparams import plugin_data_pb2

    start = plugin_data_pb2.HParamsPluginData.FromString(plugin["_hparams_/session_start_info"]).session_start_info
    assert start.hparams["algo.lr"].number_value == pytest.approx(0.002) and start.hparams["algo"].string_value == "her_dqn"
    assert "config" in str(acc.Tags().get("tensors", []))  # the config as text


def test_sweep_job_folders_are_named_by_the_keys_the_sweep_varies(her_run, tmp_path):
    sweep = tmp_path / "sweep"
    p = forked.run([her_run, "-m", "n=3,4", "seed=0", "algo.lr=0.001", "budget.env_steps=300", "progress=false",
                    f"hydra.sweep.dir={sweep}"], cwd=tmp_path, env=ENV, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert sorted(d.name for d in sweep.iterdir() if d.is_dir()) == ["n=3", "n=4"]


def test_swept_keys_come_from_sweep_syntax_and_experiment_params(monkeypatch):
    from omegaconf import OmegaConf

    from her_rl.folder.rundir import SWEPT_ENV, SweptKeys, swept_dirname

    monkeypatch.setenv(SWEPT_ENV, "")  # restored (removed) after the test, whatever SweptKeys sets
    assert swept_dirname("n=3,seed=0", ["n=3", "seed=0"]) == "n=3,seed=0"  # outside a multirun: Hydra's name
    cfg = OmegaConf.create({"hydra": {"overrides": {"task": ["n=3,4", "seed=0", "experiment=x"]},
                                      "sweeper": {"params": {"algo.strategy": "none,future", "size": "7"}}}})
    SweptKeys().on_multirun_start(cfg)
    assert os.environ[SWEPT_ENV] == "algo.strategy,n"
    assert swept_dirname("full", ["seed=0", "n=4", "algo.strategy=none", "experiment=x"]) == "algo.strategy=none,n=4"
    assert swept_dirname("full", ["seed=0"]) == "full"


def _config(folder, seed, steps):
    (folder / "config.yaml").write_text(f"algo:\n  name: her_dqn\n  lr: 0.001\nenv:\n  name: bitflip\nn: 15\nseed: {seed}\n"
                                        f"budget:\n  env_steps: {steps}\nprogress: true\n")


def test_runs_of_one_resolved_config_are_one_row_whatever_was_typed_and_seeds_are_distinct(tmp_path):
    _fake_run(tmp_path / "short", ["n=15"], _results(0, 1.0, 1000))
    _fake_run(tmp_path / "long", ["algo=her_dqn", "env=bitflip", "n=15"], _results(0, 0.9, 2000))
    _fake_run(tmp_path / "again", ["n=15", "budget.env_steps=50"], _results(0, 0.8, 3000))
    _fake_run(tmp_path / "other", ["n=15", "algo.lr=0.01"], _results(0, 0.5))
    for name, steps in (("short", 100), ("long", 100), ("again", 50)):
        _config(tmp_path / name, 0, steps)
    _config(tmp_path / "other", 0, 100)
    (tmp_path / "other" / "config.yaml").write_text((tmp_path / "other" / "config.yaml").read_text().replace(
        "lr: 0.001", "lr: 0.01"))
    rows = {r["setting"]: r for r in summarise(find_runs(tmp_path))}
    assert sorted(rows) == ["algo.lr=0.01 n=15", "n=15"]
    assert (rows["n=15"]["done"], rows["n=15"]["seeds"]) == (3, 1)  # three runs, all of seed 0
    assert rows["n=15"]["mean"] == pytest.approx(0.9)


@pytest.mark.parametrize("key, values, scale", [("algo.lr", ["0.0001", "0.001", "0.01"], "log"),
                                                ("n", ["5", "10", "20"], "linear")])
def test_a_swept_value_spanning_more_than_a_decade_is_plotted_on_a_log_axis(key, values, scale):
    import matplotlib

    matplotlib.use("Agg")
    from her_rl.summary.plots import by_key_figure

    rows = [{"keys": {key: v}, "metric": "eval_success_rate", "mean": 0.5, "ci_low": 0.4, "ci_high": 0.6}
            for v in values]
    fig = by_key_figure(rows, key, "sw")
    assert fig.axes[0].get_xscale() == scale
