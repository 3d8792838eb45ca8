"""Sweeps on Ray (the `ray` extra): a local Ray instance runs the jobs, each in its own folder, and a
job whose env raises does not stop the others (one Ray start for both: it takes a minute)."""

import json
import os
import subprocess

import pytest

from test_sweep_survive import USER_ENVS

ENV = {**os.environ, "HYDRA_FULL_ERROR": "0", "OMP_NUM_THREADS": "1"}


def test_a_sweep_runs_on_a_local_ray_instance_and_survives_a_failing_job(her_run, tmp_path):
    pytest.importorskip("hydra_plugins.hydra_ray_launcher", reason='the ray extra is not installed: pip install -e ".[ray]"')
    (tmp_path / "mymod.py").write_text(USER_ENVS)
    sweep = tmp_path / "sweep"
    p = subprocess.run([her_run, "-m", "env=gym", "env.id=mymod:A-v0,mymod:B-v0", "algo=ppo", "budget.env_steps=64",
                        "progress=false", "hydra/launcher=ray", "+hydra.launcher.ray.init.num_cpus=2",
                        f"hydra.sweep.dir={sweep}"], cwd=tmp_path, env={**ENV, "PYTHONPATH": str(tmp_path)},
                       capture_output=True, text=True, timeout=420)
    assert p.returncode != 0 and "Traceback" not in p.stderr, p.stderr[-2000:]
    assert json.loads((sweep / "env.id=mymod\\:A-v0" / "results.json").read_text())["env_id"] == "mymod:A-v0"
    failed = json.loads((sweep / "env.id=mymod\\:B-v0" / "failed.json").read_text())
    assert "RuntimeError: B is broken" in failed["error"] and failed["exit_code"] == p.returncode
    assert p.stderr.strip().splitlines()[-1].startswith("her-run: error: 1 of 2 sweep jobs failed: ")
    assert "B is broken" in (sweep / "summary.md").read_text()
