"""The built wheel carries the Hydra configs, so a non-editable `pip install .` can run her-run."""

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_wheel_ships_every_config_file(tmp_path):
    p = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                        "-w", str(tmp_path), str(ROOT)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    wheel = next(tmp_path.glob("her_rl-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {f"her_rl/conf/{f.relative_to(ROOT / 'her_rl/conf')}" for f in (ROOT / "her_rl/conf").rglob("*.yaml")}
    assert "her_rl/conf/config.yaml" in expected and "her_rl/conf/env/bitflip.yaml" in expected
    assert expected <= names, expected - names
    assert any(n.endswith("entry_points.txt") for n in names)
