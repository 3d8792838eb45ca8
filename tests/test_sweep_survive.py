"""Sweeps that survive: a failing job (the user's env raising, non-finite training) is one line and a
failed.json in its folder, the other jobs run, the summary lists the failure, and the sweep exits
non-zero with one line. ``module:Id`` values (escaped by Hydra in each job's overrides) work in sweeps."""

import csv
import json
import os
import subprocess
import textwrap

import pytest

from her_rl.folder import failures
from her_rl.config.overrides import one_value_each, sweep_values
from her_rl.summary.report import main as summary_main
from her_rl.summary.report import write_summary

ENV = {**os.environ, "HYDRA_FULL_ERROR": "0", "OMP_NUM_THREADS": "1"}

# The user's module: A-v0 works, B-v0 raises in step once training runs (her-run's up-front checks of
# the env take a step or two: an env that raised there would refuse the whole sweep before it starts).
USER_ENVS = textwrap.dedent("""
    import gymnasium as gym
    import numpy as np
    from gymnasium import spaces

    class LineEnv(gym.Env):
        def __init__(self, broken=False):
            self.broken, self.steps = broken, 0
            self.observation_space = spaces.Box(0, 4, (1,), np.float32)
            self.action_space = spaces.Discrete(2)

        def reset(self, seed=None, options=None):
            super().reset(seed=seed)
            self.x = 0
            return np.array([0.0], np.float32), {}

        def step(self, action):
            self.steps += 1
            if self.broken and self.steps > 25:
                raise RuntimeError("B is broken")
            self.x = max(0, self.x + (1 if int(action) == 1 else -1))
            done = self.x >= 4
            return np.array([self.x], np.float32), float(done), done, False, {}

    gym.register(id="A-v0", entry_point=LineEnv, max_episode_steps=20)
    gym.register(id="B-v0", entry_point=LineEnv, kwargs={"broken": True}, max_episode_steps=20)
""")


def _sweep(her_run, cwd, *args):
    return subprocess.run([her_run, "-m", *args, "progress=false", "hydra.sweep.dir=sw"], cwd=cwd,
                          env={**ENV, "PYTHONPATH": str(cwd)}, capture_output=True, text=True, timeout=420)


