"""tests/forked.py, the harness most CLI tests start her-run through, against the real console
scripts: the same exit status and the same printed text."""

import subprocess
from pathlib import Path

import forked
import pytest


@pytest.mark.parametrize("args", [["her-run", "n=abc"], ["her-run", "--version"],
                                  ["her-summary", "no-such-folder"], ["her-run", "-m", "n=3", "--cfg", "job"]])
def test_a_forked_script_exits_and_prints_as_the_console_script_does(her_run, tmp_path, args):
    exe = str(Path(her_run).with_name(args[0]))
    real = subprocess.run([exe, *args[1:]], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    child = forked.run([exe, *args[1:]], cwd=tmp_path, text=True, timeout=120)
    assert (child.returncode, child.stdout, child.stderr) == (real.returncode, real.stdout, real.stderr)
    assert list(tmp_path.iterdir()) == []
