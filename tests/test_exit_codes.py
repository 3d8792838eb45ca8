"""Exit statuses follow the shell's convention: a signal ends her-run with 128 + its number and one line
that says what is on disk, wherever it lands: in the checks, the env probe, the start of a run, ``load=``.

The signal lands at a point the test chooses: the user's env module sleeps there (at its import, in
the env's constructor before any run folder exists, or once the run folder holds config.yaml) after
writing a mark file, and the test sends the signal once the mark is there.
"""

import os
import signal
import subprocess
import sys
import textwrap
import time

import forked
import pytest

PAUSING_ENV = textwrap.dedent('''
    import os
    import time
    from pathlib import Path

    import gymnasium as gym
    import numpy as np
    from gymnasium import spaces


    def pause(point):  # sleep where the test asked, after telling it so
        if point and os.environ.get("PAUSE_AT") == point:
            Path("mark").write_text(point)
            time.sleep(120)


    pause("import")


    class Steady(gym.Env):
        def __init__(self):
            pause("written" if Path("run", "config.yaml").exists() else "probe" if not Path("run").exists() else "")
            self.observation_space = spaces.Box(0, 10, (2,), np.float32)
            self.action_space = spaces.Discrete(2)

        def reset(self, seed=None, options=None):
            super().reset(seed=seed)
            self.t = 0
            return np.array([0.0, 1.0], np.float32), {}

        def step(self, action):
            self.t += 1
            return np.array([self.t, 1.0], np.float32), 1.0, self.t >= 5, False, {}


    gym.register(id="Steady-v0", entry_point=Steady)
''')
RUN = ["algo=ppo", "env=gym", "env.id=pausing:Steady-v0", "budget.env_steps=64", "progress=false", "hydra.run.dir=run"]


@pytest.fixture
def user_dir(tmp_path):
    (tmp_path / "pausing.py").write_text(PAUSING_ENV)
    return tmp_path


def _sigint_default():
    """In the child before exec: a background job (``cmd &``) inherits SIGINT ignored, and her-run rightly
    keeps an ignored signal ignored, so a test that sends SIGINT restores its default first."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _env(user_dir, point):
    return {**os.environ, "HYDRA_FULL_ERROR": "0", "OMP_NUM_THREADS": "1", "PYTHONPATH": str(user_dir),
            "PAUSE_AT": point}


def _stop_at(proc, user_dir, sig, timeout=120):
    """Send ``sig`` once the env module has paused; her-run's (stdout, stderr) once it has ended."""
    deadline = time.time() + timeout
    while not (user_dir / "mark").exists():
        assert proc.poll() is None, proc.communicate()
        assert time.time() < deadline, "the env never paused"
        time.sleep(0.05)
    proc.send_signal(sig)
    return proc.communicate(timeout=60)


