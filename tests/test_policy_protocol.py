"""``Policy.predict`` speaks Stable-Baselines3's ``predict`` protocol: SB3's own ``evaluate_policy`` over
its ``DummyVecEnv`` takes a loaded her-rl policy as it is, and bad input is one clear ``ValueError``
(her-rl's ``ConfigError``)."""

import numpy as np
import pytest

import her_rl

pytest.importorskip("stable_baselines3", reason="stable-baselines3 (the bench extra) is not installed")
from stable_baselines3.common.evaluation import evaluate_policy  # noqa: E402
from stable_baselines3.common.vec_env import DummyVecEnv  # noqa: E402

# Tiny runs: the protocol is under test, not what was learned.
RUNS = {
    "her_dqn-bitflip": ["algo=her_dqn", "env=bitflip", "n=4", "budget.env_steps=200"],
    "ppo-cartpole": ["algo=ppo", "env=cartpole", "budget.env_steps=300"],
    "her_sac-push": ["algo=her_sac", "env=push", "env.kwargs.actions=continuous", "budget.env_steps=200"],
}


@pytest.fixture(scope="module")
def policies(tmp_path_factory):
    root = tmp_path_factory.mktemp("protocol")
    for name, overrides in RUNS.items():
        her_rl.train([*overrides, "progress=false"], out_dir=root / name)
    return {name: her_rl.load(root / name) for name in RUNS}


def vec_env(policy, n=4):
    return DummyVecEnv([lambda: policy.make_env()] * n)


def one_of(batch, i):
    return {k: v[i] for k, v in batch.items()} if isinstance(batch, dict) else batch[i]


@pytest.mark.filterwarnings("ignore:Evaluation environment is not wrapped")
@pytest.mark.parametrize("name", list(RUNS))
def test_sb3_evaluate_policy_takes_a_her_rl_policy(policies, name):
    policy = policies[name]
    rewards, lengths = evaluate_policy(policy, vec_env(policy), n_eval_episodes=8, return_episode_rewards=True)
    assert len(rewards) == 8 and all(n >= 1 for n in lengths)
    mean, std = evaluate_policy(policy, vec_env(policy), n_eval_episodes=8)
    assert np.isfinite(mean) and np.isfinite(std)


@pytest.mark.parametrize("name", list(RUNS))
def test_one_observation_gives_one_action_and_a_batch_a_batch(policies, name):
    policy = policies[name]
    space = policy.action_space
    batch = vec_env(policy, 3).reset()  # SB3's VecEnv: an OrderedDict of (3, ...) arrays or a (3, ...) array
    marker = object()
    actions, state = policy.predict(batch, state=marker, episode_start=np.ones(3, bool), deterministic=True)
    assert state is marker  # memoryless: the state comes back as passed
    assert np.shape(actions) == (3, *space.shape)
    if space.shape == ():  # Discrete: an int array SB3's VecEnv steps with
        assert np.asarray(actions).dtype.kind in "iu"
    action, state = policy.predict(one_of(batch, 1), deterministic=True)
    assert state is None and isinstance(action, np.ndarray) and action.shape == space.shape
    assert np.allclose(action, actions[1])
    assert space.contains(np.asarray(action, dtype=space.dtype))
    single, _ = policy.predict(batch)  # SB3's default: deterministic=False explores, same shapes
    assert np.shape(single) == np.shape(actions)


def _goal_bad_inputs(obs):
    """(bad observation, what the message must say) for a goal env's batch ``obs``."""
    floats = {k: v.astype(np.float32) for k, v in obs.items()}
    return [
        ({k: v for k, v in obs.items() if k != "desired_goal"}, r"has no key 'desired_goal'"),
        ({**obs, "observation": obs["observation"][:, :2]}, r"\[.observation.\] of shape \(4, 2\) fits neither"),
        ({k: v[:0] for k, v in obs.items()}, r"empty batch"),
        ({**floats, "desired_goal": np.where(np.eye(4, obs["desired_goal"].shape[1]), np.nan, 0.0)}, r"NaN or inf"),
        ({**floats, "observation": np.full_like(floats["observation"], np.inf)}, r"NaN or inf"),
        ({**obs, "desired_goal": obs["desired_goal"][:3]}, r"mixes batch sizes across keys"),
        ({**obs, "desired_goal": obs["desired_goal"][0]}, r"mixes batch sizes across keys"),
        ({**obs, "observation": obs["observation"].astype(str)}, r"has dtype <U\d+, not numbers"),
        ({**obs, "observation": [[0, 1], [1]]}, r"not an array of numbers"),
        (obs["observation"], r"must be a dict with keys"),
        (None, r"must be a dict with keys"),
    ]


def _box_bad_inputs(obs):
    return [
        (obs[:, :3], r"of shape \(4, 3\) fits neither one observation \(4,\)"),
        (obs[:0], r"empty batch"),
        (np.where(np.eye(4, dtype=bool), np.nan, obs), r"NaN or inf \(first at index \(0, 0\)\)"),
        (np.array(["a", "b", "c", "d"]), r"has dtype <U1, not numbers"),
        ({"observation": obs}, r"is a dict with keys \['observation'\]"),
        (None, r"has dtype object, not numbers"),
    ]


@pytest.mark.parametrize("name", ["her_dqn-bitflip", "her_sac-push", "ppo-cartpole"])
def test_bad_input_is_one_clear_value_error(policies, name):
    policy = policies[name]
    obs = vec_env(policy).reset()
    cases = _goal_bad_inputs(obs) if isinstance(obs, dict) else _box_bad_inputs(obs)
    for bad, message in cases:
        with pytest.raises(ValueError, match=message) as caught:
            policy.predict(bad)
        assert "\n" not in str(caught.value)
        assert type(caught.value) is her_rl.ConfigError  # a ValueError, not a numpy or torch one that subclasses it


def test_extra_keys_are_ignored(policies):
    """A wrapper's extra key is not the networks' business."""
    policy = policies["her_dqn-bitflip"]
    obs = vec_env(policy, 2).reset()
    plain, _ = policy.predict(obs, deterministic=True)
    extra, _ = policy.predict({**obs, "time": np.zeros(2)}, deterministic=True)
    assert np.array_equal(plain, extra)


@pytest.mark.parametrize("name", list(RUNS))
def test_a_loaded_policy_pickles_and_acts_the_same_after(policies, name):
    """As SB3's models do, for a pool of workers: the copy acts as the original."""
    import pickle

    policy = policies[name]
    copy = pickle.loads(pickle.dumps(policy))
    batch = vec_env(policy, 5).reset()
    np.testing.assert_array_equal(copy.predict(batch, deterministic=True)[0], policy.predict(batch, deterministic=True)[0])
    assert (copy.algo, copy.env_id, copy.path) == (policy.algo, policy.env_id, policy.path)
