"""The built wheel carries the Hydra configs, so a non-editable `pip install .` can run her-run, and no
benchmark code: bench/ lies beside the package."""

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_wheel_ships_every_config_file_and_no_benchmark_code(tmp_path):
    # built from a copy of what a checkout holds: an in-tree build/ keeps files deleted since (a
    # config that is no longer in the repository would still ship and shadow the code's)
    src = tmp_path / "src"
    for folder in ("her_rl", "bench"):
        shutil.copytree(ROOT / folder, src / folder, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    p = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                        "-w", str(tmp_path), str(src)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    wheel = next(tmp_path.glob("her_rl-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {f"her_rl/conf/{f.relative_to(ROOT / 'her_rl/conf')}" for f in (ROOT / "her_rl/conf").rglob("*.yaml")}
    assert "her_rl/conf/config.yaml" in expected and "her_rl/conf/env/bitflip.yaml" in expected
    assert {n for n in names if n.startswith("her_rl/conf/") and n.endswith(".yaml")} == expected
    assert any(n.endswith("entry_points.txt") for n in names)
    assert not [n for n in names if n.startswith(("bench/", "her_rl/bench/"))]
    assert "her_rl/run/runner.py" in names and "her_rl/config/compose.py" in names
