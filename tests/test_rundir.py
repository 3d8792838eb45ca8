"""The run folder (her_rl/rundir.py, checked by her_rl/plan.py): one live run per folder, unique
default names, and folders that cannot be used or already hold a run are refused."""

import os

import pytest

from her_rl import rundir
from her_rl.registry import ConfigError
from her_rl.runner import main

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
