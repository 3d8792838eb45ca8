"""Sweeps that survive: a failing job (the user's env raising, non-finite training, under joblib, Ray and
submitit a job whose process dies) is one line and a failed.json in its folder, the other jobs run, the
summary lists the failure, and the sweep exits non-zero with one line. ``module:Id`` values (escaped by
Hydra in each job's overrides) work in sweeps."""

import csv
import json
import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from her_rl.folder import failures
from her_rl.config.compose import one_value_each, sweep_values
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


# Envs whose process dies in step once training runs: os._exit(3), or SIGKILL sent to itself.
DYING_ENVS = textwrap.dedent("""
    import os
    import signal

    import gymnasium as gym
    import numpy as np
    from gymnasium import spaces

    class DyingEnv(gym.Env):
        def __init__(self, death=None):
            self.death, self.steps = death, 0
            self.observation_space = spaces.Box(0, 4, (1,), np.float32)
            self.action_space = spaces.Discrete(2)

        def reset(self, seed=None, options=None):
            super().reset(seed=seed)
            return np.array([0.0], np.float32), {}

        def step(self, action):
            self.steps += 1
            if self.death == "exit" and self.steps > 25:
                os._exit(3)
            if self.death == "kill" and self.steps > 25:
                os.kill(os.getpid(), signal.SIGKILL)
            return np.array([float(action)], np.float32), 0.0, False, False, {}

    gym.register(id="Live-v0", entry_point=DyingEnv, max_episode_steps=20)
    gym.register(id="Exit-v0", entry_point=DyingEnv, kwargs={"death": "exit"}, max_episode_steps=20)
    gym.register(id="Kill-v0", entry_point=DyingEnv, kwargs={"death": "kill"}, max_episode_steps=20)
""")


