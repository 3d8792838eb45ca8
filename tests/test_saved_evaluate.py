"""her_rl/saved/evaluate.py: where load= may write (eval.json or videos/), checked before any work."""

import pytest

from her_rl.errors import ConfigError
from her_rl.folder import rundir
from her_rl.saved.evaluate import EVAL, VIDEOS, output_folder


def test_output_folder_accepts_a_new_folder_and_a_run_folder(tmp_path):
    assert output_folder(tmp_path / "new", EVAL, given=True) is None
    assert not (tmp_path / "new").exists()  # nothing made before the work is done
    run = tmp_path / "run"
    run.mkdir()
    (run / rundir.CHECKPOINT).write_bytes(b"x")
    (run / rundir.LOCK).write_text("")
    lock = output_folder(run, EVAL, given=False)
    assert lock is not None
    lock.release()
    empty = tmp_path / "empty"
    empty.mkdir()
    assert output_folder(empty, VIDEOS, given=True) is None


def test_output_folder_refuses_a_folder_of_other_files(tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("mine\n")
    with pytest.raises(ConfigError) as info:
        output_folder(tmp_path / "mine", EVAL, given=False)
    message = str(info.value)
    assert message.startswith("load= cannot write eval.json: ") and "\n" not in message
    assert message.endswith("(hydra.run.dir=NEW_FOLDER writes eval.json there instead)")
    with pytest.raises(ConfigError) as info:
        output_folder(tmp_path / "mine", EVAL, given=True)
    assert "hydra.run.dir=NEW_FOLDER" not in str(info.value)  # the folder was given: no hint to give one


def test_output_folder_refuses_a_file_in_place_of_the_folder(tmp_path):
    (tmp_path / "afile").write_text("x\n")
    with pytest.raises(ConfigError, match="^load= cannot write eval.json: .*it is a file, not a folder"):
        output_folder(tmp_path / "afile", EVAL, given=True)


@pytest.mark.parametrize("name, make, kind", [
    (EVAL, lambda p: p.mkdir(), "a regular file"),
    (EVAL, lambda p: p.symlink_to(p.parent / rundir.CHECKPOINT), "a regular file"),
    (VIDEOS, lambda p: p.write_text("x"), "a folder"),
    (VIDEOS, lambda p: p.symlink_to(p.parent), "a folder"),
])
def test_output_folder_refuses_the_wrong_kind_of_thing_where_it_writes(tmp_path, name, make, kind):
    run = tmp_path / "run"
    run.mkdir()
    (run / rundir.CHECKPOINT).write_bytes(b"x")
    (run / rundir.LOCK).write_text("")
    make(run / name)
    with pytest.raises(ConfigError) as info:
        output_folder(run, name, given=True)
    assert str(info.value) == f"load= cannot write {name}: {run / name} is not {kind}; move it away"
    lock = rundir.RunLock.probe(run)  # the refusal let go of the folder's lock
    assert lock is not None
    lock.release()


def test_output_folder_refuses_a_folder_held_by_a_live_run(tmp_path):
    run = tmp_path / "run"
    held = rundir.RunLock.acquire(run)
    try:
        held.mark_owner()
        with pytest.raises(ConfigError, match="^load= cannot write eval.json: "):
            output_folder(run, EVAL, given=True)
    finally:
        held.release()
    output_folder(run, EVAL, given=True).release()  # free again once the run let go