@pytest.mark.parametrize("launcher", [[], ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"]], ids=["basic", "joblib"])
def test_a_job_whose_env_raises_does_not_stop_the_sweep(her_run, tmp_path, launcher):
    """(Ray: tests/test_ray_launcher.py, one Ray instance for both of its checks.)"""
    (tmp_path / "mymod.py").write_text(USER_ENVS)
    p = _sweep(her_run, tmp_path, "env=gym", "env.id=mymod:A-v0,mymod:B-v0", "algo=ppo", "budget.env_steps=64",
               *launcher)
    sweep = tmp_path / "sw"
    assert p.returncode != 0 and "Traceback" not in p.stderr, p.stderr
    assert json.loads((sweep / "env.id=mymod\\:A-v0" / "results.json").read_text())["env_id"] == "mymod:A-v0"
    failed = json.loads((sweep / "env.id=mymod\\:B-v0" / "failed.json").read_text())
    assert failed["exit_code"] == p.returncode and "RuntimeError: B is broken" in failed["error"]
    lines = p.stderr.strip().splitlines()
    assert lines[-1] == f"her-run: error: 1 of 2 sweep jobs failed: sw/env.id=mymod\\:B-v0: {failed['error']}"
    assert any(line.startswith("her-run: error: sweep job ") for line in lines[:-1])
    md = (sweep / "summary.md").read_text()
    assert "| algo=ppo env.id=mymod:A-v0 env=gym | 1 | 1 | 0 | 0 |" in md  # unescaped in the summary
    assert f"- env.id=mymod\\:B-v0: {failed['error']}" in md
    with open(sweep / "summary.csv", newline="") as f:
        rows = {row["env.id"]: row for row in csv.DictReader(f)}
    assert rows["mymod:A-v0"]["errors"] == "" and "B is broken" in rows["mymod:B-v0"]["errors"]
    assert summary_main([str(sweep), "--no-plots"]) == 0 and (sweep / "summary.md").read_text() == md  # her-summary


def test_a_non_finite_optuna_trial_is_a_failed_trial_not_a_failed_study(her_run, tmp_path):
    """The non-finite guard's stop in one trial: the job gives Optuna no number (a NaN would make the
    Optuna sweeper end the study), the other trial runs, and the sweep exits 3 like the job."""
    pytest.importorskip("hydra_plugins.hydra_optuna_sweeper", reason='the tune extra is not installed')
    p = _sweep(her_run, tmp_path, "hydra/sweeper=optuna", "hydra.sweeper.n_trials=2", "hydra.sweeper.sampler.seed=0",
               "n=4", "algo.lr=choice(1e30,0.001)", "budget.env_steps=300")
    assert p.returncode == 3 and "Traceback" not in p.stderr, p.stderr  # seed 0 samples 0.001, then 1e30
    assert "1 of 2 sweep jobs failed: sw/trial-1: non-finite" in p.stderr.splitlines()[-1]
    assert json.loads((tmp_path / "sw" / "trial-1" / "failed.json").read_text())["exit_code"] == 3
    assert (tmp_path / "sw" / "trial-0" / "results.json").is_file() and "- trial-1: non-finite" in (
        tmp_path / "sw" / "summary.md").read_text()
    assert (tmp_path / "sw" / "optimization_results.yaml").is_file()


def test_sweep_values_are_unescaped_as_hydra_reads_them():
    from hydra.core.override_parser.overrides_parser import OverridesParser

    (swept,) = OverridesParser.create().parse_overrides(["env.id=mymod:A-v0,'my mod:B-v0'"])
    assert sweep_values(swept) == ["mymod:A-v0", "my mod:B-v0"]
    assert one_value_each(["env.id=mymod:A-v0,mymod:B-v0", "n=3"]) == [
        "env.id=mymod\\:A-v0", "env.id=mymod\\:B-v0", "n=3"]  # as Hydra writes each job's override


def test_an_unexpected_error_is_one_line_naming_its_type_and_where_it_was_raised():
    def step():
        raise KeyError("no\nsuch key")
    try:
        step()
    except KeyError as exc:
        line, code = failures.describe(exc)
    assert code == 1 and line.startswith("KeyError: 'no\\nsuch key' (raised at test_sweep_survive.py:")
    assert line.endswith(" in step)") and "\n" not in line


def test_a_failure_is_written_atomically_never_through_a_link_and_summarised(tmp_path, capsys):
    job = tmp_path / "sw" / "n=3"
    failures.record(job, "EnvError: env broke", 4, ["n=3", "seed=0", "env.id=m\\:A-v0"])
    assert [p.name for p in job.iterdir()] == ["failed.json"]  # no temp file left
    rows = write_summary(tmp_path / "sw", plots=False)
    assert rows[0]["setting"] == "env.id=m:A-v0 n=3" and rows[0]["failed"] == 1  # setting from failed.json
    assert rows[0]["errors"] == [("n=3", "EnvError: env broke")]
    failures.clear(job)
    target = tmp_path / "elsewhere.json"
    target.write_text("keep")
    (job / "failed.json").symlink_to(target)
    failures.start_sweep()
    assert failures.job_failed(job, RuntimeError("x"), []) is None  # no objective for the sweeper
    assert target.read_text() == "keep" and "cannot record the failure" in capsys.readouterr().err
    failures.end_sweep(tmp_path / "sw")  # the failure is still counted, from this process's memory
    with pytest.raises(SystemExit) as stop:
        failures.exit_if_failed()
    assert stop.value.code == 1
    assert capsys.readouterr().err.startswith(f"her-run: error: 1 of 1 sweep job failed: {job}: RuntimeError: x")
    failures.start_sweep()  # leave no failures behind for other tests in this process
