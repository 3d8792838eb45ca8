"""her-summary on folders as users have them: mixed keys, damaged run folders, robust statistics,
curves that show only what was measured."""

import csv
import json

import numpy as np
import pytest

from her_rl.folder.metrics import METRICS, MetricsWriter
from her_rl.summary.report import main, summarise, write_summary
from her_rl.summary.runs import read_runs
from her_rl.summary.plots import Curve, curves_figure, mean_curve, read_curve
from her_rl.summary.stats import iqm, iqm_ci


def _run_folder(folder, overrides, env="bitflip", n=None, seed=0, success=0.5, evals=((1000, 0.5),), solved_at=None,
                events=False):
    """A finished run folder as her_rl.run.runner writes it: config.yaml, history.jsonl, results.json,
    metrics.jsonl (``events``: TensorBoard events instead, as older versions wrote)."""
    folder.mkdir(parents=True)
    kwargs = f"  kwargs:\n    n: {n}\n" if n is not None else "  kwargs: {}\n"
    (folder / "config.yaml").write_text(f"algo:\n  name: her_dqn\nenv:\n  name: {env}\n{kwargs}seed: {seed}\n")
    (folder / "history.jsonl").write_text(json.dumps(
        {"time": "2026-01-01T00:00:00", "event": "start", "pid": 1, "env_steps": 0,
         "overrides": overrides, "changed": {}}) + "\n")
    steps = evals[-1][0]
    results = {"algo": "her_dqn", "env": env, "env_id": "x", "seed": seed, "env_steps": steps, "iterations": 3,
               "episodes": 30, "wall_time_s": 2.0, "sps": 500.0, "solved": solved_at is not None,
               "solved_at_env_steps": solved_at, "eval_return": -3.0, "eval_terminated_rate": 0.5,
               "eval_episodes": 100, "checkpoint": str(folder / "checkpoint.pt"), "eval_success_rate": success}
    if n is not None:
        results["n"] = n
    (folder / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    if events:
        from torch.utils.tensorboard import SummaryWriter

        writer = SummaryWriter(log_dir=str(folder / "tb"))
        for step, value in evals:
            writer.add_scalar("eval/success_rate", value, step)
        writer.close()
        return
    metrics = MetricsWriter(folder)
    for step, value in evals:
        metrics.add({"charts/SPS": 100.0}, step)
        metrics.add({"eval/success_rate": value}, step)
    metrics.close()


CORRUPT = {
    "results-garbage": ("results.json", "{oops", "results.json is not valid JSON"),
    "results-empty": ("results.json", "", "results.json is empty"),
    "results-list": ("results.json", "[0.5, 1.0]", "results.json holds a JSON list"),
    "results-strings": ("results.json", json.dumps({"seed": 0, "eval_success_rate": "high", "solved": False}),
                        "eval_success_rate is 'high', not a number"),
    "history-garbage": ("history.jsonl", "\x00\x01garbage\n", "history.jsonl line 1 is not valid JSON"),
    "config-garbage": ("config.yaml", "algo: [unclosed\n", "config.yaml is not valid YAML"),
    "config-empty": ("config.yaml", "", "config.yaml is empty"),
}


def _corrupt(folder, kind):
    _run_folder(folder, ["n=5", f"seed={9}"], n=5, seed=9)
    name, text, _ = CORRUPT[kind]
    (folder / name).write_text(text)


@pytest.fixture
def mixed(tmp_path):
    """Bit-flip n=5 (5 seeds) and n=10 (2), push without n (2), and three damaged run folders."""
    root = tmp_path / "outputs"
    for seed, success in enumerate([1.0, 0.9, 0.1, 0.8, 0.85]):
        _run_folder(root / f"n5-s{seed}", ["n=5", f"seed={seed}"], n=5, seed=seed, success=success,
                    evals=((200, 0.3), (400, success)))
    for seed in range(2):
        _run_folder(root / f"n10-s{seed}", ["n=10", f"seed={seed}", "progress=false"], n=10, seed=seed, success=0.2,
                    evals=((500, 0.0), (1000, 0.2)))
    for seed in range(2):
        _run_folder(root / f"push-s{seed}", ["env=push", f"seed={seed}"], env="push", seed=seed, success=0.05,
                    evals=((800, 0.05),))
    for kind in ("results-garbage", "results-list", "results-strings"):
        _corrupt(root / f"bad-{kind}", kind)
    return root


def test_mixed_keys_and_damaged_folders_still_give_a_summary(mixed, capsys):
    assert main([str(mixed)]) == 0
    captured = capsys.readouterr()
    err = [line for line in captured.err.splitlines() if line]
    assert len(err) == 3 and "Traceback" not in captured.err
    for kind in ("results-garbage", "results-list", "results-strings"):
        (line,) = [e for e in err if f"bad-{kind}" in e]
        assert line.startswith("her-summary: warning: skipped ") and CORRUPT[kind][2] in line
    assert "9 runs in 3 settings; 3 run folders skipped" in captured.out
    with open(mixed / "summary.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0])[:3] == ["env", "n", "metric"] and "setting" not in rows[0]
    assert [(r["env"], r["n"]) for r in rows] == [("push", ""), ("", "5"), ("", "10")]  # missing last, 5 before 10
    assert [r["seeds"] for r in rows] == ["2", "5", "2"]
    for name in ("summary.md", "curves.png", "by_n.png"):
        assert (mixed / name).stat().st_size > 0


@pytest.mark.parametrize("kind", sorted(CORRUPT))
def test_each_kind_of_damage_is_one_line_naming_folder_and_file(tmp_path, kind, capsys):
    _run_folder(tmp_path / "good", ["n=5", "seed=0"], n=5)
    _corrupt(tmp_path / "bad", kind)
    assert main([str(tmp_path), "--no-plots"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"her-summary: warning: skipped {tmp_path / 'bad'}: {err[0].split(': ', 3)[3]}"]
    assert CORRUPT[kind][2] in err[0]
    assert (tmp_path / "summary.csv").read_text().count("\n") == 2  # header + the good run


def test_only_damaged_folders_is_exit_2_with_one_line_each(tmp_path, capsys):
    _corrupt(tmp_path / "a", "results-empty")
    _corrupt(tmp_path / "b", "history-garbage")
    assert main([str(tmp_path)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 3 and err[-1].startswith("her-summary: error: no readable run folders")


def test_an_output_that_cannot_be_written_is_one_line_and_the_rest_is_written(tmp_path, capsys):
    _run_folder(tmp_path / "a", ["n=5", "seed=0"], n=5)
    (tmp_path / "summary.csv").mkdir()
    assert main([str(tmp_path)]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err == [f"her-summary: error: cannot write {tmp_path / 'summary.csv'}: Is a directory"]
    assert (tmp_path / "summary.md").is_file() and (tmp_path / "curves.png").is_file()
    for name in ("summary.md", "curves.png"):  # now nothing at all can be written: exit 1
        (tmp_path / name).unlink()
        (tmp_path / name).mkdir()
    assert main([str(tmp_path)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 4 and err[-1] == f"her-summary: error: no output could be written in {tmp_path}"


def test_iqm_is_the_mean_of_the_middle_half():
    # 8 runs: 2 cut at each end -> mean(0.2, 0.3, 0.4, 0.9) = 0.45
    assert iqm([0.0, 0.1, 0.2, 0.9, 0.95, 1.0, 0.3, 0.4]) == pytest.approx(0.45)
    assert iqm([0.1, 0.8, 0.85, 0.9, 1.0]) == pytest.approx(0.85)  # 5 runs: 1 cut at each end
    assert iqm([0.0, 0.3, 0.9]) == pytest.approx(0.4)  # fewer than 4: nothing to cut
    assert iqm([[0.0, 1.0], [0.2, 0.4]]) == pytest.approx(0.3)  # two tasks, pooled: mean(0.2, 0.4)
    scipy_stats = pytest.importorskip("scipy.stats")
    x = np.random.default_rng(1).normal(size=37)
    assert iqm(x) == pytest.approx(scipy_stats.trim_mean(x, 0.25))


def test_iqm_interval_is_stratified_by_task_and_covers_the_iqm():
    # Every resample keeps four runs of each task: the pooled IQM is then always 0.5.
    assert iqm_ci([[0.0] * 4, [1.0] * 4]) == (0.5, 0.5)
    lo, hi = iqm_ci([0.0] * 4 + [1.0] * 4)  # the same runs as one task vary
    assert lo < 0.5 < hi
    x = np.random.default_rng(0).uniform(size=10)
    lo, hi = iqm_ci(x)
    assert lo <= iqm(x) <= hi and iqm_ci(x) == (lo, hi)  # a fixed seed: the same interval
    assert all(np.isnan(iqm_ci([0.3])))


def test_rows_carry_iqm_beside_mean_and_no_interval_from_one_seed(mixed):
    rows = {r["setting"]: r for r in summarise(read_runs(mixed)[0])}
    five = rows["n=5"]
    assert five["mean"] == pytest.approx(0.73) and five["iqm"] == pytest.approx(0.85)
    assert five["iqm_ci_low"] <= five["iqm"] <= five["iqm_ci_high"] and five["ci_low"] <= 0.73 <= five["ci_high"]
    write_summary(mixed, plots=False)
    with open(mixed / "summary.csv", newline="") as f:
        header = next(csv.reader(f))
    assert header[-6:] == ["iqm", "iqm_ci_low", "iqm_ci_high", "median_steps_to_solve", "median_wall_s", "errors"]
    assert "| iqm | iqm_ci_low | iqm_ci_high |" in (mixed / "summary.md").read_text()


def test_curves_start_at_each_runs_first_evaluation_and_end_at_its_last():
    a = Curve(np.array([1000.0, 3000.0, 5000.0]), np.array([0.2, 0.5, 0.6]))
    b = Curve(np.array([2000.0, 3000.0]), np.array([0.0, 0.1]))  # ended at 3000 without solving
    grid, mean, std, count = mean_curve([a, b, Curve(np.array([4000.0]), np.array([0.9]))])
    assert grid[0] == 1000 and grid[-1] == 5000  # nothing before the first evaluation or after the last
    assert count.max() == 2 and np.all(count[grid > 3000] == 1) and np.all(count[grid < 2000] == 1)
    at = list(grid).index(3000.0)
    assert mean[at] == pytest.approx(0.3) and std[at] == pytest.approx(0.2)
    assert mean[-1] == pytest.approx(0.6) and np.isnan(std[-1])  # the single-evaluation run is not in the line
    held = Curve(np.array([1000.0, 2000.0]), np.array([0.5, 0.96]), holds=True)  # stopped when solved
    grid, mean, _, count = mean_curve([a, held])
    assert count[-1] == 2 and mean[-1] == pytest.approx((0.6 + 0.96) / 2)
    assert mean_curve([Curve(np.array([4000.0]), np.array([0.9]))]) is None


def test_a_single_evaluation_is_a_dot_and_every_plot_has_a_title_and_run_counts(mixed):
    runs = read_runs(mixed)[0]
    push = [read_curve(r) for r in runs if r.setting == ("env=push",)]
    five = [read_curve(r) for r in runs if r.setting == ("n=5",)]
    assert len(push[0].steps) == 1 and all(c.holds is False for c in five)
    fig = curves_figure([("env=push", "eval_success_rate", push), ("n=5", "eval_success_rate", five[:1]),
                         ("n=10", "eval_success_rate", five)], "outputs")
    ax = fig.axes[0]
    assert ax.get_title() == "outputs: eval success rate against env steps"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["env=push (2 runs)", "n=5 (1 run)", "n=10 (5 runs)"]
    dots = [line for line in ax.get_lines() if line.get_linestyle() == "None"]
    assert len(dots) == 2 and all(list(d.get_xdata()) == [800.0] for d in dots)
    for line in ax.get_lines():
        assert min(line.get_xdata()) >= 200  # the first evaluation, never step 0
    import matplotlib.pyplot as plt

    plt.close(fig)


def test_curves_come_from_metrics_files_and_from_events_of_older_folders(tmp_path, capsys):
    _run_folder(tmp_path / "new", ["n=5", "seed=0"], n=5, evals=((200, 0.3), (400, 0.6)))
    _run_folder(tmp_path / "old", ["n=5", "seed=1"], n=5, seed=1, evals=((200, 0.1), (400, 0.7)), events=True)
    _run_folder(tmp_path / "cut", ["n=5", "seed=2"], n=5, seed=2, evals=((200, 0.2), (400, 0.8)))
    with open(tmp_path / "cut" / METRICS, "a") as f:
        f.write('{"step": 600, "eval/succ')  # killed while writing its last line
    runs = {r.folder.name: r for r in read_runs(tmp_path)[0]}
    assert not (tmp_path / "new" / "tb").exists()
    assert [(list(read_curve(runs[k]).steps), list(read_curve(runs[k]).values)) for k in ("new", "old", "cut")] == [
        ([200.0, 400.0], [0.3, 0.6]), ([200.0, 400.0], [pytest.approx(0.1), pytest.approx(0.7)]),
        ([200.0, 400.0], [0.2, 0.8])]
    (tmp_path / "new" / METRICS).write_text('{"step": 200, "eval/success_rate": 0.3}\ngarbage\n{"step": 400}\n')
    assert main([str(tmp_path)]) == 0 and (tmp_path / "curves.png").stat().st_size > 0
    (line,) = capsys.readouterr().err.splitlines()  # the damaged file: one line, the table still stands
    assert line == (f"her-summary: warning: {tmp_path / 'new'}: metrics unreadable (metrics.jsonl line 2 is not a "
                    "JSON object with an integer step); left out of curves.png")
    assert "| n=5 | 3 | 3 |" in (tmp_path / "summary.md").read_text()


def test_outputs_linked_elsewhere_are_replaced_not_written_through(tmp_path, capsys):
    _run_folder(tmp_path / "sweep" / "a", ["n=5", "seed=0"], n=5)
    elsewhere = tmp_path / "user"
    elsewhere.mkdir()
    for name in ("summary.md", "summary.csv", "curves.png"):
        (elsewhere / name).write_text("the user's own file\n")
        (tmp_path / "sweep" / name).symlink_to(elsewhere / name)
    assert main([str(tmp_path / "sweep")]) == 0
    for name in ("summary.md", "summary.csv", "curves.png"):
        assert (elsewhere / name).read_text() == "the user's own file\n"
        written = tmp_path / "sweep" / name
        assert written.is_file() and not written.is_symlink() and written.stat().st_size > 0
    assert (tmp_path / "sweep" / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_full_disk_keeps_the_previous_outputs_whole(tmp_path, monkeypatch, capsys):
    import errno

    from her_rl.folder import checkpoint

    _run_folder(tmp_path / "a", ["n=5", "seed=0"], n=5)
    assert main([str(tmp_path)]) == 0
    before = {name: (tmp_path / name).read_bytes() for name in ("summary.md", "summary.csv", "curves.png")}

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(checkpoint.os, "fsync", full)
    assert main([str(tmp_path)]) == 1  # nothing could be written
    assert "No space left on device" in capsys.readouterr().err
    assert {name: (tmp_path / name).read_bytes() for name in before} == before
    assert not list(tmp_path.glob("*.tmp"))
