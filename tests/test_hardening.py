"""One run per folder, resume by folder, non-finite guard, safe checkpoint files (in-process runs)."""

import errno
import json
import os
import pickle

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from her_rl import checkpoint, rundir
from her_rl.checkpoint import CheckpointError
from her_rl.guard import NonFiniteError
from her_rl.registry import ConfigError
from her_rl.runner import main

FAST = ["n=4", "progress=false", "eval.every_iterations=1000", "eval.stop_when_solved=false", "eval.episodes=5"]


def train(out, *extra, budget=300):
    return main([*FAST, f"budget.env_steps={budget}", *extra], out_dir=out)


def tb_steps(out, tag="charts/SPS"):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(out / "tb"), size_guidance={"scalars": 0})
    acc.Reload()
    return [e.step for e in acc.Scalars(tag)]


def snapshot(folder):
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}


# ---- one run, one folder --------------------------------------------------------------------

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


# ---- resume by folder -----------------------------------------------------------------------

def test_resume_by_folder_takes_the_saved_config(tmp_path, capsys):
    out = tmp_path / "run"
    first = train(out, "n=5", "algo.lr=0.002", "seed=3")
    capsys.readouterr()
    resumed = main(["resume=true", "budget.env_steps=700", "progress=false"], out_dir=out)
    assert resumed["n"] == 5 and resumed["seed"] == 3 and resumed["env_steps"] >= 700 > first["env_steps"]
    saved = OmegaConf.load(out / "config.yaml")
    assert saved.algo.lr == 0.002 and saved.n == 5 and saved.budget.env_steps == 700
    assert f"at env step {first['env_steps']:,}; changed: budget.env_steps: 300 -> 700" in capsys.readouterr().out
    history = [json.loads(line) for line in (out / "history.jsonl").read_text().splitlines()]
    assert [h["event"] for h in history] == ["start", "resume"]
    assert history[1]["changed"] == {"budget.env_steps": [300, 700]}
    # retyping the original overrides is a no-op, not a change
    again = main([*FAST, "n=5", "algo.lr=0.002", "seed=3", "budget.env_steps=700", "resume=true"], out_dir=out)
    assert again["env_steps"] == resumed["env_steps"]


@pytest.mark.parametrize("changed, key", [
    (["algo.lr=0.5"], "algo.lr"),
    (["n=5"], "n"),
    (["seed=1"], "seed"),
    (["algo.strategy=final"], "algo.strategy"),
    (["algo.hidden=[32]"], "algo.hidden"),
    (["env=gym", "env.id=her_rl/BitFlip-v0"], "env"),
    (["env.id=CartPole-v1"], "env.id"),
    (["+env.kwargs.foo=1"], "env.kwargs.foo"),
    (["algo=ppo"], "algo"),
])
def test_resume_refuses_a_changed_experiment_and_writes_nothing(tmp_path, changed, key):
    out = tmp_path / "run"
    train(out)
    before = snapshot(out)
    with pytest.raises(ConfigError, match=rf"^cannot resume: the checkpoint was trained with {key}=.*, this run "
                                          rf"asks for {key}="):
        main(["resume=true", "progress=false", *changed], out_dir=out)
    assert snapshot(out) == before  # config.yaml, history, checkpoint untouched


def test_resume_auto_starts_fresh_then_continues(tmp_path, capsys):
    out = tmp_path / "job"
    fresh = main([*FAST, "budget.env_steps=200", "resume=auto"], out_dir=out)
    assert "resume=auto: no checkpoint" in capsys.readouterr().out
    more = main([*FAST, "budget.env_steps=400", "resume=auto"], out_dir=out)
    assert "resumed from" in capsys.readouterr().out and more["env_steps"] > fresh["env_steps"]


@pytest.mark.parametrize("prepare, message", [
    (lambda out: None, "does not exist"),
    (lambda out: out.mkdir(), "holds no checkpoint"),
    (lambda out: (out.mkdir(), (out / "config.yaml").write_text("n: 4\n")), "resume=auto starts it afresh"),
])
def test_resume_true_never_restarts_silently(tmp_path, prepare, message):
    out = tmp_path / "run"
    prepare(out)
    listing = sorted(os.listdir(tmp_path))
    with pytest.raises(ConfigError, match=message):
        main(["resume=true", "progress=false"], out_dir=out)
    assert sorted(os.listdir(tmp_path)) == listing


def test_an_unusable_run_folder_is_refused_before_training(tmp_path):
    (tmp_path / "afile").write_text("")
    with pytest.raises(ConfigError, match=r"cannot use run folder .*afile/run: .*afile is not a folder"):
        train(tmp_path / "afile" / "run")


def test_a_fresh_start_over_a_folder_that_holds_a_checkpoint_is_refused(tmp_path):
    out = tmp_path / "run"
    train(out)
    with pytest.raises(ConfigError, match="already holds a checkpoint; pass resume=true"):
        train(out)


