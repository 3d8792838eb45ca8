"""her_rl/run/runner.py: main/run train a run to its results (on disk too), repeatably; load= of that run is the
saved side's (her_rl.saved.evaluate), which her_rl.train and a sweep's job hand it to, never the runner."""

import json

import pytest
from omegaconf import OmegaConf

import her_rl
from her_rl.config.compose import compose
from her_rl.errors import ConfigError
from her_rl.folder import rundir
from her_rl.run import runner
from her_rl.run.plan import plan_run
from her_rl.saved.evaluate import evaluate_checkpoint

BUDGET = 600
ARGS = ["n=4", f"budget.env_steps={BUDGET}", "progress=false", "seed=0"]
TIMING = ("wall_time_s", "sps", "checkpoint")  # what two identical runs may differ in


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = tmp_path_factory.mktemp("runner") / "run"
    return out, runner.main(ARGS, out_dir=out)


def test_main_trains_and_returns_the_numbers_of_results_json(trained):
    out, results = trained
    assert results["checkpoint"] == str(out / rundir.CHECKPOINT) and (out / rundir.CHECKPOINT).is_file()
    assert json.loads((out / rundir.RESULTS).read_text()) == results
    assert (results["algo"], results["env"], results["env_id"], results["seed"], results["n"]) == \
        ("her_dqn", "bitflip", "her_rl/BitFlip-v0", 0, 4)
    assert results["eval_episodes"] == 100
    assert 0 < results["env_steps"] and results["iterations"] > 0 and results["episodes"] > 0
    assert 0.0 <= results["eval_success_rate"] <= 1.0 and 0.0 <= results["eval_any_success_rate"] <= 1.0
    assert -4.0 <= results["eval_return"] <= 0.0
    if results["solved"]:  # stop_when_solved: it stops at the evaluation that solved it
        assert results["eval_success_rate"] >= 0.95 and results["solved_at_env_steps"] == results["env_steps"]
    else:
        assert results["solved_at_env_steps"] is None and results["env_steps"] >= BUDGET


def test_the_run_folder_holds_its_config_and_history(trained):
    out, _ = trained
    assert (out / rundir.CONFIG).is_file() and (out / rundir.HISTORY).is_file()
    saved = OmegaConf.load(out / rundir.CONFIG)  # the run's whole config, as given
    assert (saved.env.kwargs.n, saved.budget.env_steps, saved.seed, saved.algo.name) == (4, BUDGET, 0, "her_dqn")
    first = json.loads((out / rundir.HISTORY).read_text().splitlines()[0])
    assert first["event"] == "start" and first["overrides"] == ARGS


def test_the_same_seed_gives_the_same_results(trained, tmp_path):
    _, first = trained
    second = runner.main(ARGS, out_dir=tmp_path / "again")
    assert {k: v for k, v in second.items() if k not in TIMING} == {k: v for k, v in first.items() if k not in TIMING}
    assert second["checkpoint"] == str(tmp_path / "again" / rundir.CHECKPOINT)


def test_load_evaluates_the_saved_run_without_training(trained, tmp_path, capsys):
    out, results = trained
    before = (out / rundir.RESULTS).read_bytes(), (out / rundir.CHECKPOINT).read_bytes()
    overrides = [f"load={out}", "eval.episodes=20"]
    report = evaluate_checkpoint(plan_run(compose(overrides), out_dir=tmp_path / "eval", overrides=overrides))
    assert report["checkpoint"] == str(out / rundir.CHECKPOINT)
    assert (report["algo"], report["env"], report["episodes"], report["seed"]) == ("her_dqn", "bitflip", 20, 0)
    assert 0.0 <= report["eval_success_rate"] <= 1.0 and 1.0 <= report["eval_length"] <= 4.0
    assert "env_steps" not in report  # an evaluation, not a training run
    written = sorted(p.name for p in (tmp_path / "eval").iterdir())
    assert written == sorted(["eval.json", rundir.LOCK])  # no results.json, no checkpoint there
    assert json.loads((tmp_path / "eval" / "eval.json").read_text()) == report
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1]) == report
    assert ((out / rundir.RESULTS).read_bytes(), (out / rundir.CHECKPOINT).read_bytes()) == before
    assert not (out / "eval.json").exists()  # the folder given, not the run folder


def test_load_of_the_folder_writes_eval_json_next_to_the_checkpoint(trained):
    out, _ = trained
    report = her_rl.train([f"load={out}", "eval.episodes=10"])
    assert report["episodes"] == 10
    assert json.loads((out / "eval.json").read_text()) == report
    again = her_rl.train([f"load={out}", "eval.episodes=10"])
    assert again == report  # the same seed evaluates the same episodes


def test_load_and_resume_contradict_each_other(trained, tmp_path):
    out, _ = trained
    with pytest.raises(ConfigError, match="load= and resume=true contradict each other"):
        her_rl.train([f"load={out}", "resume=true"], out_dir=tmp_path / "x")
    assert not (tmp_path / "x").exists()


def test_the_runner_only_trains(trained, tmp_path):
    out, _ = trained
    for call in (lambda: runner.main([f"load={out}"]), lambda: runner.run(compose([f"load={out}"]), tmp_path / "ev")):
        with pytest.raises(TypeError, match="^load= evaluates a saved run: her_rl.train or her_rl.saved.evaluate"):
            call()
    assert not (tmp_path / "ev").exists()


def test_a_refused_config_writes_nothing(tmp_path):
    with pytest.raises(ConfigError, match="acts in continuous action spaces"):
        runner.main([*ARGS, "algo=her_ddpg"], out_dir=tmp_path / "run")
    with pytest.raises(ConfigError, match="^seed=-1 is not allowed"):
        runner.run(compose(["n=4", "seed=-1"]), out_dir=tmp_path / "run")
    assert list(tmp_path.iterdir()) == []


def test_a_run_checks_its_config_once_in_its_plan_and_the_learner_does_not_check_it_again(tmp_path, monkeypatch):
    from her_rl.algos.base import Learner
    from her_rl.config import checks

    calls = {"plan": 0, "learner": 0}
    plan_check, learner_check = checks.check, Learner.check_config.__func__

    def counted_check(*args, **kwargs):
        calls["plan"] += 1
        return plan_check(*args, **kwargs)

    def counted_learner(cls, values):
        calls["learner"] += 1
        return learner_check(cls, values)

    monkeypatch.setattr(checks, "check", counted_check)
    monkeypatch.setattr("her_rl.run.plan.check", counted_check)
    monkeypatch.setattr(Learner, "check_config", classmethod(counted_learner))
    runner.main(ARGS, out_dir=tmp_path / "run")
    assert calls == {"plan": 1, "learner": 1}  # the learner's rules, once: inside the plan's check


def test_a_learner_built_outside_a_plan_checks_its_own_values():
    from her_rl.algos.her_dqn import HerDQN
    from her_rl.config.checks import resolved

    env = resolved(compose(["n=4"]))["env"]
    with pytest.raises(ConfigError, match="batch_size"):
        HerDQN(env=env, batch_size=0)
    assert HerDQN(env=env, batch_size=0, checked=True).batch_size == 0  # checked=True: the plan's word is taken
