"""The like-for-like benchmark's pieces: interval estimates, the protocol (fresh evaluation seeds,
last-step success, training clock, matched wall seconds), the tables, and SB3 twins whose
settings are read from our composed config so the two cannot drift apart."""

from __future__ import annotations

import math

import numpy as np
import pytest

from her_rl.algos.cycle import cycle_episodes

from bench import likeforlike as lfl
from bench import peers, zoo
from bench.stats import bootstrap_ci, interval, iqm
from her_rl.run.evaluation import eval_seed
from her_rl.folder.metrics import Point


def test_iqm_cuts_a_quarter_at_each_end():
    assert iqm([1, 2, 3, 4]) == 2.5
    assert iqm([5, 1, 1, 1, 1, 1, 100, -100]) == 1.0  # the outliers fall in the cut quarters
    assert iqm([0.2, 0.9, 0.4]) == pytest.approx(0.5)  # three runs: nothing cut, the mean
    with pytest.raises(ValueError):
        iqm([])


def test_iqm_matches_rliable():
    metrics = pytest.importorskip("rliable.metrics")
    for n in (3, 4, 13):
        values = np.random.default_rng(n).normal(size=n)
        assert iqm(values) == pytest.approx(metrics.aggregate_iqm(values[:, None]))


def test_bootstrap_interval_brackets_the_statistic_and_widens_with_the_level():
    values = [0.1, 0.3, 0.35, 0.6, 0.9, 0.95]
    lo, hi = bootstrap_ci(values, iqm)
    assert lo <= iqm(values) <= hi and lo >= min(values) and hi <= max(values)
    narrow = bootstrap_ci(values, iqm, level=0.5)
    assert lo <= narrow[0] <= narrow[1] <= hi and (narrow[1] - narrow[0]) < (hi - lo)
    assert bootstrap_ci([0.7, 0.7, 0.7], iqm) == (pytest.approx(0.7), pytest.approx(0.7))
    assert bootstrap_ci(values, iqm, seed=5) == bootstrap_ci(values, iqm, seed=5)  # reproducible tables


def test_interval_reports_median_and_iqm():
    iv = interval([0.0, 0.5, 1.0, 1.0])
    assert (iv.n, iv.median, iv.iqm) == (4, 0.75, 0.75)
    assert iv.fmt("median").startswith("0.75 [") and iv.median_ci[0] <= 0.75 <= iv.median_ci[1]


class FakeVecEnv:
    """Two lock-step episodes of 3 steps: success only at step 2 for copy 0, at the last step for copy 1."""

    def __init__(self):
        self.t, self.seeds = 0, []

    def reset(self, seed=None):
        self.t = 0
        self.seeds.append(seed)
        return {"observation": np.full((2, 1), 10.0)}, {}

    def step(self, action):
        self.t += 1
        done = np.full(2, self.t == 3)
        success = np.array([self.t == 2, self.t == 3])
        return {"observation": np.full((2, 1), 10.0)}, np.zeros(2), np.zeros(2, bool), done, {"is_success": success}


class FakeModel:
    def __init__(self, norm=None):
        self.norm, self.seen = norm, []

    def get_vec_normalize_env(self):
        return self.norm

    def predict(self, obs, deterministic=False):
        assert deterministic
        self.seen.append(obs["observation"][0, 0])
        return np.zeros((2, 1)), None


class Halve:
    def normalize_obs(self, obs):
        return {k: v / 2 for k, v in obs.items()}


def test_success_counts_the_last_step_and_sees_normalised_observations():
    envs, model = FakeVecEnv(), FakeModel(Halve())
    assert peers.success_last_step(model, envs, seed=7, horizon=50) == 0.5  # copy 0 left the goal again
    assert envs.seeds == [7] and envs.t == 3 and model.seen == [5.0, 5.0, 5.0]
    raw = FakeModel()
    peers.success_last_step(raw, FakeVecEnv(), seed=7, horizon=50)
    assert raw.seen == [10.0] * 3


