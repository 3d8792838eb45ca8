"""Bad input to the Python API is one her-rl error line, never a torch/numpy/Key error or a silent act:
``predict``'s observations and arguments, ``load``/``evaluate``/``train``'s arguments, and checkpoints
whose tensors are not finite or not of the shapes the run's config builds (refused by ``her_rl.load``,
by ``resume`` and by ``her-run resume=true`` before anything is written)."""

import os
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import her_rl
from her_rl.errors import CheckpointError, ConfigError
from her_rl.run.runner import main

sys.path.insert(0, str(Path(__file__).parent))
import forked  # noqa: E402

# Tiny runs: what is checked is the input, not what was learned.
RUNS = {
    "her_dqn-bitflip": ["algo=her_dqn", "env=bitflip", "n=4", "budget.env_steps=200"],
    "ppo-cartpole": ["algo=ppo", "env=cartpole", "budget.env_steps=300"],
    "her_sac-push": ["algo=her_sac", "env=push", "env.kwargs.actions=continuous", "budget.env_steps=200"],
}
NAN, INF = float("nan"), float("inf")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("inputs")
    for name, overrides in RUNS.items():
        her_rl.train([*overrides, "progress=false"], out_dir=root / name)
    return {name: root / name for name in RUNS}


@pytest.fixture(scope="module")
def policies(runs):
    return {name: her_rl.load(folder) for name, folder in runs.items()}


def batch_of(policy, n=4):
    """``n`` observations of the run's env, batched as a vector env gives them."""
    env = policy.make_env()
    obs = [env.reset(seed=i)[0] for i in range(n)]
    env.close()
    if isinstance(obs[0], dict):
        return {k: np.stack([o[k] for o in obs]) for k in obs[0]}
    return np.stack(obs)


def refused(policy, bad, message, **kwargs):
    with pytest.raises(ConfigError, match=message) as caught:
        policy.predict(bad, **kwargs)
    assert "\n" not in str(caught.value), str(caught.value)


# ---- predict ----------------------------------------------------------------------------------------------

def _goal_cases(obs):
    """(bad observation, what the message must say) for a goal env's batch ``obs``."""
    floats = {k: v.astype(np.float64) for k, v in obs.items()}
    goal = obs["desired_goal"]
    return [
        ({k: v for k, v in obs.items() if k != "desired_goal"}, r"has no key 'desired_goal'"),
        ({**obs, "desired_goal": goal[:, :1]}, r"\['desired_goal'\] of shape \(4, 1\) fits neither"),
        ({**obs, "desired_goal": goal[..., None]}, r"\['desired_goal'\] of shape .* fits neither"),
        ({k: v[:0] for k, v in obs.items()}, r"\['\w+'\] is an empty batch"),
        ({**obs, "observation": obs["observation"].astype(str)}, r"\['observation'\] has dtype <U\d+, not numbers"),
        ({**obs, "desired_goal": goal.astype(object)}, r"\['desired_goal'\] has dtype object"),
        ({**obs, "desired_goal": goal.astype(complex)}, r"\['desired_goal'\] has dtype complex128"),
        ({**obs, "desired_goal": goal[:3]}, r"mixes batch sizes across keys \(.*desired_goal: 3"),
        ({**obs, "desired_goal": goal[0]}, r"mixes batch sizes across keys \(.*desired_goal: one observation"),
        ({**floats, "desired_goal": np.where(np.eye(*goal.shape) > 0, NAN, 0.0)},
         r"\['desired_goal'\] holds NaN or inf \(first at index \(0, 0\)\)"),
        ({**floats, "observation": np.full_like(floats["observation"], -INF)}, r"\['observation'\] holds NaN or inf"),
        ({**floats, "observation": np.full_like(floats["observation"], 1e300)},
         r"\['observation'\] holds values beyond float32's range"),
        ([obs, obs], r"observation must be a dict with keys"),
    ]


def _box_cases(obs):
    return [
        (obs[:, :3], r"observation of shape \(4, 3\) fits neither one observation \(4,\)"),
        (obs[:0], r"observation is an empty batch"),
        (obs.astype(str), r"observation has dtype <U\d+, not numbers"),
        (np.where(np.eye(4) > 0, NAN, obs), r"observation holds NaN or inf \(first at index \(0, 0\)\)"),
        (np.full(4, INF), r"observation holds NaN or inf"),
        (np.full(4, 1e300), r"observation holds values beyond float32's range"),
        ([[0.0, 1.0], [1.0]], r"observation is not an array of numbers"),
        ({"observation": obs}, r"observation is a dict with keys \['observation'\]"),
    ]


