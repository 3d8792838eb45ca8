"""metrics.jsonl (and TensorBoard's scalars) of a run SIGKILLed and resumed equal those of a run that
never stopped, step for step and value for value, but for the wall-clock ones (``wall_time``,
metrics.WALL_CLOCK_TAGS). The kill lands at a chosen moment: a forked child of this process runs
the training with a hook that SIGKILLs it there, so nothing of Python's is flushed on the way out."""

import json
import os
import shutil
import signal

import pytest

from her_rl.folder import checkpoint
from her_rl.folder.metrics import METRICS, WALL_CLOCK_TAGS, MetricsWriter, _from_events, _lines, read_metrics
from her_rl.run.runner import main

# about 25 iterations of her_dqn; an evaluation every 3rd, a checkpoint before every next one
ARGS = ["algo=her_dqn", "env=bitflip", "n=4", "algo.hidden=[32,32]", "progress=false", "eval.episodes=4",
        "eval.every_iterations=3", "eval.stop_when_solved=false", "checkpoint.every_s=0", "budget.env_steps=320"]
NOT_COMPARED = ("wall_time_s", "sps", "checkpoint")  # results.json: timings and the folder


@pytest.fixture(scope="module")
def whole(tmp_path_factory):
    """The run that never stopped."""
    folder = tmp_path_factory.mktemp("whole") / "run"
    main(ARGS, out_dir=folder)
    return folder


def rows(folder):
    """metrics.jsonl's lines without what measures the clock."""
    return [{k: v for k, v in line.items() if k != "wall_time" and k not in WALL_CLOCK_TAGS}
            for _, line in _lines(folder / METRICS)]


def tb_scalars(folder):
    return {tag: [(p.step, p.value) for p in points]
            for tag, points in _from_events(folder / "tb").items() if tag not in WALL_CLOCK_TAGS}


def results(folder):
    numbers = json.loads((folder / "results.json").read_text())
    return {k: v for k, v in numbers.items() if k not in NOT_COMPARED}


def kill():
    os.kill(os.getpid(), signal.SIGKILL)


def on_save(k, before_write):
    """SIGKILL at the k-th checkpoint: before its file is written (the logs are flushed by then) or
    right after it is."""
    original, calls = checkpoint.save, []

    def save(obj, path):
        calls.append(path)
        if len(calls) == k and before_write:
            kill()
        saved = original(obj, path)
        if len(calls) == k:
            kill()
        return saved

    checkpoint.save = save


def in_final_evaluation():
    """SIGKILL in the final evaluation, which adds eval/* to the last training step's line."""
    from her_rl.run.trainer import Trainer

    original = Trainer.evaluate

    def evaluate(self, may_stop=True):
        if not may_stop:
            kill()
        return original(self, may_stop)

    Trainer.evaluate = evaluate


def killed_run(folder, hook):
    """Train with ARGS in ``folder`` in a forked child that ``hook`` kills; its output goes to a log."""
    log = folder.parent / "killed.log"
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        try:
            fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            hook()
            main(ARGS, out_dir=folder)
        finally:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == -signal.SIGKILL, log.read_text()


KILLS = {  # when: (hook, whether the killed run leaves lines after its checkpoint's step, for the resume to purge)
    "after the 5th checkpoint": (lambda: on_save(5, before_write=False), False),
    "while the 5th checkpoint is written": (lambda: on_save(5, before_write=True), True),
    "in the final evaluation": (in_final_evaluation, False),  # the last line waits for that evaluation
}


@pytest.mark.parametrize("when", list(KILLS))
def test_a_run_killed_and_resumed_logs_what_one_that_never_stopped_logged(tmp_path, capsys, whole, when):
    folder, (hook, leaves_more) = tmp_path / "run", KILLS[when]
    killed_run(folder, hook)
    saved = checkpoint.load(folder / "checkpoint.pt")["runner"]["env_steps"]
    assert 0 < saved < results(whole)["env_steps"]  # the last loop iteration writes no checkpoint
    left = rows(folder)
    assert [row for row in left if row["step"] <= saved] == [row for row in rows(whole) if row["step"] <= saved]
    assert any(row["step"] > saved for row in left) == leaves_more
    capsys.readouterr()
    main(["resume=true", "progress=false"], out_dir=folder)
    assert "warning" not in capsys.readouterr().err
    expected = rows(whole)
    assert len(expected) > 20 and sum("eval/success_rate" in row for row in expected) > 5
    assert rows(folder) == expected  # every step once, every value as in the run that never stopped
    assert tb_scalars(folder) == tb_scalars(whole)
    assert results(folder) == results(whole)


def test_the_last_line_of_a_run_holds_its_final_evaluation(whole):
    """The case the kill in the final evaluation checks: that evaluation adds to a line of its own step."""
    last = rows(whole)[-1]
    assert last["step"] == results(whole)["env_steps"] and "losses/td_loss" in last and "eval/return" in last


def test_damaged_bytes_are_dropped_on_resume_with_one_warning(tmp_path, capsys, whole):
    folder = tmp_path / "run"
    shutil.copytree(whole, folder)
    good = (folder / METRICS).read_bytes().splitlines(keepends=True)
    damaged = b"".join(good[:3]) + b'{"step": 7, "eval/return": \xff\xfe}\n' + b"".join(good[3:]) + b'{"step": 9\xc3'
    (folder / METRICS).write_bytes(damaged)
    with pytest.raises(ValueError, match=r"^metrics.jsonl line 4 is not a JSON object with an integer step$"):
        read_metrics(folder)  # a reader names the line (not UnicodeDecodeError)
    capsys.readouterr()
    main(["resume=true", "progress=false"], out_dir=folder)  # a finished run: nothing more to train
    out, err = capsys.readouterr()
    assert "resumed from" in out and "Traceback" not in err
    assert err.splitlines() == [f"her-run: warning: {folder / METRICS}: dropped 1 damaged line(s) (line 4 first); "
                                "the rest is kept"]
    assert (folder / METRICS).read_bytes() == b"".join(good)  # repaired to its good lines


def test_a_torn_last_line_of_other_bytes_is_skipped(tmp_path):
    (tmp_path / METRICS).write_bytes(b'{"step": 1, "wall_time": 2.5, "eval/return": 3.0}\n{"step": 2, "eval/\xe2\x82')
    assert read_metrics(tmp_path) == {"eval/return": [(1, 2.5, 3.0)]}
    MetricsWriter(tmp_path, start_step=5).close()  # as a resume opens it
    assert (tmp_path / METRICS).read_bytes() == b'{"step": 1, "wall_time": 2.5, "eval/return": 3.0}\n'


def test_a_folder_named_like_a_temp_file_is_left_alone(tmp_path, capsys, whole):
    folder = tmp_path / "run"
    shutil.copytree(whole, folder)
    (folder / f"{METRICS}.x.tmp").mkdir()  # not a temp file her-rl left: a folder is never one
    (folder / f"{METRICS}.x.tmp" / "notes.txt").write_text("mine")
    (folder / f"{METRICS}.killed.tmp").write_text("left by a killed rewrite")
    before = (folder / METRICS).read_text()
    capsys.readouterr()
    main(["resume=true", "progress=false"], out_dir=folder)
    assert "Traceback" not in capsys.readouterr().err
    assert (folder / f"{METRICS}.x.tmp" / "notes.txt").read_text() == "mine"
    assert not (folder / f"{METRICS}.killed.tmp").exists()
    assert (folder / METRICS).read_text() == before
