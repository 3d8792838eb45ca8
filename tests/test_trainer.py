"""The pieces of a run: the checked plan, the trainer's state, signals, agent building, errors."""

import signal
import sys

import gymnasium as gym
import pytest

from her_rl.folder import checkpoint
from her_rl.envs import probe as config_module
from her_rl.run.runner import make_agent
from her_rl.errors import CheckpointError, ConfigError, NonFiniteError, OutputError
from her_rl.run.plan import plan_run
from her_rl.config.compose import compose
from her_rl.run.runner import main
from her_rl.run.signals import StopSignals
from her_rl.run.trainer import RunState, Trainer

FAST = ["n=4", "progress=false", "eval.episodes=5", "eval.stop_when_solved=false"]


@pytest.fixture
def builds(monkeypatch):
    """Every env her-rl builds, as ``(num_envs, where)``; no probe remembered from earlier tests."""
    made = []
    make, make_vec = gym.make, gym.make_vec

    def counted_make(*args, **kwargs):
        made.append((1, "make"))
        return make(*args, **kwargs)

    def counted_make_vec(*args, **kwargs):
        made.append((kwargs["num_envs"], "make_vec"))
        return make_vec(*args, **kwargs)

    monkeypatch.setattr(gym, "make", counted_make)
    monkeypatch.setattr(gym, "make_vec", counted_make_vec)
    config_module.forget_probes()
    return made


def test_a_run_builds_its_env_once_to_check_it_once_to_train_once_to_evaluate(tmp_path, builds):
    main([*FAST, "budget.env_steps=100", "algo.episodes_per_cycle=3"], out_dir=tmp_path / "run")
    # the check builds it the way training does (make_vec), with one copy
    assert builds == [(1, "make_vec"), (3, "make_vec"), (5, "make_vec")]


def test_her_run_checks_the_env_once_though_it_checks_the_command_twice(tmp_path, builds, monkeypatch, capsys):
    from her_rl import cli

    monkeypatch.setattr(sys, "argv", ["her-run", *FAST, "budget.env_steps=100", "algo.episodes_per_cycle=3",
                                      f"hydra.run.dir={tmp_path / 'run'}"])
    cli.main()  # before Hydra runs (nothing may be written) and again inside the job
    assert builds == [(1, "make_vec"), (3, "make_vec"), (5, "make_vec")]
    assert (tmp_path / "run" / "results.json").is_file()


def test_the_trainer_keeps_the_run_state_it_saves(tmp_path):
    plan = plan_run(compose([*FAST, "budget.env_steps=300", "eval.every_iterations=4"]), tmp_path / "run", [])
    try:
        agent = make_agent(plan.config)
        plan.take_folder()
        trainer = Trainer(plan, agent, RunState())
        assert trainer.train() is True
    finally:
        plan.release()
    state = trainer.state
    # the budget within one lock-step of the 4 copies; the episodes cut at the budget are not counted
    assert 300 <= state.env_steps < 300 + 4 and state.iteration > 4
    assert 4 * (state.iteration - 1) <= state.episodes <= 4 * state.iteration
    assert trainer.saved_at == state.env_steps and trainer.evaluated_at == state.iteration  # the final evaluation
    saved = checkpoint.load(plan.checkpoint)
    assert saved["runner"] == state.to_dict() and RunState.restore(saved["runner"]) == state
    assert saved["config"] == plan.config and not trainer.signals.received


def test_a_solving_evaluation_stops_the_run_only_inside_the_loop(tmp_path):
    solved_at_once = ["algo=ppo", "env=cartpole", "eval.return_threshold=1", "eval.every_iterations=2"]
    plan = plan_run(compose([*solved_at_once, "progress=false", "eval.episodes=2"]), tmp_path / "run", [])
    try:
        plan.take_folder()
        trainer = Trainer(plan, make_agent(plan.config), RunState())
        trainer.evaluate(may_stop=False)  # as the final evaluation does: noted, not a reason to stop
        assert trainer.state.solved_at_env_steps == 0 and trainer.state.solved is False
        trainer.state.solved_at_env_steps = None
        trainer.train()  # the first evaluation in the loop solves (every episode returns >= 1) and ends it
    finally:
        plan.release()
    assert trainer.state.solved and trainer.state.solved_at_env_steps == trainer.state.env_steps
    assert trainer.state.iteration == int(plan.config["eval"]["every_iterations"])


def test_a_signal_is_noted_then_ends_the_run_with_128_plus_it(tmp_path, capsys):
    before = signal.getsignal(signal.SIGTERM)
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)  # a background job inherits SIG_IGN
    try:
        _noted_then_ended(tmp_path, capsys, before)
    finally:
        signal.signal(signal.SIGINT, inherited)


def _noted_then_ended(tmp_path, capsys, before):
    with StopSignals() as stop:
        signal.raise_signal(signal.SIGINT)  # the first Ctrl-C is noted; a second one aborts at once
        assert stop.received == [signal.SIGINT]
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)
    with StopSignals() as stop:
        signal.raise_signal(signal.SIGTERM)
        signal.raise_signal(signal.SIGTERM)
        assert stop.received == [signal.SIGTERM] * 2 and stop.signum == signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) is before
    with pytest.raises(SystemExit) as exit_:
        stop.end_run(tmp_path, 1234, saved=False)
    assert exit_.value.code == 128 + signal.SIGTERM
    assert "stopped by signal 15 at env step 1,234 (checkpoint NOT saved)" in capsys.readouterr().out
    StopSignals().end_run(tmp_path, 0, saved=True)  # no signal: nothing to end


def test_one_function_builds_agents_to_train_or_to_act_and_loads_their_state(tmp_path, builds):
    from her_rl.envs import make_vec

    main([*FAST, "budget.env_steps=200", "algo.episodes_per_cycle=3"], out_dir=tmp_path / "run")
    saved = checkpoint.load(tmp_path / "run")
    del builds[:]
    trained = make_agent(saved["config"], state=saved["agent"], source="x.pt")
    acting = make_agent(saved["config"], inference=True, state=saved["agent"], source="x.pt")
    assert builds == [(3, "make_vec"), (1, "make_vec")]  # acting only: one copy, to read the spaces
    obs, _ = make_vec(saved["config"]["env"], 6).reset(seed=1)
    assert (trained.act(obs) == acting.act(obs)).all()
    with pytest.raises(CheckpointError, match=r"^cannot load checkpoint x\.pt: its agent state does not fit algo "
                                              r"'her_dqn' \(.*\)$"):
        make_agent(saved["config"], inference=True, state={"q": {}}, source="x.pt")


def test_errors_live_in_one_module_with_their_exit_codes():
    assert issubclass(CheckpointError, ConfigError) and issubclass(ConfigError, ValueError)
    assert [e.exit_code for e in (ConfigError, CheckpointError, OutputError, NonFiniteError)] == [2, 2, 5, 3]