@pytest.mark.parametrize("name", list(RUNS))
def test_bad_observations_are_one_config_error_naming_the_field(policies, name):
    policy = policies[name]
    obs = batch_of(policy)
    for bad, message in _goal_cases(obs) if isinstance(obs, dict) else _box_cases(obs):
        refused(policy, bad, message)


def test_config_error_is_a_value_error_for_sb3_users():
    assert issubclass(ConfigError, ValueError) and issubclass(CheckpointError, ConfigError)


def test_bits_and_discrete_values_are_checked(policies):
    """Values a MultiBinary space does not hold would be read as other bits and acted on."""
    policy = policies["her_dqn-bitflip"]
    obs = batch_of(policy)
    for bad in (2, -1):
        refused(policy, {**obs, "observation": np.full_like(obs["observation"], bad)},
                r"\['observation'\] holds values outside MultiBinary\(4\)")
    refused(policy, {**obs, "desired_goal": obs["desired_goal"] * 0.5},
            r"\['desired_goal'\] holds values that are not whole numbers")
    as_bool = {k: v.astype(bool) for k, v in obs.items()}  # castable: as good as the env's own int8
    assert np.array_equal(policy.predict(as_bool, deterministic=True)[0], policy.predict(obs, deterministic=True)[0])


def test_numbers_of_another_dtype_are_cast(policies):
    policy = policies["ppo-cartpole"]
    obs = batch_of(policy).astype(np.float64)
    expected, _ = policy.predict(obs, deterministic=True)
    assert np.array_equal(policy.predict(obs.astype(np.float32), deterministic=True)[0], expected)
    ints, _ = policy.predict(np.zeros((2, 4), dtype=np.int64), deterministic=True)
    assert ints.shape == (2,)
    goal = policies["her_sac-push"]
    sac_obs = {k: v.astype(np.float64) for k, v in batch_of(goal).items()}
    assert goal.predict(sac_obs, deterministic=True)[0].shape == (4, 2)


@pytest.mark.parametrize("value", ["yes", None, 1, np.array([True, False])])
def test_deterministic_must_be_a_bool(policies, value):
    policy = policies["ppo-cartpole"]
    refused(policy, batch_of(policy), r"deterministic=.* is not allowed: deterministic must be True or False",
            deterministic=value)


def test_protocol_still_takes_one_observation_or_a_batch(policies):
    policy = policies["her_sac-push"]
    obs = batch_of(policy, 3)
    marker = object()
    actions, state = policy.predict(obs, state=marker, episode_start=np.ones(3, bool), deterministic=np.bool_(True))
    assert state is marker and actions.shape == (3, 2)
    one, state = policy.predict({k: v[1] for k, v in obs.items()}, deterministic=True)
    assert state is None and one.shape == (2,) and np.allclose(one, actions[1])


# ---- load, evaluate, train ---------------------------------------------------------------------------------

@pytest.mark.parametrize("call, message", [
    (lambda run: her_rl.load(run, device=None), r"device=None is not allowed"),
    (lambda run: her_rl.load(run, device=["cpu"]), r"device=\['cpu'\] is not allowed"),
    (lambda run: her_rl.evaluate(her_rl.load(run), episodes=True), r"episodes=True is not allowed"),
    (lambda run: her_rl.evaluate(her_rl.load(run), episodes=2.0), r"episodes=2.0 is not allowed"),
    (lambda run: her_rl.evaluate(her_rl.load(run), episodes=2, seed=-1), r"seed=-1 is not allowed"),
    (lambda run: her_rl.evaluate(her_rl.load(run), episodes=2, seed="0"), r"seed='0' is not allowed"),
    (lambda run: her_rl.train(["n=4", 5], out_dir=run.parent / "new"), r"overrides\[1\] is 5 \(int\)"),
    (lambda run: her_rl.train(["n=4", None], out_dir=run.parent / "new"), r"overrides\[1\] is None"),
])
def test_bad_arguments_are_one_config_error(runs, call, message):
    run = runs["her_dqn-bitflip"]
    with pytest.raises(ConfigError, match=message) as caught:
        call(run)
    assert "\n" not in str(caught.value)
    assert not (run.parent / "new").exists()  # a refused train writes nothing


def test_numpy_integers_are_integers(policies):
    report = her_rl.evaluate(policies["her_dqn-bitflip"], episodes=np.int64(2), seed=np.int32(1))
    assert report["episodes"] == 2 and isinstance(report["episodes"], int)


# ---- checkpoints -------------------------------------------------------------------------------------------

def _nan_all(group):
    def tamper(agent):
        agent[group] = {k: torch.full_like(v, NAN) for k, v in agent[group].items()}
    return tamper


def _set(*keys, to):
    def tamper(agent):
        node = agent
        for key in keys[:-1]:
            node = node[key]
        node[keys[-1]] = to(node[keys[-1]])
    return tamper


