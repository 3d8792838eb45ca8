"""Resume by folder and load= (her_rl/config/saved.py, her_rl/folder/rundir.py): the saved config plus safe changes, refusals that
write nothing, and a crashed run that resumes to the same result as one that never stopped."""

import json
import os

import pytest
import torch
from omegaconf import OmegaConf

import her_rl
from her_rl.folder import checkpoint
from her_rl.errors import CheckpointError, ConfigError
from her_rl.run.runner import main

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


def crash_in_iteration(monkeypatch, n):
    """HerDQN's n-th training iteration (counted from now, over every run) raises, as a crash would."""
    from her_rl.algos.her_dqn import HerDQN

    original, calls = HerDQN.train_iteration, []

    def crashing(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == n:
            raise RuntimeError("simulated crash")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(HerDQN, "train_iteration", crashing)


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
    (lambda out: (out.mkdir(), (out / "config.yaml").write_text("n: 4\n"), (out / "history.jsonl").write_text("")),
     "resume=auto starts it afresh"),  # a run that stopped before its first checkpoint
])
def test_resume_true_never_restarts_silently(tmp_path, prepare, message):
    out = tmp_path / "run"
    prepare(out)
    listing = sorted(os.listdir(tmp_path))
    with pytest.raises(ConfigError, match=message):
        main(["resume=true", "progress=false"], out_dir=out)
    assert sorted(os.listdir(tmp_path)) == listing


def test_crash_after_the_first_checkpoint_resumes_without_duplicate_steps(tmp_path, monkeypatch):
    """The first checkpoint comes after the first iteration (not after checkpoint.every_s); what
    the crashed run logged after it is purged from TensorBoard on resume."""
    out = tmp_path / "run"
    crash_in_iteration(monkeypatch, 4)
    with pytest.raises(RuntimeError, match="simulated crash"):
        train(out, "checkpoint.every_s=3600", budget=5000)
    monkeypatch.undo()
    saved = checkpoint.load(out / "checkpoint.pt")
    assert saved["runner"]["iteration"] == 1 and saved["runner"]["env_steps"] > 0
    assert len(tb_steps(out)) == 3  # iterations 2 and 3 were logged after that checkpoint
    results = main(["resume=true", "budget.env_steps=600", "progress=false"], out_dir=out)
    steps = tb_steps(out)
    assert steps == sorted(set(steps)) and len(steps) == results["iterations"]


def test_resume_after_a_crash_is_exact(tmp_path, monkeypatch):
    """The early checkpoint, the guard and the lock change nothing in what is trained: a run that
    crashed and was resumed by folder ends with the same weights as one that never stopped."""
    common = ["checkpoint.every_s=0", "eval.every_iterations=2"]
    whole = train(tmp_path / "whole", *common, budget=1500)
    crash_in_iteration(monkeypatch, 5)
    with pytest.raises(RuntimeError, match="simulated crash"):
        train(tmp_path / "split", *common, budget=1500)
    resumed = main(["resume=true", "progress=false"], out_dir=tmp_path / "split")
    for key in ("env_steps", "iterations", "episodes", "eval_return", "eval_success_rate"):
        assert resumed[key] == whole[key]
    a, b = (checkpoint.load(tmp_path / d / "checkpoint.pt")["agent"]["q"] for d in ("whole", "split"))
    assert all(torch.equal(a[k], b[k]) for k in a)


# ---- load= takes the saved run's settings as resume does --------------------------------------

