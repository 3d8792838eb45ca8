"""Sweeps on Ray (the `ray` extra): a local Ray instance runs the jobs, each in its own folder, and a
job whose env raises or whose process dies does not stop the others (one Ray start for all: it takes a minute)."""

import json
import os
import subprocess

import pytest

from test_sweep_survive import DYING_ENVS, USER_ENVS

ENV = {**os.environ, "HYDRA_FULL_ERROR": "0", "OMP_NUM_THREADS": "1"}


def test_a_sweep_runs_on_a_local_ray_instance_and_survives_a_failing_and_a_dying_job(her_run, tmp_path):
    """Job B's env raises; job Kill's Ray worker dies (SIGKILL), where Ray ran a job again three times and
    then ended the sweep with its WorkerCrashedError traceback: each is named, once, and A runs to its end."""
    pytest.importorskip("hydra_plugins.hydra_ray_launcher", reason='the ray extra is not installed: pip install -e ".[ray]"')
    (tmp_path / "mymod.py").write_text(USER_ENVS)
    (tmp_path / "dying.py").write_text(DYING_ENVS)
    sweep = tmp_path / "sweep"
    p = subprocess.run([her_run, "-m", "env=gym", "env.id=mymod:A-v0,mymod:B-v0,dying:Kill-v0", "algo=ppo",
                        "budget.env_steps=64", "progress=false", "hydra/launcher=ray",
                        "+hydra.launcher.ray.init.num_cpus=2", f"hydra.sweep.dir={sweep}"], cwd=tmp_path,
                       env={**ENV, "PYTHONPATH": str(tmp_path)}, capture_output=True, text=True, timeout=420)
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr[-3000:]
    assert json.loads((sweep / "env.id=mymod\\:A-v0" / "results.json").read_text())["env_id"] == "mymod:A-v0"
    failed = json.loads((sweep / "env.id=mymod\\:B-v0" / "failed.json").read_text())
    assert "RuntimeError: B is broken" in failed["error"] and failed["exit_code"] == 4  # an env fault in training
    killed = json.loads((sweep / "env.id=dying\\:Kill-v0" / "failed.json").read_text())
    assert killed["error"].startswith("job #2 (env.id=dying\\:Kill-v0): its Ray worker process died before the job "
                                      "ended (an os._exit or a crash in "), killed
    assert killed["error"].endswith("; no checkpoint had been written") and killed["exit_code"] == 1, killed
    history = (sweep / "env.id=dying\\:Kill-v0" / "history.jsonl").read_text().splitlines()
    assert [json.loads(line)["event"] for line in history].count("start") == 1, history  # Ray's retries are off
    assert "retries remaining" not in p.stdout + p.stderr
    lines = p.stderr.strip().splitlines()
    assert any(line.startswith("her-run: error: sweep job ") and line.endswith(f"env.id=dying\\:Kill-v0: {killed['error']}")
               for line in lines), p.stderr[-3000:]
    assert lines[-1].startswith("her-run: error: 2 of 3 sweep jobs failed: ")
    md = (sweep / "summary.md").read_text()
    assert "B is broken" in md and f"- env.id=dying\\:Kill-v0: {killed['error']}" in md
