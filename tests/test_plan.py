"""Where a run may write, launchers that cannot start, and a second Ctrl-C: each refusal is one
line with nothing written (docs/safety.md)."""

import importlib.util
import os
import shutil
import signal
import subprocess
import time

import forked
import pytest

from her_rl.folder import rundir

ENV = {**os.environ, "HYDRA_FULL_ERROR": "0", "OMP_NUM_THREADS": "1"}
ROOT = os.geteuid() == 0  # root writes into read-only folders: those cases cannot be shown


def _her_run(her_run, cwd, *args, env=ENV):
    return forked.run([her_run, *args, "progress=false", "budget.env_steps=300"], cwd=cwd, env=env, text=True, timeout=180)


def _refused(p, code=2):
    assert p.returncode == code, (p.stdout, p.stderr)
    assert "Traceback" not in p.stderr and p.stderr.strip().count("\n") == 0, p.stderr
    assert p.stderr.startswith("her-run: error: ")


def _tree(folder):
    """Every path below ``folder`` with its kind and content: what a refused command must not change."""
    tree = {}
    for path in sorted(folder.rglob("*")):
        kind = "link" if path.is_symlink() else "dir" if path.is_dir() else "file"
        tree[str(path.relative_to(folder))] = (kind, path.read_bytes() if kind == "file" else None)
    return tree


@pytest.fixture
def user_files(tmp_path):
    """A folder of the user's own files, a file, a folder whose lock is a folder, one whose lock is a link."""
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "config.yaml").write_text("my: notes\n")
    (tmp_path / "mine" / "results.json").write_text("{}\n")
    (tmp_path / "afile").write_text("x\n")
    (tmp_path / "lockdir" / rundir.LOCK).mkdir(parents=True)
    (tmp_path / "victim").write_text("keep\n")
    (tmp_path / "linked").mkdir()
    (tmp_path / "linked" / rundir.LOCK).symlink_to(tmp_path / "victim")
    return tmp_path


@pytest.mark.parametrize("args, message", [
    (["hydra.run.dir="], "hydra.run.dir is empty"),
    (["hydra.run.dir=mine"], "run folder mine already holds other files than a her-rl run"),
    (["hydra.run.dir=."], "run folder . already holds other files than a her-rl run"),
    (["hydra.run.dir=afile"], "cannot use run folder afile: it is a file, not a folder"),
    (["hydra.run.dir=afile/run"], "is not a folder"),
    (["hydra.run.dir=/proc/her-rl-run"], "cannot use run folder /proc/her-rl-run: cannot write in /proc"),
    (["hydra.run.dir=lockdir"], "cannot open its lock file .her-run.lock (Is a directory)"),
    (["hydra.run.dir=linked"], "its lock file .her-run.lock is a symbolic link"),
    (["-m", "seed=0,1", "hydra.sweep.dir="], "hydra.sweep.dir is empty"),
    (["-m", "seed=0,1", "hydra.sweep.subdir="], "hydra.sweep.subdir is empty"),
    (["-m", "seed=0,1", "hydra.sweep.dir=mine"], "sweep folder mine already holds other files than a sweep"),
    (["-m", "seed=0,1", "hydra.sweep.dir=/proc/her-rl-sweep"], "cannot write in /proc"),
    (["-m", "seed=0,1", "hydra.sweep.dir=afile"], "it is a file, not a folder"),
])
def test_a_folder_that_is_not_a_runs_is_refused_and_left_as_it_was(her_run_here, user_files, args, message):
    before = _tree(user_files)
    p = her_run_here([*args, "progress=false", "budget.env_steps=300"], user_files)
    _refused(p)
    assert message in p.stderr
    assert _tree(user_files) == before


@pytest.mark.skipif(ROOT, reason="root writes into read-only folders")
@pytest.mark.parametrize("key", ["hydra.run.dir", "hydra.sweep.dir"])
@pytest.mark.parametrize("inside", [False, True])
def test_a_read_only_folder_is_one_line(her_run, tmp_path, key, inside):
    locked = tmp_path / "ro"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        target = locked / "new" if inside else locked
        p = _her_run(her_run, tmp_path, *(["-m", "seed=0,1"] if key == "hydra.sweep.dir" else []), f"{key}={target}")
        _refused(p)
        assert f"cannot write in {locked} (Permission denied)" in p.stderr and list(locked.iterdir()) == []
    finally:
        locked.chmod(0o755)