def test_a_joblib_job_whose_process_dies_is_named_and_the_other_jobs_run(her_run, tmp_path):
    """The two dying jobs start first, one per worker; the third job runs after them in one of the same
    workers, so it only finishes if a job's death left its worker (and joblib's pool) alive."""
    (tmp_path / "dying.py").write_text(DYING_ENVS)
    p = _sweep(her_run, tmp_path, "env=gym", "env.id=dying:Exit-v0,dying:Kill-v0,dying:Live-v0", "algo=ppo",
               "budget.env_steps=64", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2")
    sweep = tmp_path / "sw"
    assert "Traceback" not in p.stderr and "TerminatedWorkerError" not in p.stderr, p.stderr
    assert p.returncode == 1, p.stderr  # a failed job's status for anything but her-rl's own errors
    assert json.loads((sweep / "env.id=dying\\:Live-v0" / "results.json").read_text())["env_id"] == "dying:Live-v0"
    exited = json.loads((sweep / "env.id=dying\\:Exit-v0" / "failed.json").read_text())
    killed = json.loads((sweep / "env.id=dying\\:Kill-v0" / "failed.json").read_text())
    assert exited["error"].startswith("job #0 (env.id=dying\\:Exit-v0): its process exited with status 3 before "
                                      "the job ended"), exited
    assert killed["error"].startswith("job #1 (env.id=dying\\:Kill-v0): its process was killed by signal 9 "
                                      "(SIGKILL) before the job ended"), killed
    assert exited["exit_code"] == killed["exit_code"] == 1
    lines = p.stderr.strip().splitlines()
    for name, failed in (("Exit", exited), ("Kill", killed)):
        assert f"her-run: error: sweep job sw/env.id=dying\\:{name}-v0: {failed['error']}" in lines, p.stderr
    assert lines[-1].startswith("her-run: error: 2 of 3 sweep jobs failed: sw/env.id=dying\\:Exit-v0: job #0 ")
    md = (sweep / "summary.md").read_text()
    assert f"- env.id=dying\\:Kill-v0: {killed['error']}" in md and "| algo=ppo env.id=dying:Live-v0 env=gym | 1 | 1 |" in md


def test_a_basic_sweep_job_whose_process_dies_ends_the_sweep_with_that_status(her_run, tmp_path):
    """The basic launcher runs the jobs in her-run's own process: the job's os._exit(3) is her-run's,
    no line can follow it, and the jobs after it do not run (docs/sweeps.md says so; joblib isolates)."""
    (tmp_path / "dying.py").write_text(DYING_ENVS)
    p = _sweep(her_run, tmp_path, "env=gym", "env.id=dying:Exit-v0,dying:Live-v0", "algo=ppo", "budget.env_steps=64")
    assert p.returncode == 3 and "Traceback" not in p.stderr, p.stderr
    assert not (tmp_path / "sw" / "env.id=dying\\:Live-v0").exists()


def _dead_job_named(p, sweep, name, how):
    """Job #0 (``name``, an env whose process dies) failed, named in one line saying how it ended;
    job #1 (Live-v0) ran to its end; her-run ended with one line and status 1, no traceback."""
    assert "Traceback" not in p.stderr, p.stderr[-3000:]
    assert p.returncode == 1, p.stderr[-3000:]  # a failed job's status for anything but her-rl's own errors
    assert json.loads((sweep / "env.id=dying\\:Live-v0" / "results.json").read_text())["env_id"] == "dying:Live-v0"
    failed = json.loads((sweep / f"env.id=dying\\:{name}" / "failed.json").read_text())
    assert failed["error"].startswith(f"job #0 (env.id=dying\\:{name}): {how} (an os._exit or a crash in "), failed
    assert failed["error"].endswith("; no checkpoint had been written") and failed["exit_code"] == 1, failed
    lines = p.stderr.strip().splitlines()
    assert f"her-run: error: sweep job sw/env.id=dying\\:{name}: {failed['error']}" in lines, p.stderr[-3000:]
    assert lines[-1] == f"her-run: error: 1 of 2 sweep jobs failed: sw/env.id=dying\\:{name}: {failed['error']}"
    md = (sweep / "summary.md").read_text()
    assert f"- env.id=dying\\:{name}: {failed['error']}" in md
    assert "| algo=ppo env.id=dying:Live-v0 env=gym | 1 | 1 |" in md
    return failed["error"]


# Ray: tests/test_ray_launcher.py, one Ray instance for a job that raises and one whose process dies.


def test_a_submitit_job_whose_process_dies_is_named_and_the_other_jobs_run(her_run, tmp_path):
    """submitit_local runs each job in a process of its own; one that ends without a result (os._exit(3))
    ended the sweep with submitit's UncompletedJobError traceback; her-run gets each job's result on
    its own (and at once: submitit waits 15 s for a result file that may be late on a cluster's disk)."""
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher", reason="the submitit launcher extra is not installed")
    (tmp_path / "dying.py").write_text(DYING_ENVS)
    p = _sweep(her_run, tmp_path, "env=gym", "env.id=dying:Exit-v0,dying:Live-v0", "algo=ppo", "budget.env_steps=64",
               "hydra/launcher=submitit_local")
    error = _dead_job_named(p, tmp_path / "sw", "Exit-v0",
                            "its process ended before the job did, handing back no result")
    log = error.split("; submitit job ")[1].split(", log ")[1].split(")")[0]  # where its error stream went
    assert (tmp_path / log).is_file() and log.startswith("sw/.submitit/"), error


def test_how_a_job_ended_is_told_from_the_launchers_error(monkeypatch):
    """The errors the Ray and submitit launchers give for a job without a result, each said in words."""
    from her_rl.run import launchers

    submitit_utils = pytest.importorskip("submitit.core.utils")

    class Job:  # a SLURM job, as submitit hands it back
        job_id, state = "77", "OUT_OF_MEMORY"
        paths = type("Paths", (), {"stderr": Path("/x/77_0_log.err"), "result_pickle": Path("/x/77_0_result.pkl")})

        def __init__(self, error):
            self.error = error

        def wait(self):
            pass

        def results(self):
            raise self.error

    where = "submitit job 77, state OUT_OF_MEMORY, log /x/77_0_log.err"
    trace = "Traceback (most recent call last):\n  File x\nValueError: bad thing"
    failed = submitit_utils.FailedJobError(f"Job (task=0) failed during processing with trace:\n{'-' * 22}\n{trace}\n"
                                           f"{'-' * 22}\nYou can check full logs with 'job.stderr(0)' ...")
    assert launchers._submitit_result(Job(failed)) == launchers.Lost("it ended with ValueError: bad thing", False,
                                                                     where)
    assert launchers._submitit_result(Job(submitit_utils.UncompletedJobError("x"))) == launchers.Lost(
        "its process ended before the job did, handing back no result", True, where)
    ray = pytest.importorskip("ray")
    for error, lost in ((ray.exceptions.WorkerCrashedError(), ("its Ray worker process died before the job ended",
                                                              True)),
                        (ray.exceptions.OutOfMemoryError("Task was killed"), (
                            "Ray's memory monitor killed its worker process before the job ended (out of memory)",
                            False))):
        monkeypatch.setattr(ray, "get", lambda ref, error=error: (_ for _ in ()).throw(error))
        assert launchers._ray_result(None) == launchers.Lost(*lost)


def test_a_lost_job_says_whether_its_folder_keeps_a_checkpoint(tmp_path):
    from her_rl.run.sweep import job_lost

    overrides = ["env.id=m\\:A-v0"]
    assert job_lost("it died", tmp_path, overrides, 4, where="log x") == (
        "job #4 (env.id=m\\:A-v0): it died (an os._exit or a crash in the env or a library, or a kill: out of "
        "memory?; log x); no checkpoint had been written")
    (tmp_path / "checkpoint.pt").write_bytes(b"")
    assert job_lost("it ended with X: y", tmp_path, overrides, 4, died=False) == (
        "job #4 (env.id=m\\:A-v0): it ended with X: y; its folder keeps its last checkpoint")


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
