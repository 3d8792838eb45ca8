"""HER-DDPG and HER-SAC: update maths against hand-computed values, refusals, state, and learning."""

import copy
import io
import json
import os

import numpy as np
import forked
import pytest
import torch
import torch.nn as nn
from gymnasium import spaces

from her_rl.algos.her_ddpg import HerDDPG
from her_rl.rl.her import from_env_actions, to_env_actions
from her_rl.errors import ConfigError
from her_rl.config.compose import compose
from her_rl.run.runner import run

SMALL_PUSH = ["env=push", "env.kwargs.actions=continuous", "env.kwargs.block_size=0.2", "env.kwargs.step_size=0.1",
              "env.kwargs.success_distance=0.1", "env.kwargs.gripper_range=0.15", "env.kwargs.goal_range=0.15", "env.kwargs.max_episode_steps=15"]
GAMMA = 0.98


def _push(**kwargs):
    return {"name": "push", "id": "her_rl/Push-v0", "kwargs": {"actions": "continuous", "max_episode_steps": 10, **kwargs}}


def _ddpg(**kwargs):
    torch.manual_seed(0)  # network initialisation uses torch's global generator (the runner seeds it)
    return HerDDPG(env=_push(), seed=0, hidden=(16, 16), episodes_per_cycle=4, updates_per_cycle=3, batch_size=8,
                   **kwargs)


class FixedQ(nn.Module):
    """A stand-in target critic whose values are given: Q'(s', a') = values, whatever the inputs."""

    def __init__(self, values):
        super().__init__()
        self.values = torch.tensor(values, dtype=torch.float32)

    def forward(self, x, a):
        return self.values


def _batch(agent, reward, terminated):
    """A tiny fixed batch of tensors as ``tensors()`` returns them (inputs random but fixed)."""
    g = torch.Generator().manual_seed(0)
    n = len(reward)
    return {"x": torch.randn(n, agent.inputs.dim, generator=g), "x_next": torch.randn(n, agent.inputs.dim, generator=g),
            "action": torch.rand(n, agent.act_dim, generator=g) * 2 - 1,
            "reward": torch.tensor(reward, dtype=torch.float32),
            "not_done": 1.0 - torch.tensor(terminated, dtype=torch.float32),
            "discount": torch.full((n,), GAMMA)}  # gamma ** steps: one-step returns


# Q'(s', a'), reward, terminated and the target r + 0.98 (1 - d) Q' worked out by hand, clipped to [-50, 0]
Q_NEXT = [-10.0, -60.0, 5.0, -3.0, -30.0]
REWARD = [-1.0, -1.0, 0.0, 0.0, -1.0]
TERMINATED = [False, False, False, True, True]
TARGET_CLIPPED = [-10.8, -50.0, 0.0, 0.0, -1.0]  # -1-9.8; -1-58.8 -> -50; 4.9 -> 0; no bootstrap; no bootstrap
TARGET_UNCLIPPED = [-10.8, -59.8, 4.9, 0.0, -1.0]


# ---- DDPG ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("clip, expected", [(True, TARGET_CLIPPED), (False, TARGET_UNCLIPPED)])
def test_ddpg_critic_target_bootstraps_unless_terminated_and_is_clipped_to_the_return_range(clip, expected):
    agent = _ddpg(clip_target=clip)
    agent.critic_target = FixedQ(Q_NEXT)
    t = _batch(agent, REWARD, TERMINATED)
    q = agent.critic(t["x"], t["action"]).detach()
    metrics = agent.update(t)
    hand = float(np.mean((q.numpy() - np.array(expected)) ** 2))
    assert metrics["losses/qf_loss"] == pytest.approx(hand, rel=1e-5)


def test_ddpg_actor_loss_is_minus_q_plus_the_l2_penalty_on_unscaled_actions():
    losses = {}
    for l2 in (0.0, 1.0, 2.5):
        agent = _ddpg(action_l2=l2)
        t = _batch(agent, REWARD, TERMINATED)
        actor_before = copy.deepcopy(agent.actor)
        losses[l2] = agent.update(t)["losses/actor_loss"]
        pi = actor_before(t["x"]).detach()  # the actor step follows the critic step: Q is the updated critic
        hand = -agent.critic(t["x"], pi).mean().item() + l2 * float((pi ** 2).mean())
        assert losses[l2] == pytest.approx(hand, rel=1e-5, abs=1e-6)
    # same seed, same batch: the losses differ by exactly the penalty's weight times mean(pi^2)
    assert (losses[2.5] - losses[0.0]) == pytest.approx(2.5 * (losses[1.0] - losses[0.0]), rel=1e-4)