def _poison(t):
    t = t.clone()
    t.view(-1)[0] = NAN
    return t


# name: (run, tamper of the agent entry, the message, whether her_rl.load reads the entry)
BAD = {
    "dqn_all_nan_weights": ("her_dqn-bitflip", _nan_all("q"), "'q/0.weight' holds NaN or inf", True),
    "ppo_inf_weight": ("ppo-cartpole", _set("policy", "net.0.weight", to=lambda t: t * INF),
                       "'policy/net.0.weight' holds NaN or inf", True),
    "sac_one_nan_weight": ("her_sac-push", _set("actor", "trunk.0.0.weight", to=_poison),
                           "'actor/trunk.0.0.weight' holds NaN or inf", True),
    "dqn_inf_input_statistics": ("her_dqn-bitflip", _set("inputs", "obs", "var", to=lambda t: t + INF),
                                 "'inputs/obs/var' holds NaN or inf", True),
    "sac_nan_optimiser_moment": ("her_sac-push", _set("critic_optimizer", "state", 0, "exp_avg_sq", to=_poison),
                                 "'critic_optimizer/state/0/exp_avg_sq' holds NaN or inf", True),
    "sac_nan_replay_memory": ("her_sac-push", _set("memory", "episodes", "data", "obs", to=_poison),
                              "'memory/episodes/data/obs' holds NaN or inf", False),  # acting needs no memory
    "dqn_wrong_shaped_weight": ("her_dqn-bitflip", _set("q", "0.weight", to=lambda t: t[:, :3].clone()),
                                "'q/0.weight' has shape (256, 3), but algo 'her_dqn' with this config has shape "
                                "(256, 8) there", True),
    "sac_wrong_shaped_temperature": ("her_sac-push", _set("log_alpha", to=lambda t: torch.zeros(3)),
                                     "'log_alpha' has shape (3,), but algo 'her_sac'", True),
    "dqn_wrong_shaped_input_statistics": ("her_dqn-bitflip", _set("inputs", "goal", "mean", to=lambda t: t[:2]),
                                          "'inputs/goal/mean' has shape (2,)", True),
    "dqn_wrong_shaped_optimiser_moment": ("her_dqn-bitflip",
                                          _set("optimizer", "state", 0, "exp_avg", to=lambda t: t[:5].clone()),
                                          "'optimizer/state/0/exp_avg' has shape (5, 8), but that parameter has "
                                          "shape (256, 8)", True),
}


def tampered(runs, tmp_path, kind):
    """A copy of the run folder whose checkpoint has the ``kind`` edit, and its checkpoint path."""
    run, tamper, _, _ = BAD[kind]
    out = tmp_path / "run"
    shutil.copytree(runs[run], out)
    saved = torch.load(out / "checkpoint.pt", weights_only=True)
    tamper(saved["agent"])
    torch.save(saved, out / "checkpoint.pt")
    return out


def snapshot(folder):
    """Every path under ``folder`` with its bytes and mtime: a refused run must change none of it."""
    return {str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns) if p.is_file() else None
            for p in sorted(folder.rglob("*"))}


@pytest.mark.parametrize("kind", list(BAD))
def test_bad_checkpoint_tensors_are_refused_by_load_and_resume(runs, tmp_path, kind):
    out = tampered(runs, tmp_path, kind)
    _, _, message, read_by_load = BAD[kind]
    expected = f"cannot load checkpoint {out / 'checkpoint.pt'}: its agent entry {message}"
    if read_by_load:
        with pytest.raises(CheckpointError) as caught:
            her_rl.load(out)
        assert str(caught.value).startswith(expected) and "\n" not in str(caught.value)
    else:
        her_rl.load(out)
    before = snapshot(out)
    with pytest.raises(CheckpointError) as caught:
        main(["resume=true", "progress=false", "budget.env_steps=600"], out_dir=out)
    assert str(caught.value).startswith(expected) and "\n" not in str(caught.value)
    assert snapshot(out) == before


@pytest.mark.parametrize("kind", ["dqn_all_nan_weights", "dqn_wrong_shaped_weight"])
def test_her_run_resume_refuses_a_bad_checkpoint_and_writes_nothing(runs, tmp_path, her_run, kind):
    out = tampered(runs, tmp_path, kind)
    before = snapshot(out)
    env = {**os.environ, "HYDRA_FULL_ERROR": "0", "OMP_NUM_THREADS": "1"}
    done = forked.run([her_run, "resume=true", f"hydra.run.dir={out}"], cwd=tmp_path, env=env, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and BAD[kind][2] in lines[0], done.stderr
    assert snapshot(out) == before
