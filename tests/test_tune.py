"""her-tune: a real Optuna study in SQLite whose losing trial is pruned at its first evaluation, continued by
the same command (a trial stopped by Ctrl-C does not count), the best trial's her-run line run as printed,
and the bad input refused in one line with nothing written."""

import json
import os
import shlex
import signal
import sqlite3
import threading
import time

import pytest

from her_rl import tune
import forked

# n=5 in 1,000 env steps, evaluated every 200; the random sampler's seed 10 draws lr 0.003 (learns)
# for trial 0 and 1e-9 (cannot learn) for trial 1, which the median of trial 0 prunes at its first evaluation
STUDY = ["n=5", "budget.env_steps=1000", "eval.every_env_steps=200", "eval.stop_when_solved=false",
         "algo.lr=choice(0.003,1e-9)", "--sampler", "random", "--seed", "10", "--startup-trials", "1"]


def _tune(capsys, *args):
    code = tune.main([*STUDY, *args])
    out, err = capsys.readouterr()
    return code, out, err


def _study(folder):
    return json.loads((folder / "study.json").read_text())


@pytest.mark.slow
def test_prunes_continues_and_prints_a_runnable_best_line(tmp_path, capsys):
    folder = tmp_path / "study"
    code, out, err = _tune(capsys, "--trials", "2", "--dir", str(folder))
    assert code == 0, err
    data = _study(folder)
    assert [t["state"] for t in data["trials"]] == ["COMPLETE", "PRUNED"], out
    good, bad = data["trials"]
    assert good["params"] == {"algo.lr": 0.003} and bad["params"] == {"algo.lr": 1e-9}
    assert bad["evaluations"][0][1] < good["evaluations"][0][1] and bad["env_steps"] < 1000 <= good["env_steps"]
    assert (folder / "trial-1" / "checkpoint.pt").is_file() and not (folder / "trial-1" / "results.json").exists()
    assert "trial 1 pruned at evaluation" in out and "2 trials: 1 complete, 1 pruned, 0 failed" in out
    assert data["env_steps"] == good["env_steps"] + bad["env_steps"]

    # the best line as printed, run as the user would: the same run, the same value
    line = next(line for line in out.splitlines() if line.startswith("her-run "))
    assert line == data["best"]["her_run"] and "algo.lr=0.003" in line
    best = tmp_path / "best"
    p = forked.run([*shlex.split(line), f"hydra.run.dir={best}"], cwd=tmp_path, text=True)
    assert p.returncode == 0, p.stderr
    assert json.loads((best / "results.json").read_text())["eval_success_rate"] == data["best"]["value"]

    # the same command continues the study; a trial stopped by Ctrl-C fails and does not count
    def interrupt():
        while not (folder / "trial-2").exists():  # its her-run has started: the signal lands mid-trial, even on a busy machine
            time.sleep(0.05)
        os.kill(os.getpid(), signal.SIGINT)

    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)  # a background job inherits SIG_IGN
    threading.Thread(target=interrupt, daemon=True).start()
    try:
        code, out, err = _tune(capsys, "--trials", "3", "--dir", str(folder))
        undone = signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the tuner's handlers are undone
    finally:
        signal.signal(signal.SIGINT, inherited)
    assert code == 128 + signal.SIGINT and "the same command continues the study" in err, err
    assert "2 of 3 trials so far" in out
    data = _study(folder)
    assert data["trials"][2]["state"] == "FAIL" and data["trials"][2]["interrupted"] and data["trials_counted"] == 2
    assert undone

    code, out, err = _tune(capsys, "--trials", "3", "--dir", str(folder))
    assert code == 0, err
    data = _study(folder)
    assert [t["number"] for t in data["trials"]] == [0, 1, 2, 3] and data["trials_counted"] == 3
    assert [t["state"] for t in data["trials"][:2]] == ["COMPLETE", "PRUNED"]  # the earlier trials as they were
    assert data["trials"][3]["state"] in ("COMPLETE", "PRUNED") and (folder / "trial-3" / "metrics.jsonl").is_file()
    with sqlite3.connect(folder / "study.db") as db:  # the study lives in its storage: Optuna's own tables
        assert db.execute("select count(*) from trials").fetchone()[0] == 4

    # another search space in the same study folder is refused
    code = tune.main(["n=5", "algo.lr=choice(0.01,0.1)", "--dir", str(folder)])
    err = capsys.readouterr().err
    assert code == 2 and "was started with other overrides and search_space" in err, err


@pytest.mark.parametrize("args, said", [
    (["--pruner", "nope"], "--pruner=nope is unknown: one of median, percentile, hyperband, successive_halving"),
    (["--trials", "0"], "--trials=0: must be an integer >= 1"),
    (["algo.lr=interval(0.01,0.0001)"], "'algo.lr=interval(0.01,0.0001)' is not a search space her-tune can use"),
    (["algo.lr=choice(0.1"], "'algo.lr=choice(0.1' is not a search space her-tune can use"),
    (["--storage", "nope://x/y"], "--storage=nope://x/y: Optuna cannot use it"),
    (["n=abc"], "n='abc' is not allowed: n must be an integer"),
    (["n=10"], "no search space"),
    (["hydra.run.dir=x"], "'hydra.run.dir=x' is not accepted: her-tune runs each trial"),
    (["--nope"], "unrecognized arguments: --nope"),
])
def test_bad_input_is_one_line_before_anything_is_written(tmp_path, capsys, args, said):
    folder = tmp_path / "study"
    search = [] if any(a.startswith(("algo.lr=", "n=10")) for a in args) else ["algo.lr=choice(0.001,0.01)"]
    code = tune.main([*search, *args, "--dir", str(folder)])
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("her-tune: error: ") and said in lines[0], err
    assert out == "" and not folder.exists()


def test_a_second_tuner_of_the_same_new_folder_joins_it_before_its_study_json_exists(tmp_path):
    folder = tmp_path / "study"
    (folder / "trial-0").mkdir(parents=True)
    (folder / "study.db").write_bytes(b"")  # what a her-tune started a moment earlier has made so far
    tune._check_folder(folder, "study")  # joins: the storage says which study it is
    (folder / "notes.txt").write_text("mine")
    with pytest.raises(tune.ConfigError, match="already holds other files than a her-tune study"):
        tune._check_folder(folder, "study")