def test_targets_move_by_polyak_averaging_after_each_cycle():
    agent = _ddpg(polyak=0.95)
    before = [p.clone() for p in [*agent.actor_target.parameters(), *agent.critic_target.parameters()]]
    agent.train_iteration()
    online = [*agent.actor.parameters(), *agent.critic.parameters()]
    after = [*agent.actor_target.parameters(), *agent.critic_target.parameters()]
    for old, new, net in zip(before, after, online):
        torch.testing.assert_close(new, 0.95 * old + 0.05 * net.detach())
    assert any(not torch.equal(old, new) for old, new in zip(before, after))


def test_actions_are_rescaled_to_the_box_and_back():
    box = spaces.Box(low=np.array([0.0, -2.0], dtype=np.float32), high=np.array([1.0, 2.0], dtype=np.float32))
    a = np.array([[-1.0, -1.0], [1.0, 1.0], [0.0, 0.5]], dtype=np.float32)
    np.testing.assert_allclose(to_env_actions(a, box), [[0.0, -2.0], [1.0, 2.0], [0.5, 1.0]])
    np.testing.assert_allclose(from_env_actions(to_env_actions(a, box), box), a, atol=1e-6)


def test_inputs_are_normalised_before_the_networks_see_them():
    agent = _ddpg()
    episodes = agent.collect()
    agent.remember(episodes)
    agent.inputs.update(episodes)
    b = agent.memory.sample(8)
    raw = np.concatenate([b["obs"], b["goal"]], axis=1)
    mean = np.concatenate([agent.inputs.obs_rms.mean, agent.inputs.goal_rms.mean])
    std = np.maximum(np.sqrt(np.concatenate([agent.inputs.obs_rms.var, agent.inputs.goal_rms.var])), 0.01)
    hand = np.clip((raw - mean) / std, -5, 5)
    t = agent.tensors(b)
    np.testing.assert_allclose(t["x"].numpy(), hand, rtol=1e-4, atol=1e-4)
    assert not np.allclose(hand, raw)
    obs = {"observation": b["obs"], "desired_goal": b["goal"]}
    greedy = agent.actor(torch.as_tensor(hand, dtype=torch.float32)).detach().numpy()
    np.testing.assert_allclose(agent.act(obs), greedy, atol=1e-5)  # push's Box is [-1, 1]


def test_exploration_mixes_noise_and_uniform_random_actions_within_bounds():
    agent = _ddpg(random_eps=0.0, noise_eps=0.0)
    obs, _ = agent.envs.reset(seed=0)
    np.testing.assert_array_equal(agent.act(obs, explore=True), agent.act(obs))  # no noise, no random: greedy
    agent = _ddpg(random_eps=1.0)
    acts = np.concatenate([agent.act(obs, explore=True) for _ in range(200)])
    assert acts.min() >= -1 and acts.max() <= 1 and acts.std() > 0.5  # uniform on [-1, 1]: std 0.58
    for noise in ("gaussian", "ou"):
        agent = _ddpg(random_eps=0.0, noise=noise, noise_eps=0.2)
        diff = agent.act(obs, explore=True) - agent.act(obs)
        assert np.abs(diff).max() > 0 and np.abs(diff).max() <= 2


@pytest.mark.parametrize("bad, message", [
    ({"noise": "pink"}, "algo.noise"), ({"random_eps": 1.5}, "random_eps"), ({"actor_lr": 0.0}, "actor_lr"),
    ({"strategy": "later"}, "algo.strategy must be one of future, final, episode, random, next, next_future, none"),
    ({"updates_per_step": 0.0}, "updates_per_step"), ({"n_step": 0}, "algo.n_step must be an integer in"),
    ({"precision": "float16"}, "algo.precision must be one of"), ({"grad_clip": -1.0}, "algo.grad_clip"),
])
def test_ddpg_bad_hyperparameters_raise_config_errors(bad, message):
    with pytest.raises(ConfigError, match=message):
        _ddpg(**bad)