def test_crash_after_the_first_checkpoint_resumes_without_duplicate_steps(tmp_path, monkeypatch):
    """The first checkpoint comes after the first iteration (not after checkpoint.every_s); what
    the crashed run logged after it is purged from TensorBoard on resume."""
    from her_rl.algos.her_dqn import HerDQN

    original, calls = HerDQN.train_iteration, []

    def crashing(self):
        calls.append(1)
        if len(calls) == 4:
            raise RuntimeError("simulated crash")
        return original(self)

    out = tmp_path / "run"
    monkeypatch.setattr(HerDQN, "train_iteration", crashing)
    with pytest.raises(RuntimeError, match="simulated crash"):
        train(out, "checkpoint.every_s=3600", budget=5000)
    monkeypatch.setattr(HerDQN, "train_iteration", original)
    saved = checkpoint.load(out / "checkpoint.pt")
    assert saved["runner"]["iteration"] == 1 and saved["runner"]["env_steps"] > 0
    assert len(tb_steps(out)) == 3  # iterations 2 and 3 were logged after that checkpoint
    results = main(["resume=true", "budget.env_steps=600", "progress=false"], out_dir=out)
    steps = tb_steps(out)
    assert steps == sorted(set(steps)) and len(steps) == results["iterations"]


# ---- non-finite guard -----------------------------------------------------------------------

def _poison_at(monkeypatch, iteration, how):
    from her_rl.algos.her_dqn import HerDQN

    original, calls = HerDQN.train_iteration, []

    def poisoned(self):
        result = original(self)
        calls.append(1)
        if len(calls) in iteration:
            if how == "loss":
                result.metrics["losses/td_loss"] = float("nan")
            else:
                with torch.no_grad():
                    self.q[0].weight.fill_(float("inf"))
        return result
    monkeypatch.setattr(HerDQN, "train_iteration", poisoned)


@pytest.mark.parametrize("how, what", [("loss", "losses/td_loss = nan"), ("weights", "parameter q.0.weight")])
def test_nonfinite_stops_in_the_iteration_it_appears_and_keeps_the_last_good_checkpoint(tmp_path, monkeypatch,
                                                                                         how, what):
    _poison_at(monkeypatch, {3}, how)
    out = tmp_path / "run"
    with pytest.raises(NonFiniteError, match=rf"non-finite {what} in iteration 3 .*last good checkpoint"):
        train(out, "checkpoint.every_s=0", budget=5000)
    saved = checkpoint.load(out / "checkpoint.pt")
    assert saved["runner"]["iteration"] == 2  # the bad state was not saved
    assert all(torch.isfinite(t).all() for t in saved["agent"]["q"].values())
    assert not (out / "results.json").exists()


def test_nonfinite_from_a_huge_learning_rate(tmp_path):
    with pytest.raises(NonFiniteError, match="in iteration 1 .*no checkpoint had been written yet"):
        train(tmp_path / "run", "algo.lr=1e30", budget=5000)


def test_guard_skip_restores_the_last_good_networks(tmp_path, monkeypatch, capsys):
    _poison_at(monkeypatch, {3}, "weights")
    results = train(tmp_path / "run", "guard.nonfinite=skip", budget=600)
    assert "update skipped" in capsys.readouterr().err
    saved = checkpoint.load(tmp_path / "run" / "checkpoint.pt")
    assert all(torch.isfinite(t).all() for t in saved["agent"]["q"].values())
    assert results["env_steps"] >= 600


def test_guard_skip_gives_up_after_max_skips(tmp_path):
    with pytest.raises(NonFiniteError, match="2 iterations in a row"):
        train(tmp_path / "run", "algo.lr=1e30", "guard.nonfinite=skip", "guard.max_skips=2", budget=5000)


# ---- checkpoint files -----------------------------------------------------------------------

class _Evil:
    marker = None

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


@pytest.fixture(scope="module")
def real_checkpoint(tmp_path_factory):
    out = tmp_path_factory.mktemp("real") / "run"
    train(out, budget=100)
    return (out / "checkpoint.pt").read_bytes()


