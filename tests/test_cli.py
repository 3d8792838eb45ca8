"""her-run as a user runs it: a subprocess per command."""

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

ENV = {**os.environ, "HYDRA_FULL_ERROR": "0", "OMP_NUM_THREADS": "1"}


def test_smoke_run_writes_every_output(her_run, tmp_path):
    out = tmp_path / "run"
    p = subprocess.run([her_run, "algo=her_dqn", "env=bitflip", "n=5", "budget.env_steps=3000", "progress=false",
                        f"hydra.run.dir={out}"], cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stderr
    results = json.loads((out / "results.json").read_text())
    for key in ("algo", "env", "seed", "env_steps", "wall_time_s", "eval_success_rate", "solved", "checkpoint"):
        assert key in results
    assert results["algo"] == "her_dqn" and results["n"] == 5
    assert Path(results["checkpoint"]).is_file()
    assert list((out / "tb").glob("events.out.tfevents.*"))
    from omegaconf import OmegaConf

    assert OmegaConf.load(out / "config.yaml").n == 5  # the resolved config of the run
    assert "eval success" in p.stdout


@pytest.mark.parametrize("args, message", [
    (["algo=nope"], "unknown algo 'nope'; valid choices: her_dqn, ppo, reinforce, rnd_ppo"),
    (["env=nope"], "unknown env 'nope'; valid choices:"),
    (["algo=her_dqn", "env=cartpole"], "needs a goal-conditioned env"),
    (["n=0"], "n=0 is not allowed: n must be an integer in [1, 4096]"),
    (["n=abc"], "n='abc' is not allowed: n must be an integer"),
    (["algo.lr=-0.1"], "algo.lr=-0.1 is not allowed: algo.lr must be a finite number > 0"),
    (["algo.batch_size=512", "algo.buffer_size=100"], "larger than algo.buffer_size"),
    (["algo._target_=os.system"], "only registered builders may be used"),
    (["algo=ppo", "env=gym", "env.id=NoSuchEnv-v9"], "unknown gymnasium env id 'NoSuchEnv-v9'"),
    (["algo=ppo", "env=gym", "env.id=Blackjack-v1"], "ppo"),
])
def test_bad_input_exits_nonzero_with_one_clear_line(her_run, tmp_path, args, message):
    p = subprocess.run([her_run, *args, "progress=false", f"hydra.run.dir={tmp_path / 'r'}"], cwd=tmp_path,
                       env=ENV, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert message in p.stderr
    assert "Traceback" not in p.stderr
    assert p.stderr.strip().count("\n") == 0  # one line


def _tb_steps(logdir: Path, tag: str) -> list[int]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(logdir), size_guidance={"scalars": 0})
    acc.Reload()
    return [e.step for e in acc.Scalars(tag)]


def test_kill_and_resume_continues_without_losing_or_duplicating_steps(her_run, tmp_path):
    out = tmp_path / "run"
    args = [her_run, "n=8", "budget.env_steps=15000", "eval.stop_when_solved=false", "checkpoint.every_s=1",
            "progress=false", f"hydra.run.dir={out}"]
    proc = subprocess.Popen(args, cwd=tmp_path, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    ckpt = out / "checkpoint.pt"
    deadline = time.time() + 120
    while time.time() < deadline and not (ckpt.exists() and ckpt.stat().st_size > 0):
        time.sleep(0.2)
    time.sleep(1.5)  # let it train past the checkpoint, so there is something to purge
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert ckpt.exists(), "no checkpoint before the kill"
    assert not (out / "results.json").exists(), "run finished before it could be killed"

    p = subprocess.run(args + ["resume=true"], cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "resumed from" in p.stdout
    resumed_at = int(p.stdout.split("at env step ")[1].split()[0].replace(",", ""))
    assert resumed_at > 0
    results = json.loads((out / "results.json").read_text())
    assert results["env_steps"] >= 15000
    steps = _tb_steps(out / "tb", "charts/SPS")
    assert steps == sorted(set(steps)), "duplicated or out-of-order steps after resume"
    assert steps[-1] == results["env_steps"]
    assert any(s <= resumed_at for s in steps) and any(s > resumed_at for s in steps)
    # every iteration logged exactly once: iterations count equals the number of SPS points
    assert len(steps) == results["iterations"]


def test_resume_is_refused_silently_overwriting(her_run, tmp_path):
    out = tmp_path / "run"
    base = [her_run, "n=4", "budget.env_steps=500", "progress=false", f"hydra.run.dir={out}"]
    assert subprocess.run(base, cwd=tmp_path, env=ENV, capture_output=True, timeout=120).returncode == 0
    p = subprocess.run(base, cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "resume=true" in p.stderr


def test_saved_agent_is_evaluated_from_the_command_line(her_run, tmp_path):
    out = tmp_path / "run"
    p = subprocess.run([her_run, "n=6", "budget.env_steps=20000", "progress=false", f"hydra.run.dir={out}"],
                       cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stderr
    p = subprocess.run([her_run, f"load={out / 'checkpoint.pt'}", "eval.episodes=50", f"hydra.run.dir={tmp_path / 'ev'}"],
                       cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    report = json.loads(p.stdout.strip().splitlines()[-1])
    assert report["episodes"] == 50 and report["eval_success_rate"] >= 0.9


def test_sweep_runs_jobs_in_parallel_with_joblib(her_run, tmp_path):
    p = subprocess.run([her_run, "-m", "algo=her_dqn", "env=bitflip", "n=3,4", "seed=0,1", "budget.env_steps=300",
                        "progress=false", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2",
                        f"hydra.sweep.dir={tmp_path / 'sweep'}"], cwd=tmp_path, env=ENV, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    results = [json.loads(f.read_text()) for f in (tmp_path / "sweep").glob("*/results.json")]
    assert sorted((r["n"], r["seed"]) for r in results) == [(3, 0), (3, 1), (4, 0), (4, 1)]
    assert "Joblib" in p.stdout + p.stderr


def test_sigterm_stops_cleanly_with_a_checkpoint(her_run, tmp_path):
    out = tmp_path / "run"
    args = [her_run, "n=8", "budget.env_steps=200000", "eval.stop_when_solved=false", "progress=false",
            f"hydra.run.dir={out}"]
    proc = subprocess.Popen(args, cwd=tmp_path, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and not list((out / "tb").glob("events.*")):
        time.sleep(0.2)
    time.sleep(1.0)
    proc.send_signal(signal.SIGTERM)
    stdout, _ = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM
    assert "checkpoint saved" in stdout and "resume=true" in stdout
    from her_rl.checkpoint import load

    saved = load(out / "checkpoint.pt")
    assert 0 < saved["runner"]["env_steps"] < 200000


def test_on_policy_run_writes_return_results(her_run, tmp_path):
    out = tmp_path / "run"
    p = subprocess.run([her_run, "algo=ppo", "env=cartpole", "budget.env_steps=1024", "eval.every_iterations=2",
                        "progress=false", f"hydra.run.dir={out}"], cwd=tmp_path, env=ENV, capture_output=True,
                       text=True, timeout=180)
    assert p.returncode == 0, p.stderr
    results = json.loads((out / "results.json").read_text())
    assert results["algo"] == "ppo" and results["env_steps"] >= 1024
    assert "eval_success_rate" not in results and results["eval_return"] > 0