@pytest.mark.parametrize("make", ["ddpg", "sac"])
def test_updates_per_step_replaces_the_fixed_updates_per_cycle(make):
    fixed = (_ddpg if make == "ddpg" else _sac)()
    fixed.train_iteration()
    assert fixed.updates == 3  # updates_per_cycle
    ratio = (_ddpg if make == "ddpg" else _sac)(updates_per_step=0.5)
    result = ratio.train_iteration()
    assert result.env_steps > 6  # 4 episodes of up to 10 steps
    assert ratio.updates == round(0.5 * result.env_steps)


def test_discrete_envs_are_refused_with_one_line():
    with pytest.raises(ConfigError, match="Box \\(continuous\\) action spaces only") as err:
        HerDDPG(env=_push(actions="discrete"), seed=0, episodes_per_cycle=2)
    assert "\n" not in str(err.value)


def _round_trip(make):
    """Train, save with weights_only loading, restore into a fresh agent: both continue identically."""
    a = make()
    a.train_iteration()
    buf = io.BytesIO()
    torch.save(a.state_dict(), buf)
    buf.seek(0)
    b = make()
    b.load_state_dict(torch.load(buf, weights_only=True))
    ra, rb = a.train_iteration(), b.train_iteration()
    assert ra.metrics == rb.metrics and ra.episode_returns == rb.episode_returns
    for pa, pb in zip(a.state_dict()["actor"].values(), b.state_dict()["actor"].values()):
        assert torch.equal(pa, pb)


@pytest.mark.parametrize("noise", ["gaussian", "ou"])
def test_ddpg_state_round_trip_continues_identically(noise):
    _round_trip(lambda: _ddpg(noise=noise))


def test_her_ddpg_solves_a_small_continuous_push(tmp_path):
    # measured: solved (>= 0.9) after 12,600 env steps, ~16 s on a loaded 2-core machine
    cfg = compose(["algo=her_ddpg", *SMALL_PUSH, "algo.hidden=[64,64]", "algo.batch_size=128",
                   "algo.episodes_per_cycle=4", "algo.updates_per_cycle=20", "eval.every_iterations=5",
                   "eval.success_threshold=0.9", "budget.env_steps=30000", "progress=false", "seed=0"])
    results = run(cfg, out_dir=tmp_path)
    assert results["solved"] and results["eval_success_rate"] >= 0.9, results


def test_discrete_push_is_refused_from_the_command_line(her_run, tmp_path):
    p = forked.run([her_run, "algo=her_ddpg", "env=push", "progress=false", f"hydra.run.dir={tmp_path / 'r'}"],
                   cwd=tmp_path, env={**os.environ, "HYDRA_FULL_ERROR": "0"}, text=True,
                   timeout=120)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert "algo 'her_ddpg' acts in continuous action spaces" in p.stderr and "Traceback" not in p.stderr
    assert p.stderr.strip().count("\n") == 0  # one line
    assert not (tmp_path / "r").exists()


# ---- SAC ----------------------------------------------------------------------------------------

def _sac(**kwargs):
    from her_rl.algos.her_sac import HerSAC

    torch.manual_seed(0)
    return HerSAC(env=_push(), seed=0, hidden=(16, 16), episodes_per_cycle=4, updates_per_cycle=3, batch_size=8,
                  **kwargs)



def test_sac_random_eps_replaces_that_share_of_its_samples_with_uniform_actions_and_draws_nothing_at_0():
    from her_rl.algos.her_crossq import HerCrossQ

    agent, mixed = _sac(random_eps=0.0), _sac(random_eps=0.5)  # the same weights and generators
    obs, _ = agent.envs.reset(seed=0)
    before = copy.deepcopy(agent.np_generator.bit_generator.state)
    sampled = agent.act(obs, explore=True)
    assert agent.np_generator.bit_generator.state == before  # at 0 nothing is drawn: runs keep their numbers
    kept = np.all(mixed.act(obs, explore=True) == sampled, axis=1)
    assert 0 < kept.sum() < len(kept)  # some rows the policy's sample, the others replaced
    always = _sac(random_eps=1.0)
    acts = np.concatenate([always.act(obs, explore=True) for _ in range(200)])
    assert acts.min() >= -1 and acts.max() <= 1 and abs(acts.std() - 0.577) < 0.03  # uniform on [-1, 1]
    np.testing.assert_array_equal(always.act(obs), agent.act(obs))  # greedy actions stay the policy's mean
    assert "random_eps" in HerCrossQ.__dataclass_fields__  # HER-REDQ and HER-CrossQ take it too

