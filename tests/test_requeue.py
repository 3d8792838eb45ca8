"""A preempted cluster job checkpoints, is requeued by submitit and continues in place.

The real mechanism, end to end, with submitit's local executor (what hydra/launcher=submitit_slurm
does on SLURM, minus sbatch): the job gets submitit's preemption signal (SIGUSR2), her-run ends
the iteration, checkpoints, hands over to submitit, which requeues the job with its original
overrides (no resume=...); the requeued job resumes from the checkpoint.
"""

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import forked
import pytest

from her_rl.run import requeue
from her_rl.errors import ConfigError
from her_rl.config.compose import compose
from her_rl.run.runner import run

ENV = {**os.environ, "HYDRA_FULL_ERROR": "0", "OMP_NUM_THREADS": "1"}
# the paper's 16-episode cycle, not the bit-flip tuned file: long enough iterations to preempt, few of them
PAPER_CYCLE = ["algo.episodes_per_cycle=16", "algo.updates_per_step=null", "algo.batch_size=128"]


def _tb_steps(logdir: Path, tag: str) -> list[int]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(logdir), size_guidance={"scalars": 0})
    acc.Reload()
    return [e.step for e in acc.Scalars(tag)]


def test_a_preempted_submitit_job_is_requeued_and_resumes_in_place(her_run, tmp_path):
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher", reason="the submitit launcher extra is not installed")
    sweep = tmp_path / "sweep"
    proc = forked.Popen([her_run, "-m", "n=6", "seed=0", "budget.env_steps=10000", "eval.stop_when_solved=false",
                         "progress=false", *PAPER_CYCLE, "hydra/launcher=submitit_local", f"hydra.sweep.dir={sweep}"],
                        cwd=tmp_path, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 120
    job = None  # the one job's folder, named by its overrides
    while time.time() < deadline and not (job and (job / "checkpoint.pt").exists() and (job / ".her-run.lock").exists()):
        job = next((d for d in sweep.glob("*") if d.is_dir()), None) if sweep.exists() else None
        time.sleep(0.2)
    time.sleep(1.0)
    pid = int((job / ".her-run.lock").read_text().split()[0])
    assert not (job / "results.json").exists(), "the job finished before it could be preempted"
    os.kill(pid, signal.SIGUSR2)  # what SLURM sends (through submitit) before preempting the job
    out, _ = proc.communicate(timeout=240)
    assert proc.returncode == 0, out

    events = [json.loads(line) for line in (job / "history.jsonl").read_text().splitlines()]
    assert [e["event"] for e in events] == ["start", "resume"], events
    assert events[1]["pid"] != pid and events[1]["env_steps"] > 0  # a new process, continuing, not restarting
    assert "resume=" not in " ".join(events[1]["overrides"])  # requeued with the original overrides
    results = json.loads((job / "results.json").read_text())
    assert results["env_steps"] >= 10000
    assert not (job / requeue.MARKER).exists()
    steps = _tb_steps(job / "tb", "charts/SPS")
    assert steps == sorted(set(steps)) and len(steps) == results["iterations"]


def test_the_requeue_marker_resumes_only_inside_a_submitit_job(tmp_path, monkeypatch):
    common = ["n=4", "progress=false", "budget.env_steps=300", "eval.stop_when_solved=false"]
    run(compose(common), out_dir=tmp_path)
    (tmp_path / requeue.MARKER).write_text("{}\n")
    monkeypatch.delenv("SUBMITIT_EXECUTOR", raising=False)
    with pytest.raises(ConfigError, match="already holds a checkpoint"):  # outside a cluster job: no silent resume
        run(compose(common), out_dir=tmp_path)
    monkeypatch.setenv("SUBMITIT_EXECUTOR", "slurm")
    results = run(compose(["n=4", "progress=false", "budget.env_steps=600", "eval.stop_when_solved=false"]),
                  out_dir=tmp_path)
    assert results["env_steps"] >= 600 and not (tmp_path / requeue.MARKER).exists()