def test_load_evaluates_with_the_saved_run_settings_next_to_the_checkpoint(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "run"
    train(out, "eval.episodes=7", "n=5")
    report = her_rl.train([f"load={out / 'checkpoint.pt'}"])
    assert report["episodes"] == 7 and report["env"] == "bitflip"
    assert json.loads((out / "eval.json").read_text()) == report
    assert her_rl.train([f"load={out}", "eval.episodes=3"])["episodes"] == 3  # a run folder stands for its checkpoint
    her_rl.train([f"load={out}"], out_dir=tmp_path / "ev")
    assert (tmp_path / "ev" / "eval.json").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ev", "run"]  # no default folder
    with pytest.raises(ConfigError, match="cannot evaluate: the checkpoint was trained with n=5"):
        her_rl.train([f"load={out}", "n=4"])


def test_a_solved_run_resumed_without_stop_when_solved_trains_on_to_its_new_budget(tmp_path):
    out = tmp_path / "run"
    solved = main(["n=3", "progress=false", "eval.every_iterations=1", "eval.success_threshold=0.5",
                   "budget.env_steps=20000"], out_dir=out)
    assert solved["solved"] and solved["env_steps"] < 20000
    more = solved["env_steps"] + 500
    again = main(["resume=true", "eval.stop_when_solved=false", f"budget.env_steps={more}"], out_dir=out)
    assert again["env_steps"] >= more
    assert again["solved_at_env_steps"] == solved["solved_at_env_steps"]  # when it first solved is kept


def test_resuming_a_finished_run_logs_no_point_twice(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out = tmp_path / "run"
    train(out)
    before = (out / "metrics.jsonl").read_text()
    train(out, "resume=true")
    assert (out / "metrics.jsonl").read_text() == before
    acc = EventAccumulator(str(out / "tb"), size_guidance={"scalars": 0, "tensors": 0})
    acc.Reload()
    for tag in acc.Tags()["scalars"]:
        steps = [e.step for e in acc.Scalars(tag)]
        assert len(steps) == len(set(steps)), tag
    for tag in acc.Tags()["tensors"]:
        assert len(acc.Tensors(tag)) == 1, tag  # HParams summaries: once


@pytest.mark.parametrize("verb", ["resume=true", "resume=auto"])
def test_load_with_resume_is_refused_and_writes_nothing(tmp_path, verb):
    out = tmp_path / "run"
    train(out)
    before = snapshot(out)
    with pytest.raises(ConfigError, match="contradict each other"):
        her_rl.train([f"load={out}", verb])
    assert snapshot(out) == before and not (out / "eval.json").exists()


def test_a_later_weaker_evaluation_does_not_undo_when_the_run_first_solved(tmp_path):
    out = tmp_path / "run"
    first = main(["n=3", "progress=false", "eval.every_iterations=1", "eval.stop_when_solved=false",
                  "eval.success_threshold=0.5", "budget.env_steps=400"], out_dir=out)
    assert first["solved_at_env_steps"] is not None
    state = torch.load(out / "checkpoint.pt", weights_only=True)
    state["runner"]["eval"] = {**state["runner"]["eval"], "success_rate": 0.0}  # as if the last evaluation dropped
    torch.save(state, out / "checkpoint.pt")
    again = main(["resume=true", "budget.env_steps=600"], out_dir=out)
    assert again["solved_at_env_steps"] == first["solved_at_env_steps"]
    raised = main(["resume=true", "budget.env_steps=800", "eval.success_threshold=1.0"], out_dir=out)
    assert raised["env_steps"] >= 800  # a higher bar is judged afresh: trains on (and may solve again later)


def test_a_checkpoint_saved_on_cuda_resumes_and_loads_on_cpu(tmp_path):
    """A CUDA generator saves 16 bytes (seed and offset), a CPU one 5,056: the learner's generator is then
    seeded from the saved state, the same way each time, instead of failing to load."""
    out = tmp_path / "run"
    continuous = ["algo=her_sac", "env=push", "env.kwargs.actions=continuous"]
    train(out, *continuous, budget=200)
    path = out / "checkpoint.pt"
    saved = checkpoint.load(path)
    assert saved["agent"]["generator"].numel() > 16
    saved["agent"]["generator"] = torch.tensor([7, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0], dtype=torch.uint8)
    checkpoint.save(saved, path)
    her_rl.train([f"load={path}", "progress=false", "eval.episodes=2"])
    assert json.loads((out / "eval.json").read_text())["episodes"] == 2
    copy = tmp_path / "copy"
    copy.mkdir()
    for f in out.iterdir():
        if f.is_file():
            (copy / f.name).write_bytes(f.read_bytes())
    for folder in (out, copy):
        assert main(["resume=true", "budget.env_steps=400", "progress=false"], out_dir=folder)["env_steps"] >= 400
    a, b = (checkpoint.load(folder / "checkpoint.pt")["agent"] for folder in (out, copy))
    assert all(torch.equal(a["actor"][k], b["actor"][k]) for k in a["actor"])  # the same run from the same state


def test_a_generator_state_of_no_device_is_still_refused(tmp_path):
    out = tmp_path / "run"
    train(out, "algo=her_sac", "env=push", "env.kwargs.actions=continuous", budget=200)
    saved = checkpoint.load(out / "checkpoint.pt")
    saved["agent"]["generator"] = torch.zeros(100, dtype=torch.uint8)  # neither a CPU nor a CUDA generator's
    checkpoint.save(saved, out / "checkpoint.pt")
    with pytest.raises(CheckpointError, match="does not fit algo 'her_sac'"):
        main(["resume=true", "budget.env_steps=400", "progress=false"], out_dir=out)


# ---- runs saved by earlier versions --------------------------------------------------------------

@pytest.mark.parametrize("algo", ["her_redq", "her_crossq"])
def test_a_run_saved_with_keys_its_learner_no_longer_takes_resumes_and_loads(tmp_path, monkeypatch, algo):
    """HER-REDQ and HER-CrossQ once declared her_sac's simultaneous and actor_half (HER-REDQ critic_threads
    too), each allowed one value only: their saved runs hold them, and resume, resume=auto and load= read
    past them (her_rl/folder/rundir.py: RETIRED); another value is still refused as the key it is."""
    import shutil

    from her_rl.folder.rundir import RETIRED

    monkeypatch.chdir(tmp_path)
    out, early = tmp_path / "run", tmp_path / "early"
    small = [f"algo={algo}", "env=push", "env.kwargs.actions=continuous", "env.kwargs.max_episode_steps=10",
             "algo.hidden=[16,16]", "algo.episodes_per_cycle=2", "algo.updates_per_cycle=2", "algo.batch_size=8",
             "progress=false", "eval.episodes=2"]
    main([*small, "budget.env_steps=20"], out_dir=out)
    saved = torch.load(out / "checkpoint.pt", weights_only=True)
    saved["config"]["algo"].update(RETIRED[algo])  # as an earlier version wrote them
    torch.save(saved, out / "checkpoint.pt")
    config = OmegaConf.load(out / "config.yaml")
    config.algo.update(RETIRED[algo])
    OmegaConf.save(config, out / "config.yaml")
    early.mkdir()  # a run stopped before its first checkpoint: its config and history only
    for name in ("config.yaml", "history.jsonl"):
        shutil.copy(out / name, early / name)

    assert main(["resume=true", "budget.env_steps=40", "progress=false"], out_dir=out)["env_steps"] >= 40
    assert "simultaneous" not in OmegaConf.load(out / "config.yaml").algo  # written back in today's form
    assert main(["resume=auto", "progress=false"], out_dir=early)["env_steps"] >= 20
    assert her_rl.train([f"load={out}", "eval.episodes=2"])["episodes"] == 2
    her_rl.load(out)

    saved["config"]["algo"]["actor_half"] = "process"  # never a value of theirs: the saved config's fault
    torch.save(saved, out / "checkpoint.pt")
    with pytest.raises(CheckpointError, match=r"saved config is not valid .*has no parameter\(s\) \['actor_half'"):
        her_rl.load(out)