def _bad_file(kind, path, real):
    if kind == "empty":
        path.write_bytes(b"")
    elif kind == "truncated":
        path.write_bytes(real[: len(real) // 2])
    elif kind == "random":
        path.write_bytes(np.random.default_rng(0).bytes(5000))
    elif kind == "malicious":
        evil = _Evil()
        evil.marker = path.parent.parent / "pwned"
        torch.save({"agent": evil, "runner": {}, "rng": {}, "config": {}}, path, pickle_protocol=2)
    elif kind == "raw_pickle":
        path.write_bytes(pickle.dumps({"agent": {}, "runner": {}, "rng": {}, "config": {}}))
    elif kind == "foreign":
        torch.save({"state_dict": {"w": torch.ones(2)}}, path)
    elif kind == "agent_of_another_algo":
        state = torch.load(__import__("io").BytesIO(real), weights_only=True)
        state["agent"] = {"policy": {}}
        torch.save(state, path)


KINDS = {
    "empty": "the file is empty",
    "truncated": "not a readable torch file",
    "random": "not a readable torch file",
    "malicious": "it refers to io.open; only tensors and plain containers are loaded",
    "raw_pickle": "not a readable torch file",
    "foreign": "not a her-rl checkpoint",
    "agent_of_another_algo": "does not fit algo 'her_dqn'",
}


@pytest.mark.parametrize("mode", ["resume", "load"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_bad_checkpoint_files_are_one_line_naming_file_and_why(tmp_path, real_checkpoint, kind, mode):
    out = tmp_path / "run"
    out.mkdir()
    path = out / "checkpoint.pt"
    _bad_file(kind, path, real_checkpoint)
    before = snapshot(out)
    overrides = ["resume=true", "progress=false"] if mode == "resume" else [f"load={path}"]
    with pytest.raises(CheckpointError) as err:
        main(overrides, out_dir=out if mode == "resume" else None)
    text = str(err.value)
    assert text.startswith(f"cannot load checkpoint {path}: ") and KINDS[kind] in text
    assert "weights_only=False" not in text and "\n" not in text
    assert snapshot(out) == before and not (tmp_path / "pwned").exists()


def test_missing_load_path_is_one_line(tmp_path):
    with pytest.raises(CheckpointError, match=r"cannot load checkpoint .*nope\.pt: no such file$"):
        main([f"load={tmp_path / 'nope.pt'}"])


def test_full_disk_keeps_the_previous_checkpoint(tmp_path, monkeypatch, capsys):
    out = tmp_path / "run"
    train(out)
    before = (out / "checkpoint.pt").read_bytes()
    for leftover in ("checkpoint.pt.killed1.tmp", "config.yaml.killed2.tmp", "results.json.killed3.tmp"):
        (out / leftover).write_bytes(b"left by a killed write")

    def full_disk(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(torch, "save", full_disk)
    capsys.readouterr()
    main(["resume=true", "budget.env_steps=700", "checkpoint.every_s=0", "progress=false"], out_dir=out)
    assert (out / "checkpoint.pt").read_bytes() == before
    assert not list(out.glob("*.tmp"))
    warnings = [line for line in capsys.readouterr().err.splitlines() if "could not write checkpoint" in line]
    assert len(warnings) == 2  # the first failure of the streak, and the final save
    assert all("No space left on device" in w and "the previous checkpoint (env step 3" in w for w in warnings)


def test_atomic_text_writes_use_unique_temp_files(tmp_path, monkeypatch):
    temps, replace = [], os.replace

    def spy(src, dst):
        temps.append(os.path.basename(src))
        replace(src, dst)

    monkeypatch.setattr(os, "replace", spy)
    for text in ("a", "b"):
        checkpoint.write_atomic_text(tmp_path / "results.json", text)
    assert len(set(temps)) == 2 and (tmp_path / "results.json").read_text() == "b"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.json"]


# ---- load= ----------------------------------------------------------------------------------

def test_load_evaluates_with_the_saved_run_settings_next_to_the_checkpoint(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "run"
    train(out, "eval.episodes=7", "n=5")
    report = main([f"load={out / 'checkpoint.pt'}"])
    assert report["episodes"] == 7 and report["env"] == "bitflip"
    assert json.loads((out / "eval.json").read_text()) == report
    assert main([f"load={out}", "eval.episodes=3"])["episodes"] == 3  # a run folder stands for its checkpoint
    main([f"load={out}"], out_dir=tmp_path / "ev")
    assert (tmp_path / "ev" / "eval.json").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ev", "run"]  # no default folder
    with pytest.raises(ConfigError, match="cannot evaluate: the checkpoint was trained with n=5"):
        main([f"load={out}", "n=4"])


def test_resume_after_a_crash_is_exact(tmp_path, monkeypatch):
    """The early checkpoint, the guard and the lock change nothing in what is trained: a run that
    crashed and was resumed by folder ends with the same weights as one that never stopped."""
    from her_rl.algos.her_dqn import HerDQN

    common = ["checkpoint.every_s=0", "eval.every_iterations=2"]
    whole = train(tmp_path / "whole", *common, budget=1500)
    original, calls = HerDQN.train_iteration, []

    def crash_once(self):
        calls.append(1)
        if len(calls) == 5:
            raise RuntimeError("simulated crash")
        return original(self)

    monkeypatch.setattr(HerDQN, "train_iteration", crash_once)
    with pytest.raises(RuntimeError):
        train(tmp_path / "split", *common, budget=1500)
    resumed = main(["resume=true", "progress=false"], out_dir=tmp_path / "split")
    for key in ("env_steps", "iterations", "episodes", "eval_return", "eval_success_rate"):
        assert resumed[key] == whole[key]
    a, b = (checkpoint.load(tmp_path / d / "checkpoint.pt")["agent"]["q"] for d in ("whole", "split"))
    assert all(torch.equal(a[k], b[k]) for k in a)
