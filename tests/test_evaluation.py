"""her_rl/run/evaluation.py: greedy evaluation of a given agent and the evaluation seeds."""

import numpy as np
import pytest

from her_rl.envs import make_vec
from her_rl.errors import EnvError
from her_rl.rl.success import SuccessRule
from her_rl.run.evaluation import eval_seed, evaluate, success_rule_of

N = 4
BITFLIP = {"name": "bitflip", "id": "her_rl/BitFlip-v0", "kwargs": {"n": N}}


class FlipDiffering:
    """Flips the first bit where the state differs from the goal: solves every episode in d steps (d: the bits
    that differ)."""

    def __init__(self):
        self.calls = []

    def act(self, obs, explore=True):
        self.calls.append(explore)
        differ = obs["achieved_goal"] != obs["desired_goal"]
        return np.argmax(differ, axis=1)


class FlipBitZero:
    """Always flips bit 0: succeeds exactly when the start differs from the goal in bit 0 alone."""

    def act(self, obs, explore=True):
        return np.zeros(len(obs["desired_goal"]), dtype=np.int64)


def starts(episodes, seed):
    """The start state and goal of each episode of an evaluation with ``seed`` (a fresh env, same seed)."""
    envs = make_vec(BITFLIP, episodes, seed=0)
    try:
        obs, _ = envs.reset(seed=seed)
        return obs["achieved_goal"].copy(), obs["desired_goal"].copy()
    finally:
        envs.close()


@pytest.fixture
def envs():
    made = make_vec(BITFLIP, 64, seed=0)
    yield made
    made.close()


# eval_seed ----------------------------------------------------------------------------------------------------------

def test_eval_seed_is_deterministic_and_a_valid_seed():
    assert eval_seed(0, 10) == eval_seed(0, 10) == eval_seed(0, 10, stream=7)
    for args in [(0, 0), (2**32 - 1, 2**31), (123, 10**9, 3)]:
        value = eval_seed(*args)
        assert isinstance(value, int) and 0 <= value < 2**32


def test_eval_seeds_differ_per_seed_point_and_stream():
    seeds = {(s, p, k): eval_seed(s, p, k) for s in range(4) for p in (0, 1, 2, 100, 2**31) for k in (0, 7, 8)}
    assert len(set(seeds.values())) == len(seeds)
    assert eval_seed(1, 2) != eval_seed(2, 1)  # not symmetric in seed and point


# evaluate -----------------------------------------------------------------------------------------------------------

def test_an_agent_that_flips_the_differing_bits_always_succeeds(envs):
    agent = FlipDiffering()
    seed = eval_seed(0, 1)
    result = evaluate(agent, envs, seed)
    start, goal = starts(64, seed)
    distance = (start != goal).sum(axis=1)  # bits to flip, >= 1 (a goal equal to the start is redrawn)
    assert result["success_rate"] == 1.0 and result["any_success_rate"] == 1.0
    assert result["terminated_rate"] == 1.0  # every episode ended at its goal, not by the time limit
    assert result["length"] == pytest.approx(distance.mean())
    assert result["return"] == pytest.approx(-(distance - 1).mean())  # -1 per step, 0 on the one reaching the goal
    assert set(agent.calls) == {False}  # greedy: explore=False every step
    assert len(agent.calls) == distance.max()


def test_an_agent_that_always_flips_bit_zero_succeeds_only_where_bit_zero_alone_differs(envs):
    seed = eval_seed(0, 2)
    result = evaluate(FlipBitZero(), envs, seed)
    start, goal = starts(64, seed)
    lucky = ((start != goal) == np.eye(1, N, 0, dtype=bool)).all(axis=1)
    rate = lucky.mean()
    assert 0.0 < rate < 0.5  # the seed gives some of both (1 in 15 on average)
    assert result["success_rate"] == pytest.approx(rate)
    assert result["any_success_rate"] == pytest.approx(rate)
    assert result["terminated_rate"] == pytest.approx(rate)
    assert result["length"] == pytest.approx(rate * 1 + (1 - rate) * N)  # the others run to the limit: n steps
    assert result["return"] == pytest.approx(-N * (1 - rate))


def test_evaluate_plays_one_episode_per_env_copy_and_is_repeatable(envs):
    small = make_vec(BITFLIP, 7, seed=0)
    try:
        result = evaluate(FlipBitZero(), small, 5)
        again = evaluate(FlipBitZero(), small, 5)
    finally:
        small.close()
    start, goal = starts(7, 5)
    lucky = ((start != goal) == np.eye(1, N, 0, dtype=bool)).all(axis=1)
    assert result == again
    assert result["success_rate"] * 7 == pytest.approx(lucky.sum())  # a rate over exactly 7 episodes
    assert set(result) == {"return", "length", "success_rate", "any_success_rate", "terminated_rate"}
    for key in ("success_rate", "any_success_rate", "terminated_rate"):
        assert 0.0 <= result[key] <= 1.0


def test_the_seed_picks_the_episodes(envs):
    rates = {evaluate(FlipBitZero(), envs, seed)["length"] for seed in range(6)}
    assert len(rates) > 1


def test_success_read_from_a_named_info_key(envs):
    result = evaluate(FlipDiffering(), envs, 3, success=SuccessRule(key="no_such_key"))
    assert "success_rate" not in result and "any_success_rate" not in result  # no step told success
    assert result["terminated_rate"] == 1.0


def test_success_rule_of_an_agent_without_a_spec():
    assert success_rule_of(FlipDiffering()) == SuccessRule()
    assert success_rule_of(FlipDiffering(), {"success_key": "reached"}) == SuccessRule("reached")


def test_episodes_running_past_max_steps_are_an_env_error(envs):
    with pytest.raises(EnvError) as info:
        evaluate(FlipBitZero(), envs, eval_seed(0, 2), max_steps=2)
    message = str(info.value)
    assert "\n" not in message and "evaluation episodes still running after 2 steps" in message
    assert "her_rl/BitFlip-v0" in message


def test_episodes_that_end_within_max_steps_are_fine(envs):
    assert evaluate(FlipBitZero(), envs, 1, max_steps=N)["length"] <= N
