"""The run folder (her_rl/folder/rundir.py, checked by her_rl/run/plan.py): one live run per folder, unique
default names, and folders that cannot be used or already hold a run are refused."""

import json
import os

import pytest

from her_rl.folder import rundir
from her_rl.errors import ConfigError
from her_rl.run.runner import main

FAST = ["n=4", "progress=false", "eval.every_iterations=1000", "eval.stop_when_solved=false", "eval.episodes=5"]


def train(out, *extra, budget=300):
    return main([*FAST, f"budget.env_steps={budget}", *extra], out_dir=out)


def test_a_live_run_holds_its_folder(tmp_path):
    out = tmp_path / "run"
    held = rundir.RunLock.acquire(out)  # stands for another live her-run
    held.mark_owner()
    with pytest.raises(ConfigError, match=rf"run folder .*run is in use by another live her-run \(pid {os.getpid()}\)"):
        train(out)
    assert [p.name for p in out.iterdir()] == [rundir.LOCK]  # nothing else written
    held.release()
    train(out)  # free again once that run ended
    held = rundir.RunLock.acquire(out)
    with pytest.raises(ConfigError, match="in use by another live her-run"):
        main(["resume=true", "progress=false"], out_dir=out)
    held.release()


def test_a_lock_held_by_a_run_that_has_not_written_its_pid_names_no_dead_pid(tmp_path):
    import subprocess
    import sys

    out = tmp_path / "run"
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    held = rundir.RunLock.acquire(out)  # a live run still checking the folder; the file has the last run's pid
    (out / rundir.LOCK).write_text(done.stdout)
    with pytest.raises(ConfigError) as refused:
        train(out)
    held.release()
    assert "in use by another live her-run (it is starting or checking the folder)" in str(refused.value)
    assert f"pid {done.stdout.strip()}" not in str(refused.value)


def test_default_folders_are_unique_within_one_instant(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    names = {rundir.default_dir("her_dqn", "bitflip", 0) for _ in range(50)}
    assert len(names) == 50
    a, b = main([*FAST, "budget.env_steps=50"]), main([*FAST, "budget.env_steps=50"])
    assert a["checkpoint"] != b["checkpoint"]
    assert "-s0-" in a["checkpoint"] and len(list((tmp_path / "outputs" / "her_dqn-bitflip").iterdir())) == 2


def test_an_unusable_run_folder_is_refused_before_training(tmp_path):
    (tmp_path / "afile").write_text("")
    with pytest.raises(ConfigError, match=r"cannot use run folder .*afile/run: .*afile is not a folder"):
        train(tmp_path / "afile" / "run")


def test_a_fresh_start_over_a_folder_that_holds_a_checkpoint_is_refused(tmp_path):
    out = tmp_path / "run"
    train(out)
    with pytest.raises(ConfigError, match="already holds a checkpoint; pass resume=true"):
        train(out)


def _snapshot(folder):
    return {str(p.relative_to(folder)): p.read_bytes() if p.is_file() else None for p in folder.rglob("*")}



@pytest.mark.parametrize("damage, message", [
    (lambda out: ((out / "results.json").unlink(), (out / "results.json").mkdir()), "its results.json is not a regular file"),
    (lambda out: ((out / "config.yaml").unlink(), (out / "config.yaml").mkdir()), "its config.yaml is not a regular file"),
    (lambda out: (os.replace(out / "tb", out / "tb.old"), (out / "tb").write_text("x")), "its tb is not a folder"),
    (lambda out: (out / "history.jsonl").write_text("not json\n" + (out / "history.jsonl").read_text()),
     "line 1 of its history.jsonl is not a JSON object"),
    (lambda out: (out / "history.jsonl").write_text('[1, 2]\n{"event": "x"}\n'), "line 1 of its history.jsonl"),
    (lambda out: (out / "history.jsonl").write_bytes(b"\xff\xfe\n"), r"its history.jsonl cannot be read \(not UTF-8"),
])
def test_a_run_folder_with_damaged_files_is_refused_before_anything_is_written(tmp_path, damage, message):
    out = tmp_path / "run"
    train(out)
    damage(out)
    before = _snapshot(out)
    for verb in ("resume=true", "resume=auto"):
        with pytest.raises(ConfigError, match=message):
            main([verb, "progress=false", "budget.env_steps=600"], out_dir=out)
    assert _snapshot(out) == before


def test_a_history_line_cut_short_by_a_crash_does_not_block_resume(tmp_path):
    out = tmp_path / "run"
    train(out)
    with open(out / "history.jsonl", "a") as f:
        f.write('{"event": "resu')  # a killed append
    assert main(["resume=true", "progress=false", "budget.env_steps=600"], out_dir=out)["env_steps"] >= 600
    lines = (out / "history.jsonl").read_text().splitlines()
    assert all(isinstance(json.loads(line), dict) for line in lines)  # the torn line is gone, not appended onto
    assert [json.loads(line)["event"] for line in lines][-1] == "resume"
    # and the folder resumes again (before the repair, the second resume was refused)
    assert main(["resume=true", "progress=false", "budget.env_steps=900"], out_dir=out)["env_steps"] >= 900


def test_resume_auto_on_a_run_killed_before_its_first_checkpoint_keeps_its_config(tmp_path):
    out = tmp_path / "run"
    main(["n=6", "progress=false", "budget.env_steps=300"], out_dir=out)
    for name in ("checkpoint.pt", "results.json"):  # as a kill before the first checkpoint leaves it
        (out / name).unlink()
    with pytest.raises(ConfigError, match=r"^cannot resume=auto: the run in that folder \(stopped before its first "
                                          r"checkpoint\) has n=6, this run asks for n=15"):
        main(["resume=auto", "n=15", "progress=false"], out_dir=out)
    results = main(["resume=auto", "progress=false", "budget.env_steps=300"], out_dir=out)
    from omegaconf import OmegaConf

    assert OmegaConf.load(out / "config.yaml")["n"] == 6 and results["env_steps"] >= 300
