"""Honest results on a full disk: ``results.json`` and the printed verdict name only files on disk, a
run whose final checkpoint or results cannot be written exits 5 with one line naming the checkpoint
kept, and a run that cannot start leaves nothing behind.

A full disk is played by RLIMIT_FSIZE (any user: writes past the limit fail with EFBIG, as ENOSPC
fails them), and, where the tests run as root, by a small tmpfs."""

import json
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from her_rl.folder import checkpoint

RUN = ["algo=her_dqn", "env=bitflip", "n=8", "progress=false", "eval.episodes=5", "seed=0"]
ENV = {**os.environ, "HYDRA_FULL_ERROR": "0"}


def _her_run(her_run, args, cwd, file_limit=None):
    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails instead of killing
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_limit, file_limit))
    return subprocess.run([her_run, *args], cwd=cwd, env=ENV, capture_output=True, text=True, timeout=300,
                          preexec_fn=limit if file_limit else None)


def _one_line(p):
    assert "Traceback" not in p.stderr, p.stderr
    errors = [line for line in p.stderr.splitlines() if line.startswith("her-run: error:")]
    assert len(errors) == 1, p.stderr
    return errors[0]


def test_a_checkpoint_that_never_fits_is_exit_5_without_results(her_run, tmp_path):
    """Every checkpoint fails (64 KB per file), the small logs fit: no results.json naming a missing file."""
    out = tmp_path / "run"
    p = _her_run(her_run, [*RUN, "budget.env_steps=400", "eval.stop_when_solved=false", f"hydra.run.dir={out}"],
                 tmp_path, file_limit=64 * 1024)
    assert p.returncode == 5, (p.stdout, p.stderr)
    line = _one_line(p)
    assert "could not write the final checkpoint" in line and "no checkpoint was written" in line
    assert '"env_steps": ' in line  # the numbers are kept on the terminal
    assert not (out / "results.json").exists() and not (out / "checkpoint.pt").exists()
    assert "solved" not in p.stdout.split("\n")[-2:]  # no verdict line


def test_results_name_a_loadable_checkpoint_at_their_env_step(her_run, tmp_path):
    out = tmp_path / "run"
    p = _her_run(her_run, [*RUN, "budget.env_steps=400", f"hydra.run.dir={out}"], tmp_path)
    assert p.returncode == 0, p.stderr
    results = json.loads((out / "results.json").read_text())
    saved = checkpoint.load(results["checkpoint"])
    assert saved["runner"]["env_steps"] == results["env_steps"]


def test_a_resume_removes_the_earlier_results_until_it_writes_its_own(her_run, tmp_path):
    """results.json of the first end names a checkpoint the resumed run overwrites; a resume that
    cannot write its final checkpoint must not leave it behind."""
    out = tmp_path / "run"
    assert _her_run(her_run, [*RUN, "budget.env_steps=200", "eval.stop_when_solved=false",
                              f"hydra.run.dir={out}"], tmp_path).returncode == 0
    assert (out / "results.json").exists()
    size = (out / "checkpoint.pt").stat().st_size
    p = _her_run(her_run, ["resume=true", "budget.env_steps=4000", "eval.stop_when_solved=false",
                           f"hydra.run.dir={out}"], tmp_path, file_limit=size + 1024)
    assert p.returncode == 5, (p.stdout, p.stderr)
    line = _one_line(p)
    kept = checkpoint.load(out / "checkpoint.pt")["runner"]["env_steps"]
    assert f"the checkpoint at env step {kept:,} is kept" in line
    assert not (out / "results.json").exists()


@pytest.mark.skipif(os.geteuid() != 0 or sys.platform != "linux", reason="mounting a tmpfs needs root")
@pytest.mark.parametrize("size_kb", [0, 300, 1600, 3072])
def test_small_disks(her_run, tmp_path, size_kb):
    """On a disk of a few MB: exit 0 only with a loadable checkpoint at the results' env step; exit 5
    with no results.json otherwise; a disk too small to start on leaves nothing behind."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={max(size_kb, 4)}k", "tmpfs", str(disk)]).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        if size_kb == 0:  # a full disk
            subprocess.run(["dd", "if=/dev/zero", f"of={disk / 'fill'}", "bs=1k", "count=8"], capture_output=True)
        out = disk / "run"
        p = _her_run(her_run, [*RUN, "n=15", "budget.env_steps=6000", "eval.stop_when_solved=false",
                               "checkpoint.every_s=0", f"hydra.run.dir={out}"], tmp_path)
        assert "Traceback" not in p.stderr, p.stderr
        if p.returncode == 0:
            results = json.loads((out / "results.json").read_text())
            assert checkpoint.load(out / "checkpoint.pt")["runner"]["env_steps"] == results["env_steps"]
        else:
            assert p.returncode in (2, 5), (p.returncode, p.stderr)
            _one_line(p)
            assert not (out / "results.json").exists()
            if p.returncode == 2:  # could not start: nothing left
                assert not out.exists()
    finally:
        subprocess.run(["umount", str(disk)])


def test_checkpoint_save_on_full_disk_keeps_the_previous_file(tmp_path):
    path = tmp_path / "checkpoint.pt"
    checkpoint.save({"x": torch.zeros(1)}, path)
    before = path.read_bytes()
    code = ("import sys, torch; from her_rl.folder import checkpoint\n"
            "try:\n    checkpoint.save({'x': torch.zeros(100_000)}, sys.argv[1])\n"
            "except OSError as exc:\n    sys.exit(7)\n")

    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (len(before) + 100, len(before) + 100))
    p = subprocess.run([sys.executable, "-c", code, str(path)], preexec_fn=limit, capture_output=True, text=True)
    assert p.returncode == 7, p.stderr
    assert path.read_bytes() == before and [p.name for p in Path(tmp_path).iterdir()] == ["checkpoint.pt"]