def test_every_evaluation_gets_fresh_seeds():
    seeds = {eval_seed(0, step, zoo.EVAL_STREAM) for step in range(1000, 11000, 1000)}
    seeds |= {eval_seed(1, 1000, zoo.EVAL_STREAM)}
    assert len(seeds) == 11
    assert eval_seed(2, 3000, zoo.EVAL_STREAM) == eval_seed(2, 3000, zoo.EVAL_STREAM)


def test_training_clock_starts_from_the_first_iteration_without_an_evaluation():
    metrics = {"charts/SPS": [Point(100, 1010.0, 50.0), Point(200, 1030.0, 40.0)]}
    assert lfl.training_start(metrics, evals=set()) == 1008.0  # 100 steps at 50/s: 2 s in
    assert lfl.training_start(metrics, evals={100}) == 1025.0
    with pytest.raises(ValueError):
        lfl.training_start(metrics, evals={100, 200})


def rows():
    def row(side, seed, curve):
        settings = {"algo": "sac"} if side == "sb3" else {}
        return {"env": "fetch_reach", "pair": "zoo", "side": side, "algo": "her_ddpg", "seed": seed, "curve": curve,
                "settings": settings, "env_steps": curve[-1][0], "wall_s": curve[-1][1], "build_s": 1.0,
                "learner": "x"}
    return [row("ours", 0, [(1000, 10.0, 0.5), (2000, 20.0, 1.0)]), row("sb3", 0, [(1000, 30.0, 0.0), (2000, 60.0, 0.4)]),
            row("ours", 1, [(1000, 12.0, 0.7), (2000, 22.0, 0.9)]), row("sb3", 1, [(1000, 28.0, 0.2), (2000, 58.0, 0.6)])]


def test_tables_per_point_and_at_matched_wall_seconds():
    step = lfl.step_table(rows())
    assert "| 2,000 | 0.95 (n=2) |" in step and "0.50 (n=2)" in step and "SB3 SAC + HER (RL-Zoo)" in step
    wall = lfl.wall_table(rows())
    # ours' median run is 21 s: then seed 0 has its last evaluation (1.0), seed 1 its first (0.7), SB3 none
    assert "| fetch_reach | zoo | 21 | her_ddpg | 0.85 | 0.85 [0.70, 1.00] | 1,500 | 2/2 |" in wall
    assert "| fetch_reach | zoo | 21 | SB3 SAC + HER (RL-Zoo) | - | - | - | 0/2 |" in wall
    assert "| fetch_reach | zoo | 10 | her_ddpg | 0.50 | 0.50 [0.50, 0.50] | 1,000 | 1/2 |" in wall
    assert lfl.success_by(rows()[1], 45.0) == (0.0, 1000) and lfl.success_by(rows()[1], 29.0) is None


def test_curves_png(tmp_path):
    lfl.plot(rows(), str(tmp_path / "c.png"))
    assert (tmp_path / "c.png").read_bytes()[:4] == b"\x89PNG"


def test_jobs_alternate_sides_seed_by_seed_and_bad_protocols_are_refused():
    planned = lfl.jobs("twins", ["fetch_reach"], [0, 1], 10_000, 1_000, 50)
    assert [(j["pair"], j["side"], j["seed"]) for j in planned[:4]] == [
        ("her_sac", "ours", 0), ("her_sac", "sb3", 0), ("her_sac", "ours", 1), ("her_sac", "sb3", 1)]
    assert {j["pair"] for j in planned} == set(lfl.TWIN_ALGOS)
    assert "at least 50" in lfl.refusal(lfl.jobs("zoo", ["fetch_reach"], [0], 10_000, 1_000, 20))
    assert "multiple" in lfl.refusal(lfl.jobs("zoo", ["fetch_reach"], [0], 10_500, 1_000, 50))
    assert "whole number" in lfl.refusal([j for j in lfl.jobs("zoo", ["fetch_reach"], [0], 1_050, 1_050, 50)
                                          if j["side"] == "ours"])


