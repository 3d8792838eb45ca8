"""The public Python API: ``her_rl.train``, ``her_rl.load(...).predict``, ``her_rl.evaluate``."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import her_rl

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def flip8(tmp_path_factory):
    """A bit-flip n=8 run trained until every greedy episode of an evaluation succeeds."""
    out = tmp_path_factory.mktemp("flip8") / "run"
    results = her_rl.train(["algo=her_dqn", "env=bitflip", "n=8", "eval.success_threshold=1.0",
                            "budget.env_steps=20000", "progress=false"], out_dir=out)
    return out, results


def test_train_returns_what_results_json_holds(flip8):
    out, results = flip8
    assert results == json.loads((out / "results.json").read_text())
    assert results["algo"] == "her_dqn" and results["n"] == 8 and results["solved"]
    assert (out / "config.yaml").exists() and (out / "checkpoint.pt").exists()


def test_loaded_policy_drives_a_plain_gymnasium_env(flip8, tmp_path):
    """Only ``her_rl.load`` and gymnasium: the user's own loop over a plain ``gymnasium.make`` env."""
    script = textwrap.dedent(f"""
        import gymnasium as gym
        import her_rl

        policy = her_rl.load({str(flip8[0])!r})
        env = gym.make("her_rl/BitFlip-v0", n=8)
        wins = 0
        for episode in range(50):
            obs, info = env.reset(seed=1000 + episode)
            done = False
            while not done:
                action, state = policy.predict(obs, deterministic=True)
                assert state is None and env.action_space.contains(int(action))
                obs, reward, terminated, truncated, info = env.step(action)
                done = terminated or truncated
            wins += bool(info["is_success"])
        print(wins / 50)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    assert float(done.stdout.strip().splitlines()[-1]) >= 0.9


def test_load_builds_only_the_networks(flip8):
    policy = her_rl.load(flip8[0])
    assert policy.agent.envs is None and policy.agent.memory is None
    assert policy.algo == "her_dqn" and policy.env_id == "her_rl/BitFlip-v0"
    assert str(next(policy.agent.q.parameters()).device) == "cpu"
    same = her_rl.load(flip8[0] / "checkpoint.pt")  # the checkpoint file works as well as its folder
    obs = policy.make_env().reset(seed=3)[0]
    assert policy.predict(obs, deterministic=True)[0] == same.predict(obs, deterministic=True)[0]


def test_predict_takes_one_observation_or_a_batch(flip8):
    policy = her_rl.load(flip8[0])
    envs = gym.make_vec("her_rl/BitFlip-v0", num_envs=5, n=8)
    batch, _ = envs.reset(seed=0)
    actions, _ = policy.predict(batch, deterministic=True)
    assert actions.shape == (5,)
    one = {k: v[2] for k, v in batch.items()}
    assert policy.predict(one, deterministic=True)[0] == actions[2]
    with pytest.raises(ValueError, match="fits neither one observation"):
        policy.predict({k: v[:, :3] for k, v in batch.items()})
    explore = [policy.predict(one, deterministic=False)[0] for _ in range(200)]
    assert len(set(map(int, explore))) > 1  # epsilon-greedy: not always the greedy action


def test_evaluate_is_greedy_and_seeded(flip8):
    policy = her_rl.load(flip8[0])
    first, again = her_rl.evaluate(policy, episodes=50, seed=4), her_rl.evaluate(policy, episodes=50, seed=4)
    assert first == again and first["episodes"] == 50 and first["success_rate"] >= 0.9
    with pytest.raises(her_rl.ConfigError, match="episodes"):
        her_rl.evaluate(policy, episodes=0)


def test_make_env_renders_the_runs_env(flip8):
    env = her_rl.load(flip8[0]).make_env(render_mode="rgb_array")
    env.reset(seed=0)
    frame = env.render()
    assert isinstance(frame, np.ndarray) and frame.ndim == 3 and frame.shape[2] == 3
    assert env.unwrapped.n == 8


@pytest.mark.parametrize("overrides,env_id", [
    (["algo=ppo", "env=cartpole"], "CartPole-v1"),
    (["algo=her_sac", "env=push", "env.kwargs.actions=continuous"], "her_rl/Push-v0"),
])
def test_other_algorithms_load_and_act(tmp_path, overrides, env_id):
    her_rl.train([*overrides, "budget.env_steps=400", "progress=false"], out_dir=tmp_path / "run")
    policy = her_rl.load(tmp_path / "run")
    assert policy.agent.envs is None
    env = policy.make_env()
    obs, _ = env.reset(seed=0)
    action, _ = policy.predict(obs, deterministic=True)
    assert env.action_space.contains(np.asarray(action, dtype=env.action_space.dtype))
    env.step(action)


def test_bad_input_is_one_clear_error(tmp_path):
    with pytest.raises(her_rl.ConfigError, match="unknown algo 'nope'"):
        her_rl.train(["algo=nope"], out_dir=tmp_path / "a")
    with pytest.raises(her_rl.ConfigError, match="algo.k=1.5 is not allowed"):
        her_rl.train(["algo.k=1.5"], out_dir=tmp_path / "b")
    with pytest.raises(her_rl.ConfigError, match="unknown config key"):
        her_rl.train(["algo.nope=1"], out_dir=tmp_path / "c")
    assert not any(tmp_path.iterdir())  # nothing written for a refused run
    with pytest.raises(her_rl.CheckpointError, match="holds no checkpoint.pt"):
        her_rl.load(tmp_path)
    with pytest.raises(her_rl.CheckpointError, match="no such file"):
        her_rl.load(tmp_path / "missing.pt")


def test_device_is_checked(flip8):
    with pytest.raises(her_rl.ConfigError, match="device"):
        her_rl.load(flip8[0], device="tpu")


def test_public_names():
    for name in ("train", "load", "evaluate", "Policy", "ConfigError", "CheckpointError", "__version__"):
        assert name in her_rl.__all__ and hasattr(her_rl, name)


def test_the_building_blocks_are_her_rl_rl_s_one_list_read_without_torch():
    """her_rl serves every name of her_rl.rl.__all__ (the one list of building blocks); listing them
    (__all__, dir) loads no torch, naming one imports it."""
    code = ("import sys, her_rl; names = list(her_rl.__all__); shown = dir(her_rl); before = 'torch' in sys.modules; "
            "import her_rl.rl as rl; print(before, names[len(names) - len(rl.__all__):] == list(rl.__all__), "
            "set(rl.__all__) <= set(shown), all(getattr(her_rl, n) is getattr(rl, n) for n in rl.__all__))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "True", "True", "True"]
    assert not hasattr(her_rl, "nope") and not hasattr(her_rl, "_blocks_missing")


def test_example_script_trains_loads_and_evaluates(tmp_path):
    script = ROOT / "experiments" / "train_load_evaluate.py"
    assert len([line for line in script.read_text().splitlines() if line.strip()]) < 20
    for _ in range(2):  # twice in a row: the second run resumes the first's folder, never a traceback
        done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path,
                              timeout=300)
        assert done.returncode == 0, done.stderr
        assert "reached the goal: True" in done.stdout


@pytest.mark.parametrize("call, message", [
    (lambda: her_rl.train(None), "overrides must be a list of strings"),
    (lambda: her_rl.train("n=4"), "overrides must be a list of strings"),
    (lambda: her_rl.train(["n=4"], out_dir=5), "out_dir must be a folder path"),
    (lambda: her_rl.train(["n=4", "hydra.sweep.dir=x"]), "is not accepted by her_rl.train"),
    (lambda: her_rl.train(["n=4", "hydra.run.dir=a"], out_dir="b"), "name two folders"),
    (lambda: her_rl.load(None), "load needs a run folder or a checkpoint.pt path"),
    (lambda: her_rl.load(123), "load needs a run folder or a checkpoint.pt path"),
    (lambda: her_rl.evaluate(None), "evaluate needs the Policy of her_rl.load"),
])
def test_bad_arguments_to_the_python_api_are_one_her_rl_error(call, message):
    with pytest.raises(her_rl.ConfigError, match=message) as err:  # CheckpointError is a ConfigError
        call()
    assert "\n" not in str(err.value)


def test_hydra_run_dir_among_the_overrides_is_the_run_folder(tmp_path):
    results = her_rl.train(["n=4", "progress=false", "budget.env_steps=64", f"hydra.run.dir={tmp_path / 'here'}"])
    assert (tmp_path / "here" / "results.json").is_file() and results["env_steps"] >= 64


def test_two_threads_train_at_once(tmp_path):
    """her_rl.train from several threads: Hydra's global state is taken one composition at a time."""
    import threading

    results, errors = {}, []

    def train(seed):
        try:
            results[seed] = her_rl.train(["n=4", "budget.env_steps=300", "progress=false", f"seed={seed}"],
                                         out_dir=tmp_path / f"run{seed}")
        except BaseException as exc:  # noqa: BLE001  (the test reports whatever a thread raised)
            errors.append(repr(exc))

    threads = [threading.Thread(target=train, args=(seed,)) for seed in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert errors == [] and sorted(results) == [0, 1]
    assert all((tmp_path / f"run{seed}" / "results.json").is_file() for seed in (0, 1))


def test_a_ctrl_c_during_her_rl_train_is_a_keyboard_interrupt_after_a_checkpoint(tmp_path):
    """As the safety page says: the run ends its iteration and checkpoints; the caller gets a
    KeyboardInterrupt (not SystemExit), and resume=true continues the run."""
    import os
    import signal
    import threading
    import time

    def interrupt():  # once an iteration is logged (a signal during the checks is a plain KeyboardInterrupt)
        metrics = tmp_path / "run" / "metrics.jsonl"
        while not (metrics.exists() and metrics.stat().st_size > 0):
            time.sleep(0.02)
        os.kill(os.getpid(), signal.SIGINT)

    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)  # a background job inherits SIG_IGN
    threading.Thread(target=interrupt, daemon=True).start()
    try:
        with pytest.raises(KeyboardInterrupt, match="stopped by signal 2"):
            her_rl.train(["n=30", "budget.env_steps=10000000", "progress=false"], out_dir=tmp_path / "run")
    finally:
        signal.signal(signal.SIGINT, inherited)
    assert (tmp_path / "run" / "checkpoint.pt").is_file() and not (tmp_path / "run" / "results.json").exists()
