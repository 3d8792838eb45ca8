import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

torch.set_num_threads(1)
ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "experiments" / "cartpole_reinforce.py"


def _load_example():
    spec = importlib.util.spec_from_file_location("cartpole_reinforce", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_reinforce_cartpole_improves(tmp_path):
    pytest.importorskip("gymnasium")
    history = _load_example().main(episodes=120, seed=2, plot=tmp_path / "cp.png")
    totals = np.asarray(history.totals)
    assert len(totals) == 120
    assert totals[-20:].mean() > 2 * totals[:20].mean()
    assert (tmp_path / "cp.png").stat().st_size > 1000


def test_cli_runs(tmp_path):
    pytest.importorskip("gymnasium")
    out = subprocess.run([sys.executable, str(SCRIPT), "--episodes", "3", "--seed", "1",
                          "--plot", str(tmp_path / "cli.png")],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert "episodes used: 3" in out.stdout and (tmp_path / "cli.png").exists()
