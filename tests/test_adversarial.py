"""The adversarial corpus: attacks on run folders, sweep folders, a user's own folders and the Python
API, each held to the same three rules: no traceback or foreign exception, nothing written outside
her-rl run folders (the user's files are compared byte for byte), and no result naming what is not
on disk. The focused tests of each case live beside their module; this file keeps the whole set in
one place, so a new attack is one row."""

import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

import her_rl
from her_rl.folder import checkpoint, rundir
from her_rl.errors import CheckpointError, ConfigError
from her_rl.summary.report import main as summary_main

ENV = {**os.environ, "HYDRA_FULL_ERROR": "0"}
SMALL = ["algo=her_dqn", "env=bitflip", "n=4", "progress=false", "eval.episodes=5"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = tmp_path_factory.mktemp("adversarial") / "run"
    her_rl.train([*SMALL, "budget.env_steps=200"], out_dir=out)
    return out


@pytest.fixture
def home(tmp_path, trained):
    """A user's folder: their notes, a config.yaml and eval.json of their own, the checkpoint copied as
    model.pt; beside it a her-rl run folder ``run``."""
    user = tmp_path / "mine"
    user.mkdir()
    (user / "notes.txt").write_text("my notes\n")
    (user / "config.yaml").write_text("mine: true\n")
    (user / "eval.json").write_text('{"mine": 1}\n')
    shutil.copy(trained / "checkpoint.pt", user / "model.pt")
    shutil.copytree(trained, tmp_path / "run")
    return tmp_path


def snapshot(folder: Path) -> dict[str, str]:
    """Every path below ``folder`` (links not followed) with a hash of what it holds."""
    out = {}
    for path in sorted(folder.rglob("*")):
        rel = str(path.relative_to(folder))
        if path.is_symlink():
            out[rel] = "link:" + os.readlink(path)
        elif path.is_file():
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            out[rel] = "dir"
    return out


def refused(p, code=2):
    assert "Traceback" not in p.stderr and "Traceback" not in p.stdout, p.stderr
    assert p.returncode == code, (p.returncode, p.stderr)
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("her-run: error: "), p.stderr
    assert "\x1b" not in p.stderr
    return lines[0]


# attacks her-run refuses before Hydra starts a job: (name, args with {home}, what the line says)
REFUSED = [
    ("load a user's model", ["load={home}/mine/model.pt"], "load= cannot write eval.json"),
    ("load into a user's folder", ["load={home}/run", "hydra.run.dir={home}/mine"], "already holds other files"),
    ("video into a user's folder", ["load={home}/run", "video=true", "hydra.run.dir={home}/mine"],
     "load= cannot write videos"),
    ("load into /proc", ["load={home}/run", "hydra.run.dir=/proc/her-rl-x"], "cannot write in /proc"),
    ("load nothing", ["load={home}/nothing.pt"], "no such file"),
    ("train into a user's folder", [*SMALL, "hydra.run.dir={home}/mine"], "already holds other files"),
    ("train into /proc", [*SMALL, "hydra.run.dir=/proc/x"], "cannot write in /proc"),
    ("huge number", ["n=" + "7" * 100_000, "hydra.run.dir={home}/new"], "digits"),
    ("long name", [*SMALL, "hydra.run.dir={home}/" + "x" * 300], "at most 255"),
    ("deep nesting", ["algo.hidden=" + "[" * 3000 + "]" * 3000, "hydra.run.dir={home}/new"], "levels"),
    ("help from a path", ["--help", "hydra/help=../../x"], "hydra/help"),
    ("ANSI in a value", ["n=\x1b[31mred", "hydra.run.dir={home}/new"], "\\x1b"),
    ("code from an override", ["+hydra.callbacks.x._target_=builtins.open", "hydra.run.dir={home}/new"],
     "hydra.callbacks"),
] + [(f"sweep {setting}", ["-m", *SMALL, "seed=0,1", *setting.split(), "hydra.sweep.dir={home}/sweep"], says)
     for setting, says in [
         ("hydra/launcher=joblib hydra.launcher.n_jobs=0", "hydra.launcher.n_jobs must be a non-zero integer"),
         ("hydra/launcher=joblib hydra.launcher.prefer=nope", "hydra.launcher.prefer must be null or one of"),
         ("hydra/launcher=joblib hydra.launcher.backend=nope", "hydra.launcher.backend must be null or one of"),
         ("hydra/launcher=joblib hydra.launcher.timeout=0.001", "budget.wall_time_s=SECONDS ends each job"),
         ("hydra.sweeper.max_batch_size=0", "hydra.sweeper.max_batch_size must be null or an integer >= 1"),
         ("hydra/sweeper=optuna hydra.sweeper.n_trials=0", "hydra.sweeper.n_trials must be an integer >= 1"),
         ("hydra/sweeper=optuna hydra.sweeper.n_jobs=0", "hydra.sweeper.n_jobs must be an integer >= 1"),
         ("hydra/sweeper=optuna hydra.sweeper.max_failure_rate=7", "max_failure_rate must be a number in [0, 1]"),
         ("hydra/launcher=submitit_local hydra.launcher.timeout_min=0", "timeout_min must be an integer >= 1"),
     ]
] + [
    ("a replay memory past any machine", [*SMALL, "algo.buffer_size=100000000000", "hydra.run.dir={home}/new"],
     "lower the replay size (algo.buffer_size)"),
    ("a network past any machine", [*SMALL, "algo.hidden=[1000000,1000000]", "hydra.run.dir={home}/new"],
     "a network of layers [8, 1000000, 1000000, 4] needs 16,000.2 GB"),
] + [(f"~{key}", [*SMALL, f"~{key}", "hydra.run.dir={home}/new"], "required")
     for key in ("threads", "budget", "eval.episodes", "device", "checkpoint.every_s", "seed", "algo", "env")]


@pytest.mark.parametrize("name,args,says", REFUSED, ids=[r[0] for r in REFUSED])
def test_refused_in_one_line_and_nothing_written(her_run_here, home, name, args, says):
    before = snapshot(home)
    p = her_run_here([a.format(home=home) for a in args], home)
    assert says in refused(p)
    assert snapshot(home) == before  # no new folder, no file touched, the run folder too


@pytest.mark.parametrize("kind", ["fifo", "loop", "folder"])
def test_a_checkpoint_that_is_not_a_file(her_run_here, home, kind):
    ckpt = home / "run" / "checkpoint.pt"
    ckpt.unlink()
    {"fifo": lambda: os.mkfifo(ckpt), "loop": lambda: ckpt.symlink_to(ckpt), "folder": ckpt.mkdir}[kind]()
    before = snapshot(home)
    line = refused(her_run_here([f"load={home / 'run'}"], home))
    assert "not a regular file" in line or "symbolic link" in line or "folder" in line
    assert snapshot(home) == before


def test_a_live_run_folder_is_not_written_by_load(her_run_here, home):
    live = rundir.RunLock.acquire(home / "run")
    try:
        before = snapshot(home)
        assert "in use by another live her-run" in refused(her_run_here([f"load={home / 'run'}"], home))
        assert snapshot(home) == before
    finally:
        live.release()


def test_summary_outputs_linked_elsewhere_stay_untouched(home):
    sweep = home / "sweep"
    shutil.copytree(home / "run", sweep / "0")
    for name in ("summary.md", "summary.csv", "curves.png"):
        (sweep / name).symlink_to(home / "mine" / "notes.txt")
    before = snapshot(home / "mine")
    assert summary_main([str(sweep)]) == 0
    assert snapshot(home / "mine") == before
    assert all((sweep / n).is_file() and not (sweep / n).is_symlink() for n in ("summary.md", "summary.csv"))


@pytest.mark.parametrize("name", ["results.json", "config.yaml", "history.jsonl"])
def test_summary_of_a_run_file_that_is_a_fifo_is_skipped_not_hung(home, capsys, name):
    sweep = home / "sweep"
    shutil.copytree(home / "run", sweep / "0")
    (sweep / "0" / name).unlink()
    os.mkfifo(sweep / "0" / name)  # reading it would block for ever
    assert summary_main([str(sweep), "--no-plots"]) == 2
    assert f"{name} is not a regular file" in capsys.readouterr().err


def test_summary_of_an_unwritable_folder_is_one_line(capsys):
    assert summary_main(["/proc/self"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("her-summary: error: ")


@pytest.mark.parametrize("call", ["train(None)", "load(None)", "load(123)", "evaluate(None)", "train(['n=4'], 5)"])
def test_python_api_bad_arguments(call):
    with pytest.raises(ConfigError):
        eval(f"her_rl.{call}")


def test_predict_bad_input_is_config_error(trained):
    policy = her_rl.load(trained)
    good = {"observation": np.zeros(4, np.float32), "desired_goal": np.ones(4, np.float32)}
    for bad in ({"observation": good["observation"]}, {**good, "desired_goal": np.ones(3, np.float32)},
                {**good, "observation": np.full(4, np.nan, np.float32)},
                {k: v[None][:0] for k, v in good.items()}, {**good, "observation": np.array(["a"] * 4)}):
        with pytest.raises(ConfigError):
            policy.predict(bad)


def test_a_nan_checkpoint_is_refused(home):
    path = home / "run" / "checkpoint.pt"
    saved = torch.load(path, weights_only=True)
    for name, value in saved["agent"].items():
        if isinstance(value, dict):
            for key, tensor in value.items():
                if isinstance(tensor, torch.Tensor) and tensor.is_floating_point():
                    tensor.fill_(float("nan"))
    torch.save(saved, path)
    with pytest.raises(CheckpointError):
        her_rl.load(path)


def _run(her_run, args, cwd):
    return subprocess.run([her_run, *args], cwd=cwd, env=ENV, capture_output=True, text=True, timeout=300)


def test_leftovers_and_damage_in_a_run_folder_still_resume(her_run, home):
    """A folder named like an atomic write's temp file, a torn history line, bad bytes in metrics.jsonl:
    the run resumes (twice), and results.json names a checkpoint at its own env step."""
    run = home / "run"
    (run / "checkpoint.pt.x1.tmp").mkdir()
    (run / "metrics.jsonl.x2.tmp").mkdir()
    with open(run / "history.jsonl", "ab") as f:
        f.write(b'{"time": "2026-')
    with open(run / "metrics.jsonl", "ab") as f:
        f.write(b'{"step": 1, "\xff\xfe": 2}\n')
    for budget in (400, 600):
        p = _run(her_run, ["resume=true", f"budget.env_steps={budget}", "eval.stop_when_solved=false",
                           f"hydra.run.dir={run}"], home)
        assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
        results = json.loads((run / "results.json").read_text())
        assert checkpoint.load(results["checkpoint"])["runner"]["env_steps"] == results["env_steps"]
    assert all(json.loads(line) for line in (run / "history.jsonl").read_text().splitlines())


DEEP_JSON = "[" * 100_000 + "]" * 100_000
ALIAS_BOMB = 'a: &a ["x","x","x","x","x","x","x","x","x"]\n' + "".join(
    f"{c}: &{c} [*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p},*{p}]\n" for p, c in zip("abcdefgh", "bcdefghi"))


@pytest.mark.parametrize("name", ["results.json", "history.jsonl", "metrics.jsonl", "config.yaml"])
def test_summary_of_files_nested_too_deep_or_full_of_aliases_is_one_line_each(home, capsys, name):
    """A 1 KB config.yaml of nested anchors would expand to billions of nodes; JSON nested 100,000
    deep is past Python's recursion limit: both are a damaged run, said in one line."""
    run = home / "sweep" / "0"
    shutil.copytree(home / "run", run)
    if name == "config.yaml":
        (run / name).write_text(ALIAS_BOMB)
    elif name in ("results.json", "history.jsonl"):  # her-summary reads history.jsonl's first line
        (run / name).write_text(DEEP_JSON + "\n")
    else:  # a middle line
        lines = (run / name).read_text().splitlines()
        (run / name).write_text("\n".join([lines[0], DEEP_JSON, *lines[1:]]) + "\n")
    code = summary_main([str(home / "sweep"), "--no-plots"])
    err = capsys.readouterr().err
    assert "Traceback" not in err and "RecursionError" not in err
    if name == "metrics.jsonl":  # the curves skip a bad middle line; the table still has the run
        assert code == 0, err
    else:
        skipped = err.strip().splitlines()[0]
        assert code == 2 and skipped.startswith("her-summary: warning: skipped ") and name in skipped, err
        assert "nested too deeply" in skipped or "anchors or aliases" in skipped or "not a JSON object" in skipped, err


@pytest.mark.parametrize("damage", ["alias bomb", "deep history"])
def test_a_resume_of_a_folder_of_hostile_files_is_one_line_at_once(her_run, home, damage):
    run = home / "run"
    if damage == "alias bomb":  # before the first checkpoint: resume=auto reads the saved config.yaml
        (run / "checkpoint.pt").unlink()
        (run / "results.json").unlink()
        (run / "config.yaml").write_text(ALIAS_BOMB)
        args, says = ["resume=auto"], "uses YAML anchors or aliases"
    else:
        (run / "history.jsonl").write_text(DEEP_JSON + "\n" + (run / "history.jsonl").read_text())
        args, says = ["resume=true"], "line 1 of its history.jsonl is not a JSON object"
    p = _run(her_run, [*args, f"hydra.run.dir={run}", "progress=false"], home)
    assert says in refused(p), p.stderr


def test_sizes_past_an_address_space_limit_are_one_line(her_run, home):
    """Under ``ulimit -v`` (6 GB), a replay memory or a network that fits the machine but not the limit."""
    import resource

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (6 * 2**30, 6 * 2**30))

    for size in ("algo.buffer_size=2000000000", "algo.hidden=[30000,30000]"):
        p = subprocess.run([her_run, *SMALL, size, f"hydra.run.dir={home}/new"], cwd=home, env=ENV, text=True,
                           capture_output=True, timeout=300, preexec_fn=limit)
        assert "more than this process may still use" in refused(p) and "ulimit -v" in p.stderr, p.stderr
        assert not (home / "new").exists()


@pytest.mark.parametrize("swap", ["folder for a link", "tb for a link", "folder deleted"])
def test_a_run_folder_swapped_mid_run_ends_the_run_and_the_linked_folder_stays_as_it_was(her_run, home, swap):
    """The run holds its folder by identity: a folder moved away with a link to the user's folder put
    in its place (or only tb/ so replaced), or deleted, ends the run with one line and exit 5 at its
    next write; nothing lands in the user's folder, TensorBoard's events included."""
    import time

    mine = home / "mine"
    (mine / "tb").mkdir()
    before = snapshot(mine)
    run = home / "swapped"
    proc = subprocess.Popen([her_run, "n=30", "budget.env_steps=2000000", "checkpoint.every_s=0.5", "progress=false",
                             "eval.every_env_steps=1000", f"hydra.run.dir={run}"], cwd=home, env=ENV, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while not (run / "checkpoint.pt").exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        if swap == "folder for a link":
            run.rename(home / "moved")
            run.symlink_to(mine)
        elif swap == "tb for a link":
            (run / "tb").rename(home / "moved-tb")
            (run / "tb").symlink_to(mine / "tb")
        else:
            shutil.rmtree(run)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    line = refused(subprocess.CompletedProcess(proc.args, proc.returncode, "", err), code=5)
    assert "during the run: training stopped at env step" in line, line
    if swap == "folder for a link":
        assert f"was moved to {home / 'moved'} and a link put in its place" in line
        assert "its last checkpoint (env step" in line and str(home / "moved" / "checkpoint.pt") in line
    elif swap == "folder deleted":
        assert "was deleted" in line and "its checkpoints went with it" in line
    else:
        assert "its TensorBoard folder" in line
    assert snapshot(mine) == before


def test_a_folder_too_deep_to_hold_its_files_is_refused_and_leaves_no_folders(her_run_here, home):
    """4,080 bytes: the folder and its lock file can be made, its config's temporary file (over 4,095) cannot."""
    before = snapshot(home)
    path = f"{home}/" + "/".join(["d" * 200] * 25)
    path = path[:4080].rstrip("/")
    path += "x" * (4080 - len(path))
    p = her_run_here([*SMALL, f"hydra.run.dir={path}"], home)
    assert "File name too long" in refused(p)
    assert snapshot(home) == before


def test_a_second_sweep_into_the_folder_of_a_live_sweep_is_refused_and_writes_nothing(her_run_here, home):
    sweep = home / "sweep"
    (sweep / "0").mkdir(parents=True)
    (sweep / "multirun.yaml").write_text("hydra: {}\n")
    held = rundir.RunLock.acquire(sweep / "0")  # a job of the first sweep, still running
    before = snapshot(home)
    try:
        p = her_run_here(["-m", *SMALL, "seed=0,1", f"hydra.sweep.dir={sweep}"], home)
    finally:
        held.release()
    assert f"sweep folder {sweep} is in use by a live sweep: run folder {sweep / '0'} is in use" in refused(p)
    assert snapshot(home) == before


def test_a_huge_value_in_a_run_file_is_a_short_warning(home, capsys):
    run = home / "sweep" / "0"
    shutil.copytree(home / "run", run)
    lines = (run / "metrics.jsonl").read_text().splitlines()
    huge = json.dumps({"step": 1, "charts/x": "v" * 1_000_000})
    (run / "metrics.jsonl").write_text("\n".join([lines[0], huge, *lines[1:]]) + "\n")
    assert summary_main([str(home / "sweep")]) == 0
    err = capsys.readouterr().err
    assert "metrics unreadable" in err and max(len(line) for line in err.splitlines()) <= 1600, len(err)


# ---- the corpus of issue 54 (bench/attacks.py): run folders mid-run, user envs, launchers, sweepers and
# foreign folders, each attack in a sandbox of its own and held to five rules at once: nothing written
# outside the run folders it names (the decoy folder byte for byte), no traceback, no hang, no foreign
# module imported, an exit status the docs name; and the status and words the attack expects.

from bench import attacks  # noqa: E402

DOCUMENTED = attacks.documented_exit_codes()


def test_the_exit_statuses_the_docs_name_are_read_from_the_docs():
    assert {0, 2, 3, 4, 5, 129, 130, 143} <= DOCUMENTED["her-run"] and 1 not in DOCUMENTED["her-run"]
    assert DOCUMENTED["sweep"] == DOCUMENTED["her-run"] | {1}  # a sweep whose failed jobs disagree
    assert DOCUMENTED["her-summary"] == {0, 1, 2}


def test_the_corpus_covers_every_category():
    counts = {c: sum(a.category == c for a in attacks.ATTACKS) for c in attacks.CATEGORIES}
    assert all(n >= 4 for n in counts.values()) and sum(counts.values()) >= 40, counts


def test_the_rules_catch_what_they_are_for(tmp_path, trained):
    """A canary: a hook that writes into the decoy and beside the run, imports a sentinel, leaves a
    thread running and raises breaks all five rules, and the harness says so."""
    def canary(sb):
        def hook():
            import sys
            import threading

            (sb.decoy / "notes.txt").write_text("changed\n")
            (sb.work / "stray.txt").write_text("x")
            sys.path.insert(0, str(sb.work))
            try:
                __import__("evilmod")
            except ImportError:
                pass
            threading.Thread(target=threading.Event().wait, daemon=False, name="canary").start()
            raise RuntimeError("canary")
        return attacks.Setup(["her-run", "n=4"], hook=hook)

    attack = attacks.Attack("canary", "user env", canary, 0)
    result = attacks.run_attack(attack, tmp_path, trained, DOCUMENTED, exit_wait=0.5)
    assert set(result.broken) == set(attacks.RULES), result.broken
    assert "decoy" in result.broken["writes"] and "work/stray.txt" in result.broken["writes"]
    assert result.broken["import"] == "evilmod" and "canary" in result.broken["hang"]
    assert result.expected is not None


@pytest.mark.parametrize("attack", [
    pytest.param(a, id=f"{a.category}: {a.name}",
                 marks=[pytest.mark.xfail(strict=True, reason=a.defect)] if a.defect else [])
    for a in attacks.ATTACKS])
def test_an_attack_keeps_all_five_rules(tmp_path, trained, attack):
    result = attacks.run_attack(attack, tmp_path, trained, DOCUMENTED)
    assert not result.broken, result.broken
    assert result.expected is None, result.expected
