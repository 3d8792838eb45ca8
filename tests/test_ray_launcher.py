"""Sweeps on Ray (the `ray` extra): a local Ray instance runs the jobs, each in its own folder."""

import json
import os
import subprocess

import pytest

ENV = {**os.environ, "HYDRA_FULL_ERROR": "0", "OMP_NUM_THREADS": "1"}


def test_a_sweep_runs_on_a_local_ray_instance(her_run, tmp_path):
    pytest.importorskip("hydra_plugins.hydra_ray_launcher", reason='the ray extra is not installed: pip install -e ".[ray]"')
    sweep = tmp_path / "sweep"
    p = subprocess.run([her_run, "-m", "n=3,4", "seed=0", "budget.env_steps=500", "progress=false", "hydra/launcher=ray",
                        "+hydra.launcher.ray.init.num_cpus=2", f"hydra.sweep.dir={sweep}"], cwd=tmp_path, env=ENV,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    results = sorted(json.loads(f.read_text())["n"] for f in sweep.glob("*/results.json"))
    assert results == [3, 4] and (sweep / "summary.md").exists()