def _one_line(err, line):
    assert "Traceback" not in err and err.strip().count("\n") == 0, err
    assert err.strip() == line, err


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
@pytest.mark.parametrize("point", ["import", "probe"])
def test_a_signal_during_the_checks_is_128_plus_it_and_nothing_written(her_run, user_dir, sig, point):
    proc = forked.Popen([her_run, *RUN], cwd=user_dir, env=_env(user_dir, point), text=True,
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, err = _stop_at(proc, user_dir, sig)
    assert proc.returncode == 128 + sig
    _one_line(err, f"her-run: stopped by signal {int(sig)} before training started; nothing was written")
    assert sorted(p.name for p in user_dir.iterdir() if p.name != "__pycache__") == ["mark", "pausing.py"]


def test_the_console_script_itself_exits_143_during_the_probe(her_run, user_dir):
    proc = subprocess.Popen([her_run, *RUN], cwd=user_dir, env=_env(user_dir, "probe"), text=True, preexec_fn=_sigint_default,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, err = _stop_at(proc, user_dir, signal.SIGTERM)
    assert proc.returncode == 143  # not -15: killed by the signal
    _one_line(err, "her-run: stopped by signal 15 before training started; nothing was written")
    assert not (user_dir / "run").exists()


def test_a_signal_before_the_first_checkpoint_names_the_folder_and_how_to_start_it_again(her_run, user_dir):
    proc = forked.Popen([her_run, *RUN], cwd=user_dir, env=_env(user_dir, "written"), text=True,
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, err = _stop_at(proc, user_dir, signal.SIGTERM)
    assert proc.returncode == 143
    run = user_dir / "run"  # named as the command gave it (hydra.run.dir=run), so the line's command works here
    _one_line(err, "her-run: stopped by signal 15 before the run's first checkpoint; run folder run holds none: "
                   "her-run resume=auto hydra.run.dir=run env.id=pausing:Steady-v0 starts it again")
    assert (run / "config.yaml").is_file() and not (run / "checkpoint.pt").exists()
    again = forked.run([her_run, "resume=auto", "hydra.run.dir=run", "env.id=pausing:Steady-v0", "progress=false"],
                       cwd=user_dir,
                       env=_env(user_dir, ""), text=True, timeout=180)  # the command the line gives
    assert again.returncode == 0, again.stderr
    assert (run / "checkpoint.pt").is_file()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_during_a_load_evaluation_is_128_plus_it(her_run, user_dir, sig):
    trained = forked.run([her_run, *RUN], cwd=user_dir, env=_env(user_dir, ""), text=True, timeout=180)
    assert trained.returncode == 0, trained.stderr
    proc = forked.Popen([her_run, "load=run", "env=gym", "env.id=pausing:Steady-v0", "algo=ppo"], cwd=user_dir,
                        env=_env(user_dir, "written"), text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, err = _stop_at(proc, user_dir, sig)
    assert proc.returncode == 128 + sig
    _one_line(err, f"her-run: stopped by signal {int(sig)} during the load= evaluation")
    assert not (user_dir / "run" / "eval.json").exists()


@pytest.mark.parametrize("raised, code, line", [
    (KeyboardInterrupt(), 130, "her-run: interrupted"),
    (KeyboardInterrupt("aborted by a second Ctrl-C"), 130, "her-run: aborted by a second Ctrl-C"),
])
def test_a_keyboard_interrupt_anywhere_is_130_and_one_line(her_run_here, tmp_path, monkeypatch, raised, code, line):
    from her_rl import cli

    def interrupted(argv):
        raise raised
    monkeypatch.setattr(cli, "_preflight", interrupted)
    p = her_run_here(["n=4"], tmp_path)
    assert p.returncode == code
    _one_line(p.stderr, line)


def test_her_run_hands_the_signals_back_and_keeps_an_ignored_one_ignored(her_run_here, tmp_path, monkeypatch):
    """``nohup her-run``: a hangup stays ignored; a Python caller of main gets its handlers back."""
    from her_rl import cli

    seen = {}
    monkeypatch.setattr(cli, "_preflight", lambda argv: seen.update(
        hup=signal.getsignal(signal.SIGHUP), term=signal.getsignal(signal.SIGTERM)) or "checked")
    monkeypatch.setattr(cli, "_run", lambda checked: None)
    before = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        term = signal.getsignal(signal.SIGTERM)
        assert her_run_here(["n=4"], tmp_path).returncode == 0
        assert seen["hup"] is signal.SIG_IGN and seen["term"] is not term
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN and signal.getsignal(signal.SIGTERM) is term
    finally:
        signal.signal(signal.SIGHUP, before)


@pytest.mark.skipif(sys.platform != "linux", reason="the fork-based harness")
def test_a_second_signal_while_stopping_exits_at_once(her_run, user_dir, monkeypatch):
    """The first signal unwinds (finally blocks run); a second one then ends the process, 128 + it."""
    from her_rl.run.signals import Stage

    def slow_line(stage, signum):
        (user_dir / "mark").write_text("stopping")
        time.sleep(60)
    monkeypatch.setattr(Stage, "stopped_line", slow_line)  # the fork inherits it
    proc = forked.Popen([her_run, *RUN], cwd=user_dir, env=_env(user_dir, "probe"), text=True,
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    while not (user_dir / "mark").exists():
        assert proc.poll() is None
        time.sleep(0.05)
    (user_dir / "mark").unlink()
    proc.send_signal(signal.SIGTERM)
    _, err = _stop_at(proc, user_dir, signal.SIGINT)
    assert proc.returncode == 130 and "Traceback" not in err


def test_the_stop_line_says_what_is_on_disk(tmp_path, monkeypatch):
    from her_rl.run.signals import Stage

    monkeypatch.chdir(tmp_path)
    stage, run = Stage(), tmp_path / "outputs" / "run"
    assert stage.stopped_line(15) == "stopped by signal 15 before training started; nothing was written"
    stage.name = "job"
    assert stage.stopped_line(15).endswith("before training started; no run file was written")
    stage.folder = run
    run.mkdir(parents=True)  # Hydra made it; the run wrote nothing: removed, with its empty parents
    assert stage.stopped_line(2).endswith("before training started; nothing was written")
    assert list(tmp_path.iterdir()) == []
    run.mkdir(parents=True)
    (run / "config.yaml").write_text("n: 4\n")
    assert stage.stopped_line(1) == (f"stopped by signal 1 before the run's first checkpoint; run folder {run} holds "
                                     f"none: her-run resume=auto hydra.run.dir={run} starts it again")
    (run / "checkpoint.pt").write_bytes(b"")
    assert "keeps its last checkpoint: her-run resume=true" in stage.stopped_line(15)
    stage.name, stage.sweep = "sweep", tmp_path / "sw"
    assert "during the sweep in " in stage.stopped_line(15) and run.is_dir()
    stage.name = "done"
    assert stage.stopped_line(15) == "stopped by signal 15 as her-run was ending"


PAUSE_AT_TORCH = textwrap.dedent('''
    import sys
    import time
    from pathlib import Path


    class PauseAtTorch:  # the first import of torch sleeps (after telling the test so), then goes on
        def find_spec(self, name, path=None, target=None):
            if name == "torch" and not Path("mark").exists():
                Path("mark").write_text("torch")
                time.sleep(120)
            return None


    sys.meta_path.insert(0, PauseAtTorch())
''')


def test_her_rl_and_her_runs_module_import_no_torch():
    """torch takes seconds to import: it comes after her-run has taken its signals, not before."""
    code = "import sys, her_rl, her_rl.cli; print(sorted(m for m in ('torch', 'hydra') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['hydra']"


def test_a_command_refused_by_its_names_is_told_before_torch_loads(tmp_path):
    """The gate loads no torch of its own: an unknown option or a malformed override is one line in the
    time Python starts, not after the seconds torch takes (a value's check reads the learner's class: torch)."""
    code = ("import sys\nfrom her_rl import cli\nsys.argv[1:] = sys.argv[2:]\ntry:\n    cli.main()\n"
            "except SystemExit as exc:\n    print(exc.code, 'torch' in sys.modules)")
    for argv in (["algo=nope"], ["env=nowhere", "seed=1"], ["n=="]):
        p = subprocess.run([sys.executable, "-c", code, "--", *argv], cwd=tmp_path, capture_output=True, text=True)
        assert p.stdout.split() == ["2", "False"], (argv, p.stdout, p.stderr)
        assert p.stderr.startswith("her-run: error:") and len(p.stderr.splitlines()) == 1, p.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_while_torch_is_imported_is_128_plus_it(her_run, user_dir, sig):
    (user_dir / "sitecustomize.py").write_text(PAUSE_AT_TORCH)
    proc = subprocess.Popen([her_run, *RUN], cwd=user_dir, env=_env(user_dir, ""), text=True, preexec_fn=_sigint_default,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, err = _stop_at(proc, user_dir, sig)
    assert proc.returncode == 128 + sig
    _one_line(err, f"her-run: stopped by signal {int(sig)} before training started; nothing was written")
    assert not (user_dir / "run").exists()


def test_a_signal_while_python_shuts_down_after_her_run_exits_128_plus_it_quietly(tmp_path):
    """Another library's exit handler still running (here: one that sleeps) when a Ctrl-C comes: no
    'Exception ignored in atexit callback', no exit 0."""
    script = ("import atexit, signal, sys, time\n"
              "signal.signal(signal.SIGINT, signal.default_int_handler)\n"  # a background job inherits SIG_IGN
              "atexit.register(time.sleep, 20)\nfrom her_rl.cli import main\n"
              "sys.argv = ['her-run', '--version']\nmain()\nprint('ended', flush=True)\n")
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=tmp_path, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdout.readline().startswith("her-rl ") and proc.stdout.readline() == "ended\n"
    time.sleep(2.0)  # in the exit handler by then, on a busy machine too
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=15)
    assert proc.returncode == 130 and "Exception ignored" not in err and "Traceback" not in err, err