class FixedPolicy(nn.Module):
    """A stand-in policy whose next actions and log-probabilities are given."""

    def __init__(self, actions, logp):
        super().__init__()
        self.actions, self.logp = torch.tensor(actions), torch.tensor(logp)

    def forward(self, x):
        policy = self

        class Dist:
            def sample_with_log_prob(self, generator=None, noise=None):
                return policy.actions, policy.logp
        return Dist()


def test_sac_target_takes_the_twin_minimum_and_the_entropy_bonus_unless_terminated():
    agent = _sac(alpha_init=0.5)
    agent.actor = FixedPolicy([[0.0, 0.0]] * 3, [1.0, -2.0, 0.5])
    agent.q1_target, agent.q2_target = FixedQ([-10.0, -4.0, -2.0]), FixedQ([-8.0, -6.0, -2.0])
    t = _batch(agent, [-1.0, -1.0, 0.0], [False, False, True])
    # row 0: min -10, minus 0.5 * 1 -> -10.5; -1 + 0.98 * -10.5 = -11.29
    # row 1: min -6, minus 0.5 * -2 -> -5;     -1 + 0.98 * -5    = -5.9
    # row 2: terminated: the reward alone
    torch.testing.assert_close(agent.soft_target(t), torch.tensor([-11.29, -5.9, 0.0]))
    agent.clip_target = True  # a positive soft target would be clipped to 0
    agent.actor = FixedPolicy([[0.0, 0.0]] * 3, [-40.0, -2.0, 0.5])  # row 0: -1 + 0.98 * (-10 + 20) = 8.8 -> 0
    torch.testing.assert_close(agent.soft_target(t), torch.tensor([0.0, -5.9, 0.0]))


def test_sac_critic_loss_is_the_mean_of_both_critics_errors_against_one_target():
    agent = _sac()
    t = _batch(agent, [-1.0, -1.0, 0.0], [False, False, True])
    y = np.array([-11.29, -5.9, 0.0])
    agent.soft_target = lambda batch: torch.tensor(y, dtype=torch.float32)  # checked above
    q1, q2 = agent.q1(t["x"], t["action"]).detach().numpy(), agent.q2(t["x"], t["action"]).detach().numpy()
    metrics = agent.update(t)
    hand = (np.mean((q1 - y) ** 2) + np.mean((q2 - y) ** 2)) / 2  # logged per critic, as CleanRL's qf_loss / 2
    assert metrics["losses/qf_loss"] == pytest.approx(float(hand), rel=1e-5)
    assert {"losses/actor_loss", "losses/alpha", "losses/alpha_loss", "losses/q_values"} <= set(metrics)


def test_temperature_loss_raises_alpha_when_entropy_is_below_target_and_lowers_it_above():
    agent = _sac(alpha_init=1.0)  # log_alpha = 0, target entropy -2 (two action dims)
    assert agent.target_entropy == -2.0
    logp = torch.tensor([-1.0, 3.0])  # entropy estimate -mean(logp) = -1 > -2: too random
    loss = agent.temperature_loss(logp)
    loss.backward()
    # d/dlog_alpha of -mean(log_alpha (logp - 2)) = -mean([-3, 1]) = 1 > 0: descent lowers alpha
    assert loss.item() == 0.0 and float(agent.log_alpha.grad) == pytest.approx(1.0)
    # whole updates: a near-deterministic policy (log std -10) raises alpha, the initial broad one lowers it
    t = _batch(agent, REWARD, TERMINATED)
    broad = _sac()
    broad.update(t)
    assert broad.alpha < 1.0
    narrow = _sac()
    with torch.no_grad():
        narrow.actor.head.log_std.bias.fill_(-10.0)
    narrow.update(t)
    assert narrow.alpha > 1.0
    fixed = _sac(autotune=False, alpha_init=0.2)
    fixed.update(t)
    assert fixed.alpha == pytest.approx(0.2)


