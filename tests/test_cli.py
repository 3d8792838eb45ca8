"""her-run as a user runs it: a subprocess per command, except the matrices of refused commands, which run
her-run's main in-process (the ``her_run_here`` fixture) beside a few console-script cases."""

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import forked
import pytest

ENV = {**os.environ, "HYDRA_FULL_ERROR": "0", "OMP_NUM_THREADS": "1"}


def test_smoke_run_writes_every_output(her_run, tmp_path):
    out = tmp_path / "run"
    p = forked.run([her_run, "algo=her_dqn", "env=bitflip", "n=5", "budget.env_steps=3000", "progress=false",
                    f"hydra.run.dir={out}"], cwd=tmp_path, env=ENV, text=True, timeout=180)
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
    (["algo=nope"], "unknown algo 'nope'; valid choices: "),
    (["env=nope"], "unknown env 'nope'; valid choices:"),
    (["tuned=her_dqn_bitflip_smal_n"], "unknown tuned file 'her_dqn_bitflip_smal_n'; valid choices:"),
    (["tuned=null"], "pass ~tuned"),
    (["algo=her_dqn", "env=cartpole"], "needs a goal-conditioned env"),
    (["n=0"], "n=0 is not allowed: n must be an integer in [1, 4096]"),
    (["algo.lr=-0.1"], "algo.lr=-0.1 is not allowed: algo.lr must be a finite number > 0"),
    (["algo.batch_size=512", "algo.buffer_size=100"], "larger than algo.buffer_size"),
    (["algo=ppo", "env=gym", "env.id=NoSuchEnv-v9"], "unknown gymnasium env id 'NoSuchEnv-v9'"),
    (["-m", "seed=0,1", "--cfg", "hydra"], "--cfg and --multirun cannot be combined"),  # Hydra: a ValueError traceback
    (["--cfg", "job", "--info"], "--cfg and --info cannot be combined"),
    (["--multirun", "seed=0,1", "-sc", "install=bash"], "--multirun and --shell-completion cannot be combined"),
])
def test_bad_input_exits_nonzero_with_one_clear_line(her_run_here, tmp_path, args, message):
    p = her_run_here([*args, "progress=false", f"hydra.run.dir={tmp_path / 'r'}"], tmp_path)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert message in p.stderr
    assert "Traceback" not in p.stderr
    assert p.stderr.strip().count("\n") == 0  # one line


def test_the_env_names_are_the_env_config_groups():
    """A new her_rl/conf/env/NAME.yaml is an env name at once: no list to keep beside it."""
    import her_rl
    from her_rl.errors import ConfigError
    from her_rl.config.registry import ENVS, check_env_name

    groups = sorted(p.stem for p in (Path(her_rl.__file__).parent / "conf" / "env").glob("*.yaml"))
    assert list(ENVS) == groups and {"bitflip", "gym", "fetch_push"} <= set(groups)
    for name in groups:
        check_env_name(name)
    with pytest.raises(ConfigError, match=f"^unknown env 'nope'; valid choices: {', '.join(groups)}$"):
        check_env_name("nope")


def _tb_steps(logdir: Path, tag: str) -> list[int]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(logdir), size_guidance={"scalars": 0})
    acc.Reload()
    return [e.step for e in acc.Scalars(tag)]