def test_what_counts_as_a_run_folder(tmp_path):
    def folder(*names):
        path = tmp_path / "-".join(names or ("empty",))
        path.mkdir()
        for name in names:
            (path / name).write_text("")
        return path

    assert rundir.is_run_folder(folder())
    assert rundir.is_run_folder(folder(rundir.LOCK, "results.json"))
    assert rundir.is_run_folder(folder(rundir.CHECKPOINT))
    assert rundir.is_run_folder(folder(rundir.CONFIG, rundir.HISTORY))
    assert not rundir.is_run_folder(folder(rundir.CONFIG, rundir.RESULTS))
    assert not rundir.is_run_folder(folder("her_rl.log"))
    assert rundir.is_run_folder(tmp_path / "her_rl.log", ignore=["her_rl.log"])  # Hydra's job log
    assert rundir.is_sweep_folder(folder(rundir.SWEEP_FILE)) and not rundir.is_sweep_folder(folder("notes.txt"))


# ---- launchers that cannot start ---------------------------------------------------------------

@pytest.mark.skipif(bool(shutil.which("sbatch") and shutil.which("srun")), reason="SLURM is installed here")
def test_slurm_launcher_without_slurm_is_one_line_and_leaves_no_sweep_folder(her_run, tmp_path):
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher", reason="the launchers extra is not installed")
    p = _her_run(her_run, tmp_path, "-m", "hydra/launcher=submitit_slurm", "seed=0,1")
    _refused(p)
    assert "hydra/launcher=submitit_slurm needs SLURM, but this machine has no" in p.stderr
    assert list(tmp_path.iterdir()) == []  # no multirun/<time>/ left behind


def test_a_launcher_whose_package_fails_to_import_is_one_line(her_run, tmp_path):
    pytest.importorskip("hydra_plugins.hydra_joblib_launcher", reason="the launchers extra is not installed")
    fake = tmp_path / "site" / "joblib"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('joblib is broken here')\n")
    env = {**ENV, "PYTHONPATH": str(tmp_path / "site")}
    p = _her_run(her_run, tmp_path, "-m", "hydra/launcher=joblib", "seed=0,1", env=env)
    _refused(p)
    assert "hydra/launcher=joblib cannot start: joblib is broken here" in p.stderr
    assert sorted(q.name for q in tmp_path.iterdir()) == ["site"]


def test_a_launcher_that_is_not_installed_names_its_extra(her_run, tmp_path):
    if importlib.util.find_spec("hydra_plugins.hydra_ray_launcher") is not None:
        pytest.skip("the ray extra is installed")
    p = _her_run(her_run, tmp_path, "-m", "hydra/launcher=ray", "seed=0,1")
    _refused(p)
    assert "Could not find 'hydra/launcher/ray'" in p.stderr and 'pip install -e ".[ray]"' in p.stderr
    assert list(tmp_path.iterdir()) == []


# ---- Ctrl-C twice ------------------------------------------------------------------------------

def test_a_second_ctrl_c_aborts_at_once_with_one_line(her_run, tmp_path):
    """The first Ctrl-C waits for the iteration's end; a second one during it ends the run at once,
    exit 130, one line, and the checkpoint written before stays loadable. Long iterations (400
    updates of 256 transitions) make sure the second signal lands inside one."""
    from her_rl.folder.checkpoint import load

    out = tmp_path / "run"
    proc = forked.Popen([her_run, "n=8", "algo.updates_per_step=null", "algo.updates_per_cycle=400",
                         "budget.env_steps=10000000",
                         "eval.every_iterations=1000", "checkpoint.every_s=0", "progress=false",
                         f"hydra.run.dir={out}"], cwd=tmp_path, env=ENV, stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 150
        while time.time() < deadline and not (out / "checkpoint.pt").exists():
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.1)
        time.sleep(0.3)  # into the next iteration (measured: 2-3 s each)
        proc.send_signal(signal.SIGINT)
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr
    assert stderr == "her-run: aborted by a second Ctrl-C; the run folder keeps its last complete checkpoint\n"
    assert load(out / "checkpoint.pt")["runner"]["iteration"] >= 1
    assert not list(out.glob("*.tmp"))


def test_in_python_a_second_ctrl_c_is_a_keyboard_interrupt_saying_so():
    from her_rl.run.signals import ABORTED, StopSignals

    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)  # a background job inherits SIG_IGN
    try:
        with pytest.raises(KeyboardInterrupt, match=ABORTED):
            with StopSignals() as stop:
                signal.raise_signal(signal.SIGINT)
                time.sleep(0.05)  # the handler runs between bytecodes
                assert stop.received == [signal.SIGINT]  # the first one is only noted
                signal.raise_signal(signal.SIGINT)
                time.sleep(1)
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # handlers restored
    finally:
        signal.signal(signal.SIGINT, inherited)