def test_sac_acts_greedily_with_the_squashed_mean_and_explores_by_sampling():
    agent = _sac()
    obs, _ = agent.envs.reset(seed=0)
    x = agent.inputs(obs["observation"], obs["desired_goal"])
    np.testing.assert_allclose(agent.act(obs), torch.tanh(agent.actor(x).mean).detach().numpy(), atol=1e-6)
    explored = agent.act(obs, explore=True)
    assert explored.shape == (4, 2) and np.abs(explored).max() <= 1 and not np.allclose(explored, agent.act(obs))


def test_sac_refuses_discrete_envs_and_round_trips_its_state():
    from her_rl.algos.her_sac import HerSAC

    with pytest.raises(ConfigError, match="her_sac acts in Box \\(continuous\\) action spaces only"):
        HerSAC(env=_push(actions="discrete"), seed=0, episodes_per_cycle=2)
    _round_trip(_sac)


# The simultaneous update with its actor's half forked gives the numbers of the threaded one, which gives
# those of one thread (tests/test_her_sac_simultaneous.py), so one learning run covers all three places.
@pytest.mark.parametrize("update", [[], ["algo.simultaneous=true", "algo.critic_threads=2"]], ids=["plain", "simultaneous"])
def test_her_sac_solves_a_small_continuous_push(tmp_path, update):
    # measured: solved (>= 0.9) after 25,200 env steps, ~30 s on a 2-core machine at load 10
    cfg = compose(["algo=her_sac", *SMALL_PUSH, "algo.hidden=[64,64]", "algo.batch_size=128",
                   "algo.episodes_per_cycle=4", "algo.updates_per_cycle=10", "eval.every_iterations=5",
                   "eval.success_threshold=0.9", "budget.env_steps=40000", "progress=false", "seed=0", *update])
    results = run(cfg, out_dir=tmp_path)
    assert results["solved"] and results["eval_success_rate"] >= 0.9, results


@pytest.mark.parametrize("algo", ["her_ddpg", "her_sac"])
def test_both_run_from_the_command_line_on_continuous_push(her_run, tmp_path, algo):
    out = tmp_path / "r"
    p = forked.run([her_run, f"algo={algo}", "env=push", "env.kwargs.actions=continuous", "budget.env_steps=200",
                    "eval.episodes=10", "progress=false", f"hydra.run.dir={out}"], cwd=tmp_path,
                   env={**os.environ, "HYDRA_FULL_ERROR": "0"}, text=True, timeout=180)
    assert p.returncode == 0, p.stderr
    assert "eval success" in p.stdout and (out / "checkpoint.pt").is_file()
    assert json.loads((out / "results.json").read_text())["algo"] == algo


def test_bfloat16_on_a_cpu_without_its_units_says_so_in_one_line(tmp_path, monkeypatch, capsys):
    """autocast emulates bfloat16 where the CPU has no AMX / AVX512-BF16: the run goes on, slower, and says so."""
    import her_rl
    from her_rl.rl import updates

    run = ["algo=her_ddpg", "env=push", "env.kwargs.actions=continuous", "algo.precision=bfloat16",
           "budget.env_steps=200", "progress=false", "eval.episodes=2"]
    said = {}
    for has_units in (False, True):
        monkeypatch.setattr(updates, "cpu_has_bfloat16", lambda: has_units)
        her_rl.train(run, out_dir=tmp_path / f"units-{has_units}")
        said[has_units] = [line for line in capsys.readouterr().err.splitlines() if "bfloat16" in line]
    assert said[False] == ["her-run: warning: algo.precision=bfloat16: this CPU has no bfloat16 units (AMX or "
                           "AVX512-BF16), so updates run slower than with algo.precision=float32"]
    assert said[True] == []
    assert updates.slow_precision("float32", None) is None
    assert updates.slow_precision("bfloat16", torch.device("meta")) is None  # not a CPU: no guess about it


def test_an_x86_cpu_with_avx512_but_neither_amx_nor_avx512_bf16_has_no_bfloat16_units(monkeypatch):
    from her_rl.rl import updates

    monkeypatch.setattr(updates.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: True, raising=False)  # AVX512 alone
    for avx512_bf16, amx, has in [(False, False, False), (True, False, True), (False, True, True)]:
        monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda v=avx512_bf16: v)
        monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda v=amx: v)
        assert updates.cpu_has_bfloat16() is has