def test_kill_and_resume_continues_without_losing_or_duplicating_steps(her_run, tmp_path):
    out = tmp_path / "run"
    args = [her_run, "n=8", "budget.env_steps=15000", "eval.stop_when_solved=false", "checkpoint.every_s=1",
            "progress=false", f"hydra.run.dir={out}"]
    proc = forked.Popen(args, cwd=tmp_path, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    ckpt = out / "checkpoint.pt"
    deadline = time.time() + 120
    while time.time() < deadline and not (ckpt.exists() and ckpt.stat().st_size > 0):
        time.sleep(0.2)
    time.sleep(1.5)  # let it train past the checkpoint, so there is something to purge
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert ckpt.exists(), "no checkpoint before the kill"
    assert not (out / "results.json").exists(), "run finished before it could be killed"

    p = forked.run(args + ["resume=true"], cwd=tmp_path, env=ENV, text=True, timeout=300)
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
    assert forked.run(base, cwd=tmp_path, env=ENV, timeout=120).returncode == 0
    p = forked.run(base, cwd=tmp_path, env=ENV, text=True, timeout=120)
    assert p.returncode == 2 and "resume=true" in p.stderr


def test_saved_agent_is_evaluated_from_the_command_line(her_run, tmp_path):
    out = tmp_path / "run"
    p = forked.run([her_run, "n=6", "budget.env_steps=20000", "progress=false", f"hydra.run.dir={out}"],
                   cwd=tmp_path, env=ENV, text=True, timeout=180)
    assert p.returncode == 0, p.stderr
    p = forked.run([her_run, f"load={out / 'checkpoint.pt'}", "eval.episodes=50", f"hydra.run.dir={tmp_path / 'ev'}"],
                   cwd=tmp_path, env=ENV, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    report = json.loads(p.stdout.strip().splitlines()[-1])
    assert report["episodes"] == 50 and report["eval_success_rate"] >= 0.9


def test_sweep_runs_jobs_in_parallel_with_joblib(her_run, tmp_path):
    p = forked.run([her_run, "-m", "algo=her_dqn", "env=bitflip", "n=3,4", "seed=0,1", "budget.env_steps=300",
                    "progress=false", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2",
                    f"hydra.sweep.dir={tmp_path / 'sweep'}"], cwd=tmp_path, env=ENV,
                   text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    results = [json.loads(f.read_text()) for f in (tmp_path / "sweep").glob("*/results.json")]
    assert sorted((r["n"], r["seed"]) for r in results) == [(3, 0), (3, 1), (4, 0), (4, 1)]
    assert "Joblib" in p.stdout + p.stderr


def test_sigterm_stops_cleanly_with_a_checkpoint(her_run, tmp_path):
    out = tmp_path / "run"
    args = [her_run, "n=8", "budget.env_steps=200000", "eval.stop_when_solved=false", "progress=false",
            f"hydra.run.dir={out}"]
    proc = forked.Popen(args, cwd=tmp_path, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and not list((out / "tb").glob("events.*")):
        time.sleep(0.2)
    time.sleep(1.0)
    proc.send_signal(signal.SIGTERM)
    stdout, _ = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM
    assert "checkpoint saved" in stdout and "resume=true" in stdout
    from her_rl.folder.checkpoint import load

    saved = load(out / "checkpoint.pt")
    assert 0 < saved["runner"]["env_steps"] < 200000


def test_on_policy_run_writes_return_results(her_run, tmp_path):
    out = tmp_path / "run"
    p = forked.run([her_run, "algo=ppo", "env=cartpole", "budget.env_steps=1024", "eval.every_iterations=2",
                    "progress=false", f"hydra.run.dir={out}"], cwd=tmp_path, env=ENV,
                   text=True, timeout=180)
    assert p.returncode == 0, p.stderr
    results = json.loads((out / "results.json").read_text())
    assert results["algo"] == "ppo" and results["env_steps"] >= 1024
    assert "eval_success_rate" not in results and results["eval_return"] > 0


# ---- hardening: what a user sees from the command line ---------------------------------------

def _one_line_refusal(p):
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert "Traceback" not in p.stderr and p.stderr.strip().count("\n") == 0, p.stderr
    assert p.stderr.startswith("her-run: error: ")


@pytest.mark.parametrize("args, message", [
    (["foo=1"], "unknown config key 'foo'"),
    (["algo.nope=1"], "unknown config key 'algo.nope'"),
    (["n=["], "malformed override 'n=['"),
    (["n=3,4"], "Ambiguous value for argument 'n=3,4'"),
    (["hydra/launcher=nope"], "Could not find 'hydra/launcher/nope'"),
    (["algo.k=1.5"], "algo.k=1.5 is not allowed"),
    (["resume=true"], "resume=true"),
    (["load=nope.pt"], "cannot load checkpoint nope.pt: no such file"),
    (["-m", "n=3,0"], "n=0 is not allowed"),
])
@pytest.mark.parametrize("run_dir", [False, True])
def test_refused_commands_create_no_folder(her_run_here, tmp_path, args, message, run_dir):
    extra = [f"hydra.run.dir={tmp_path / 'r'}"] if run_dir else []
    p = her_run_here([*args, "progress=false", *extra], tmp_path)
    _one_line_refusal(p)
    assert message in p.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args, says", [
    (["eval.episode=3"], "did you mean 'eval.episodes'? accepted: every_iterations"),
    (["sed=3"], "did you mean 'seed'? top-level keys: algo, env"),
    (["env=gym", "env.id=CartPole-v1", "env.kwargs.nope=1"], "+env.kwargs.nope=VALUE passes a new keyword argument"),
    (["algo.lrr=1"], "her-run --cfg job --package algo lists the learner's keys"),
])
def test_an_unknown_key_says_what_works_instead(her_run_here, tmp_path, args, says):
    p = her_run_here([*args, "progress=false"], tmp_path)
    _one_line_refusal(p)
    assert says in p.stderr and "adds a new one" not in p.stderr


@pytest.mark.parametrize("args, message", [
    (["algo.nope=1"], "unknown config key 'algo.nope'"),  # refused before Hydra
    # refused inside the job (whose empty folder is removed)
    (["n=abc"], "n='abc' is not allowed: n must be an integer"),
    (["algo._target_=os.system"], "only registered builders may be used"),
    (["algo=ppo", "env=gym", "env.id=Blackjack-v1"], "cannot read observations"),
])
@pytest.mark.parametrize("run_dir", [False, True])
def test_the_console_script_refuses_with_one_line_and_no_folder(her_run, tmp_path, args, message, run_dir):
    extra = [f"hydra.run.dir={tmp_path / 'r'}"] if run_dir else []
    p = subprocess.run([her_run, *args, "progress=false", *extra], cwd=tmp_path, env=ENV, capture_output=True,
                       text=True, timeout=120)
    _one_line_refusal(p)
    assert message in p.stderr
    assert list(tmp_path.iterdir()) == []


def _wait_for(path, proc, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline and not (path.exists() and path.stat().st_size > 0):
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    assert path.exists(), "timed out"


def test_a_second_run_on_a_live_runs_folder_is_refused(her_run, tmp_path):
    out = tmp_path / "run"
    first = forked.Popen([her_run, "n=8", "budget.env_steps=10000000", "eval.stop_when_solved=false",
                          "progress=false", f"hydra.run.dir={out}"], cwd=tmp_path, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(out / "checkpoint.pt", first)
        config = (out / "config.yaml").read_text()
        for extra in ([], ["resume=true"], ["n=9", "resume=auto"]):
            p = forked.run([her_run, *extra, "progress=false", f"hydra.run.dir={out}"], cwd=tmp_path, env=ENV, text=True, timeout=120)
            _one_line_refusal(p)
            assert f"is in use by another live her-run (pid {first.pid})" in p.stderr
        assert (out / "config.yaml").read_text() == config
    finally:
        first.send_signal(signal.SIGTERM)
        first.communicate(timeout=60)
    assert first.returncode == 128 + signal.SIGTERM


def test_runs_started_in_the_same_instant_get_their_own_folders(her_run, tmp_path):
    cmd = [her_run, "n=4", "budget.env_steps=200", "progress=false"]
    procs = [forked.Popen(cmd, cwd=tmp_path, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for _ in range(2)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    folders = list((tmp_path / "outputs" / "her_dqn-bitflip").iterdir())
    assert len(folders) == 2 and all((f / "results.json").is_file() for f in folders)
    assert all("-s0-" in f.name for f in folders)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGHUP])
def test_early_kill_or_hangup_then_resume_by_folder_continues(her_run, tmp_path, sig):
    """The first checkpoint comes after the first iteration (checkpoint.every_s is 60 here), so a
    run killed in its first seconds resumes from there, with only resume=true and the folder."""
    out = tmp_path / "run"
    proc = forked.Popen([her_run, "n=8", "budget.env_steps=10000000", "eval.stop_when_solved=false",
                         "progress=false", f"hydra.run.dir={out}"], cwd=tmp_path, env=ENV,
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    started = time.time()
    _wait_for(out / "checkpoint.pt", proc)
    assert time.time() - started < 50  # well before checkpoint.every_s
    proc.send_signal(sig)
    stdout, _ = proc.communicate(timeout=60)
    if sig == signal.SIGHUP:
        assert proc.returncode == 128 + signal.SIGHUP and "checkpoint saved" in stdout
    from her_rl.folder.checkpoint import load

    at = load(out / "checkpoint.pt")["runner"]["env_steps"]
    assert at > 0
    p = forked.run([her_run, "resume=true", f"budget.env_steps={at + 500}", f"hydra.run.dir={out}"],
                   cwd=tmp_path, env=ENV, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert f"resumed from {out / 'checkpoint.pt'} at env step {at:,}" in p.stdout
    results = json.loads((out / "results.json").read_text())
    assert results["n"] == 8 and results["env_steps"] >= at + 500
    steps = _tb_steps(out / "tb", "charts/SPS")
    assert steps == sorted(set(steps)) and len(steps) == results["iterations"]


def test_sweep_resume_auto_continues_every_job_in_place(her_run, tmp_path):
    sweep = tmp_path / "sweep"

    def launch(budget, *extra):
        return forked.run([her_run, "-m", "n=3,4", "seed=0", f"budget.env_steps={budget}", "progress=false",
                           "eval.stop_when_solved=false", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2",
                           *extra, f"hydra.sweep.dir={sweep}"], cwd=tmp_path, env=ENV,
                          text=True, timeout=300)
    p = launch(300)
    assert p.returncode == 0, p.stderr
    jobs = sorted(d.name for d in sweep.iterdir() if d.is_dir())
    assert jobs == ["n=3", "n=4"]  # named by the key the sweep varies
    p = launch(600, "resume=auto")
    assert p.returncode == 0, p.stderr
    assert sorted(d.name for d in sweep.iterdir() if d.is_dir()) == jobs
    for job in jobs:
        events = [json.loads(line)["event"] for line in (sweep / job / "history.jsonl").read_text().splitlines()]
        assert events == ["start", "resume"]
        assert json.loads((sweep / job / "results.json").read_text())["env_steps"] >= 600


def test_nonfinite_training_exits_3_with_one_line(her_run, tmp_path):
    p = forked.run([her_run, "n=4", "algo.lr=1e30", "progress=false", f"hydra.run.dir={tmp_path / 'r'}"],
                   cwd=tmp_path, env=ENV, text=True, timeout=120)
    assert p.returncode == 3 and p.stderr.strip().count("\n") == 0, p.stderr
    assert "non-finite losses/td_loss = nan in iteration 1" in p.stderr


def test_load_writes_eval_next_to_the_checkpoint(her_run, tmp_path):
    out = tmp_path / "run"
    assert forked.run([her_run, "n=4", "budget.env_steps=300", "eval.episodes=9", "progress=false",
                       f"hydra.run.dir={out}"], cwd=tmp_path, env=ENV, timeout=120).returncode == 0
    p = forked.run([her_run, f"load={out}"], cwd=tmp_path, env=ENV, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert json.loads((out / "eval.json").read_text())["episodes"] == 9  # the saved run's evaluation size
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]  # no outputs/ folder


# ---- what a run prints: progress in a terminal and in a log, the final line, HParams -----------

PROGRESS_RUN = ["n=4", "budget.env_steps=3000", "eval.every_iterations=1"]
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _in_pty(cmd, cwd, columns=80, timeout=180):
    """Run `cmd` with stdin/stdout/stderr on a pseudo-terminal `columns` wide; everything it wrote."""
    import fcntl
    import pty
    import select
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    proc = subprocess.Popen(cmd, cwd=cwd, env={**ENV, "COLUMNS": str(columns)}, stdin=slave, stdout=slave,
                            stderr=slave, close_fds=True)
    os.close(slave)
    out, deadline = b"", time.time() + timeout
    while time.time() < deadline:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            out += chunk
        elif proc.poll() is not None:
            break
    os.close(master)
    assert proc.wait(timeout=30) == 0, out.decode(errors="replace")[-2000:]
    return out.decode("utf-8", errors="replace")


def _screen_lines(text):
    return [line for line in re.split(r"[\r\n]", ANSI.sub("", text)) if line.strip()]


def test_progress_in_an_80_column_terminal_fits_and_shows_the_evaluation(her_run, tmp_path):
    lines = _screen_lines(_in_pty([her_run, *PROGRESS_RUN], tmp_path))
    assert max(len(line) for line in lines[:-1]) <= 80, max(lines[:-1], key=len)  # all but the final line
    bars = [line for line in lines if line.startswith("her_dqn/bitflip ")]
    assert any("eval=" in line for line in bars), lines
    assert re.match(r"her_dqn/bitflip (solved|done)\|", bars[-1]), bars[-1]  # ended, not frozen at a percentage
    assert all(line.count("/s") <= 1 for line in bars)  # the speed once
    final = lines[-1]
    assert final.startswith(("solved: eval success", "not solved: eval success")) and len(final) <= 100, final
    assert final.split(" -> ")[1].startswith("outputs/her_dqn-bitflip/")  # relative to where her-run ran
    results = json.loads((tmp_path / final.split(" -> ")[1] / "results.json").read_text())
    assert f"eval success {results['eval_success_rate']:.2f} " in final  # the number results.json holds


@pytest.mark.parametrize("results, says", [({"eval_return": 0.99}, "eval return 0.99 "),  # not 1.0
                                           ({"eval_return": 500.0}, "eval return 500 "),
                                           ({"eval_success_rate": 1 / 3}, "eval success 0.3333 "),
                                           ({"eval_success_rate": 0.96}, "eval success 0.96 ")])
def test_the_closing_line_says_the_number_results_json_holds(tmp_path, results, says):
    from her_rl.run.results import final_line

    assert says in final_line({**results, "solved": False, "env_steps": 1000}, tmp_path)


def test_progress_in_a_log_has_no_bar_and_short_lines(her_run, tmp_path):
    log, elsewhere = tmp_path / "run.log", tmp_path / "elsewhere"
    elsewhere.mkdir()
    with open(log, "w") as f:
        p = forked.run([her_run, *PROGRESS_RUN, "algo.double_dqn=false", "algo.lr=1e-3",
                        f"hydra.run.dir={tmp_path / 'run'}"], cwd=elsewhere, env=ENV, stdout=f, stderr=f,
                       timeout=180)
    assert p.returncode == 0, log.read_text()
    text = log.read_text()
    assert "\r" not in text and "\x1b" not in text
    lines = text.splitlines()
    assert max(len(line) for line in lines) < 200
    assert re.match(r"her_dqn/bitflip (solved|done) \S+/3k steps .*eval=", lines[-2]), lines
    assert lines[-1].endswith(f" -> {tmp_path / 'run'}")  # the folder is not below the current one: absolute
    # the HParams tab: numbers as numbers, booleans as booleans
    hparams = _hparams(tmp_path / "run" / "tb")
    assert hparams["n"] == ("number_value", 4.0) and hparams["algo.lr"] == ("number_value", 0.001)
    assert hparams["algo.double_dqn"] == ("bool_value", False) and hparams["algo"] == ("string_value", "her_dqn")


def _hparams(logdir: Path) -> dict:
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    from tensorboard.plugins.hparams.plugin_data_pb2 import HParamsPluginData

    for path in logdir.glob("events.*"):
        for event in EventFileLoader(str(path)).Load():
            for value in event.summary.value:
                data = HParamsPluginData.FromString(value.metadata.plugin_data.content)
                if value.tag.startswith("_hparams_") and data.HasField("session_start_info"):
                    return {k: (v.WhichOneof("kind"), getattr(v, v.WhichOneof("kind")))
                            for k, v in data.session_start_info.hparams.items()}
    raise AssertionError(f"no HParams in {logdir}")


def test_hparams_of_types_the_given_overrides():
    from her_rl.run.logger import hparams_of

    config = {"algo": {"name": "her_dqn", "_target_": "x", "lr": 0.001, "strategy": "future"},
              "env": {"name": "bitflip", "id": "her_rl/BitFlip-v0"}, "seed": 0, "n": 10,
              "eval": {"stop_when_solved": False, "success_threshold": 1}}
    got = hparams_of(config, ["n=10", "algo.lr=1e-3", "eval.stop_when_solved=false", "eval.success_threshold=1",
                              "+extra=1.5", "+flag=true", "+name=on_policy", "+items=[1,2]", "hydra.run.dir=x", "~tuned"])
    assert got["n"] == 10 and got["algo.lr"] == 0.001 and got["eval.success_threshold"] == 1
    assert "eval.stop_when_solved" not in got  # bookkeeping (her_rl/config/saved.py), not a hyperparameter
    assert got["extra"] == 1.5 and got["flag"] is True and got["name"] == "on_policy"
    assert got["items"] == "[1,2]" and got["tuned"] == "" and "hydra.run.dir" not in got


def test_a_sweep_names_its_jobs_in_the_progress_lines(her_run, tmp_path):
    p = forked.run([her_run, "-m", "n=3,4", "budget.env_steps=300", "hydra/launcher=joblib",
                    "hydra.launcher.n_jobs=2", f"hydra.sweep.dir={tmp_path / 'sweep'}"], cwd=tmp_path, env=ENV, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert re.search(r"^#0 n=3 (solved|done) ", p.stderr, re.M) and re.search(r"^#1 n=4 (solved|done) ", p.stderr, re.M)


# ---- Optuna: her-run's objectives are maximised ------------------------------------------------

def test_optuna_direction_minimize_is_refused(her_run, tmp_path):
    p = forked.run([her_run, "-m", "hydra/sweeper=optuna", "hydra.sweeper.direction=minimize", "n=4",
                    f"hydra.sweep.dir={tmp_path / 's'}"], cwd=tmp_path, env=ENV, text=True,
                   timeout=120)
    _one_line_refusal(p)
    assert "her-run's objectives are to be maximised" in p.stderr
    assert list(tmp_path.iterdir()) == []


def test_optuna_without_a_direction_maximises(her_run, tmp_path):
    from her_rl.run.sweep import optuna_settings

    assert optuna_settings(["-m", "hydra/sweeper=optuna", "--cfg", "hydra"])[:4] == \
        ["-m", "hydra/sweeper=optuna", "hydra.sweeper.direction=maximize", "hydra.sweep.subdir=trial-${hydra.job.num}"]
    assert optuna_settings(["n=3,4"]) == ["n=3,4"]  # other sweepers: left alone
    p = forked.run([her_run, "hydra/sweeper=optuna", "--cfg", "hydra"], cwd=tmp_path, env=ENV, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "direction: maximize" in p.stdout  # the config the sweeper gets (Optuna's default: minimize)
    pytest.importorskip("hydra_plugins.hydra_optuna_sweeper", reason="the tune extra is not installed")
    sweep = tmp_path / "opt"
    p = forked.run([her_run, "-m", "hydra/sweeper=optuna", "hydra.sweeper.n_trials=2", "n=4",
                    "algo.lr=choice(0.00001,0.003)", "budget.env_steps=200", "eval.stop_when_solved=false",
                    "progress=false", f"hydra.sweep.dir={sweep}"], cwd=tmp_path, env=ENV,
                   text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    import yaml

    scores = [json.loads(f.read_text())["eval_success_rate"] for f in sweep.glob("*/results.json")]
    assert len(scores) == 2 and {f.name for f in sweep.glob("trial-*")} == {"trial-0", "trial-1"}
    assert yaml.safe_load((sweep / "optimization_results.yaml").read_text())["best_value"] == max(scores)
