"""scripts/device_check.py: one row per learner and device, with the updates a hindsight learner made."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

import device_check  # noqa: E402


def test_device_check_writes_a_row_per_learner_and_device(tmp_path, capsys):
    out = tmp_path / "rows.json"
    assert device_check.main(["--algos", "her_dqn", "ppo", "--steps", "300", "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [(r["algo"], r["device"]) for r in rows] == [("her_dqn", "cpu"), ("ppo", "cpu")]
    assert rows[0]["updates"] > 0 and rows[0]["updates_per_s"] > 0 and "updates" not in rows[1]
    assert all(r["env_steps"] >= 300 and r["env_steps_per_s"] > 0 for r in rows)
    assert "| her_dqn | cpu |" in capsys.readouterr().out