def test_zoo_settings_are_rl_zoos():
    reach, push = zoo.zoo_settings("FetchReach-v4"), zoo.zoo_settings("FetchPush-v4")
    assert (reach["algo"], reach["net_arch"], reach["gamma"], reach["normalize"]) == ("sac", [64, 64], 0.95, True)
    assert (push["algo"], push["net_arch"], push["batch_size"], push["tau"]) == ("tqc", [512] * 3, 2048, 0.05)
    assert zoo.zoo_settings("FetchSlide-v4") == push
    with pytest.raises(ValueError):
        zoo.zoo_settings("Pendulum-v1")


@pytest.mark.parametrize("algo", sorted(zoo.TWINS))
def test_twin_settings_follow_our_composed_config(algo):
    job = {"pair": algo, "algo": algo, "env": "fetch_reach", "seed": 0}
    ours = lfl.ours_algo(job)
    s = zoo.twin_settings(ours, lfl.HORIZON)
    cycle = ours["episodes_per_cycle"] * lfl.HORIZON
    assert ours["episodes_per_cycle"] == 2  # the Fetch cycle, her_td3 included
    assert (s["net_arch"], s["batch_size"], s["gamma"], s["learning_rate"], s["buffer_size"]) == (
        ours["hidden"], ours["batch_size"], ours["gamma"], ours["actor_lr"], ours["buffer_size"])
    assert (s["n_sampled_goal"], s["strategy"]) == (ours["k"], ours["strategy"])
    assert s["gradient_steps"] / (s["train_freq_episodes"] * lfl.HORIZON) == ours["updates_per_cycle"] / cycle
    targets_per_cycle = 1 if s["algo"] == "sac" else s["gradient_steps"] / s.get("policy_delay", 1)
    assert (1 - s["tau"]) ** targets_per_cycle == pytest.approx(ours["polyak"])
    with pytest.raises(ValueError, match="one learning rate"):
        zoo.twin_settings({**ours, "critic_lr": 3e-4}, lfl.HORIZON)
    with pytest.raises(ValueError, match="strategies"):
        zoo.twin_settings({**ours, "strategy": "next"}, lfl.HORIZON)


@pytest.mark.parametrize("algo", sorted(zoo.TWINS))
def test_built_twin_carries_our_values(algo):
    """The SB3 model itself, built on continuous push, holds our composed config's numbers."""
    pytest.importorskip("stable_baselines3")
    ours = lfl.ours_algo({"pair": algo, "algo": algo, "env": "push", "seed": 0})
    env_id, kwargs, _ = lfl.ENVS["push"]
    model = zoo.build(zoo.twin_settings(ours, lfl.HORIZON), env_id, kwargs, seed=0)
    episodes = cycle_episodes(ours["episodes_per_cycle"], lfl.HORIZON)  # null: 16 for 50-step episodes
    cycle = episodes * lfl.HORIZON
    assert (model.batch_size, model.gamma, model.learning_rate, model.buffer_size) == (
        ours["batch_size"], ours["gamma"], ours["actor_lr"], ours["buffer_size"])
    assert (model.train_freq.frequency, model.train_freq.unit.value) == (episodes, "episode")
    assert model.gradient_steps == round(ours["updates_per_cycle"] * cycle / cycle)
    assert model.replay_buffer.n_sampled_goal == ours["k"]
    linear = [m.out_features for m in model.actor.modules() if m.__class__.__name__ == "Linear"]
    assert linear[:len(ours["hidden"])] == ours["hidden"]
    assert model.get_vec_normalize_env() is not None and model.get_vec_normalize_env().clip_obs == ours["norm_clip"]
    if algo in ("her_sac", "her_crossq"):  # her_crossq's twin is SB3's SAC
        assert model.target_update_interval == ours["updates_per_cycle"]
        assert model.tau == pytest.approx(1 - ours["polyak"])
    else:
        steps = ours["updates_per_cycle"] / (ours["policy_delay"] if algo == "her_td3" else 1)
        assert math.isclose((1 - model.tau) ** steps, ours["polyak"])
        assert model.action_noise._sigma[0] == ours["noise_eps"]
