"""``load=`` writes only into her-rl run folders: eval.json and videos/ never land in a user's own
folder, a live run's folder, a link or a folder nothing can be written in; refused before any work."""

import json
import os
import shutil

import pytest

import her_rl
from her_rl.folder import rundir
from her_rl.errors import ConfigError


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory):
    out = tmp_path_factory.mktemp("load") / "run"
    her_rl.train(["algo=her_dqn", "env=bitflip", "n=4", "budget.env_steps=200", "progress=false",
                  "eval.episodes=5"], out_dir=out)
    return out


def _copy(run_folder, tmp_path):
    shutil.copytree(run_folder, tmp_path / "run")
    return tmp_path / "run"


def test_eval_json_goes_into_the_run_folder(run_folder, tmp_path, her_run_here):
    run = _copy(run_folder, tmp_path)
    p = her_run_here([f"load={run}", "eval.episodes=3"], tmp_path)
    assert p.returncode == 0, p.stderr
    assert json.loads((run / "eval.json").read_text())["episodes"] == 3


def test_a_user_folder_holding_the_checkpoint_is_refused(run_folder, tmp_path, her_run_here):
    user = tmp_path / "mine"
    user.mkdir()
    shutil.copy(run_folder / "checkpoint.pt", user / "model.pt")
    (user / "eval.json").write_text("my own numbers\n")
    p = her_run_here([f"load={user / 'model.pt'}"], tmp_path)
    assert p.returncode == 2
    assert p.stderr.count("\n") == 1
    assert "load= cannot write eval.json" in p.stderr and "hydra.run.dir=NEW_FOLDER" in p.stderr
    assert (user / "eval.json").read_text() == "my own numbers\n"
    assert sorted(os.listdir(user)) == ["eval.json", "model.pt"]


def test_hydra_run_dir_naming_a_user_folder_is_refused(run_folder, tmp_path, her_run_here):
    user = tmp_path / "mine"
    user.mkdir()
    (user / "eval.json").write_text("keep\n")
    p = her_run_here([f"load={run_folder}", f"hydra.run.dir={user}"], tmp_path)
    assert p.returncode == 2 and "already holds other files" in p.stderr
    assert (user / "eval.json").read_text() == "keep\n" and sorted(os.listdir(user)) == ["eval.json"]


def test_a_new_folder_is_made_and_marked_as_her_rls(run_folder, tmp_path, her_run_here):
    new = tmp_path / "evals" / "a"
    for _ in range(2):  # the second time the folder is her-rl's own (its lock file marks it)
        p = her_run_here([f"load={run_folder}", f"hydra.run.dir={new}", "eval.episodes=2"], tmp_path)
        assert p.returncode == 0, p.stderr
    assert sorted(os.listdir(new)) == [rundir.LOCK, "eval.json"]


def test_video_into_a_user_folder_is_refused(run_folder, tmp_path, her_run_here):
    user = tmp_path / "mine"
    user.mkdir()
    (user / "notes.txt").write_text("x")
    p = her_run_here([f"load={run_folder}", "video=true", f"hydra.run.dir={user}"], tmp_path)
    assert p.returncode == 2 and "load= cannot write videos" in p.stderr
    assert sorted(os.listdir(user)) == ["notes.txt"]


def test_an_unwritable_folder_is_refused_before_evaluating(run_folder, tmp_path, her_run_here):
    p = her_run_here([f"load={run_folder}", "hydra.run.dir=/proc/her-rl-eval"], tmp_path)
    assert p.returncode == 2 and "cannot write in /proc" in p.stderr
    assert p.stdout.strip() == ""  # no report printed: nothing was evaluated


def test_a_live_run_holding_the_folder_is_refused(run_folder, tmp_path, her_run_here):
    run = _copy(run_folder, tmp_path)
    live = rundir.RunLock.acquire(run)  # a run in another process holds it the same way (flock)
    try:
        before = sorted(os.listdir(run))
        p = her_run_here([f"load={run}"], tmp_path)
        assert p.returncode == 2 and "in use by another live her-run" in p.stderr
        assert sorted(os.listdir(run)) == before
    finally:
        live.release()


@pytest.mark.parametrize("kind", ["folder", "link"])
def test_eval_json_that_is_not_a_file_is_refused(run_folder, tmp_path, her_run_here, kind):
    run = _copy(run_folder, tmp_path)
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text("untouched\n")
    if kind == "folder":
        (run / "eval.json").mkdir()
    else:
        (run / "eval.json").symlink_to(elsewhere)
    p = her_run_here([f"load={run}"], tmp_path)
    assert p.returncode == 2 and "is not a regular file" in p.stderr
    assert elsewhere.read_text() == "untouched\n"


def test_python_train_with_load_obeys_the_same_rules(run_folder, tmp_path):
    user = tmp_path / "mine"
    user.mkdir()
    (user / "eval.json").write_text("keep\n")
    with pytest.raises(ConfigError, match="load= cannot write eval.json"):
        her_rl.train([f"load={run_folder}"], out_dir=user)
    assert (user / "eval.json").read_text() == "keep\n"
