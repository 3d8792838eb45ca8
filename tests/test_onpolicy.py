"""REINFORCE, PPO and RND-PPO: learning, rollout semantics, checkpoints and bad input.

Agents are built directly (``cls(**hyperparams, env=<env config>, seed=..., device=...)``) so these
tests do not depend on the runner.
"""

import io

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces

import her_rl.envs  # noqa: F401  (registers the project envs)
from her_rl.algos.onpolicy_actor import ActorNet, ObsProcessor
from her_rl.algos.ppo import PPO
from her_rl.algos.reinforce import Reinforce
from her_rl.algos.rnd_ppo import RNDPPO
from her_rl.algos.rollout import RolloutCollector
from her_rl.envs import make_vec
from her_rl.errors import ConfigError
from her_rl.rules import rules_of
from her_rl.config.registry import build_agent

CARTPOLE = {"name": "cartpole", "id": "CartPole-v1", "kwargs": {}, "solved_return": 475}
PENDULUM = {"name": "pendulum", "id": "Pendulum-v1", "kwargs": {}, "solved_return": -200}
BITFLIP = {"name": "bitflip", "id": "her_rl/BitFlip-v0", "kwargs": {"n": 4}, "solved_return": None}


def deep_sea(size):
    return {"name": "deep_sea", "id": "her_rl/DeepSea-v0", "kwargs": {"size": size}, "solved_return": 0.5}


def greedy_return(agent, env_cfg, episodes=10, seed=123):
    envs = make_vec(env_cfg, episodes, seed=seed)
    obs, _ = envs.reset(seed=seed)
    ret, live = np.zeros(episodes), np.ones(episodes, dtype=bool)
    while live.any():
        obs, r, term, trunc, _ = envs.step(agent.act(obs, explore=False))
        ret += np.asarray(r) * live
        live &= ~(np.asarray(term) | np.asarray(trunc))
    return float(ret.mean())


# -- tiny envs with known dynamics --------------------------------------------------------------
class CountEnv(gym.Env):
    """obs = steps taken; truncated (never terminated) after 3 steps; reward 1 per step."""

    observation_space = spaces.Box(0, 10, shape=(1,), dtype=np.float32)
    action_space = spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([0.0], dtype=np.float32), {}

    def step(self, action):
        self.t += 1
        return np.array([self.t], dtype=np.float32), 1.0, False, self.t >= 3, {}


class MultiBinaryActionEnv(CountEnv):
    action_space = spaces.MultiBinary(3)


for _id, _cls in (("test/Count-v0", CountEnv), ("test/MultiBinaryAction-v0", MultiBinaryActionEnv)):
    if _id not in gym.registry:
        gym.register(_id, entry_point=_cls)


# -- learning ------------------------------------------------------------------------------------
@pytest.mark.slow
def test_ppo_cartpole_return_rises():
    agent = PPO(env=CARTPOLE, seed=0)
    before = greedy_return(agent, CARTPOLE)
    steps = 0
    for _ in range(20):  # about 5k env steps with the rl-zoo defaults
        res = agent.train_iteration()
        steps += res.env_steps
        for key in ("losses/policy_loss", "losses/value_loss", "losses/entropy", "losses/approx_kl",
                    "losses/clipfrac", "losses/explained_variance", "charts/learning_rate"):
            assert np.isfinite(res.metrics[key]), key
    after = greedy_return(agent, CARTPOLE)
    assert 4000 < steps <= 20 * 256
    assert after > max(100.0, 3 * before), (before, after)
    assert res.metrics["charts/learning_rate"] < 1e-3  # linear annealing is on by default


@pytest.mark.slow
def test_reinforce_cartpole_return_rises():
    agent = Reinforce(env=CARTPOLE, seed=0)
    returns = []
    for _ in range(40):  # 160 episodes
        res = agent.train_iteration()
        assert len(res.episode_returns) == 4 and res.env_steps == sum(res.episode_lengths)
        returns += res.episode_returns
    assert np.mean(returns[-20:]) > max(80.0, 2.5 * np.mean(returns[:20])), returns


@pytest.mark.slow
def test_reinforce_with_critic_baseline_runs():
    agent = Reinforce(env=CARTPOLE, seed=0, baseline="critic")
    res = agent.train_iteration()
    assert np.isfinite(res.metrics["losses/value_loss"])


@pytest.mark.slow
def test_ppo_continuous_pendulum_improves():
    kw = dict(num_envs=4, num_steps=256, epochs=10, minibatch_size=64, lr=1e-3, lr_anneal=False, clip_anneal=False,
              gamma=0.9, gae_lambda=0.95, normalize_obs=True, log_std_init=-0.5)
    agent = PPO(env=PENDULUM, seed=0, **kw)
    before = greedy_return(agent, PENDULUM, episodes=8)
    firsts, lasts = [], []
    for i in range(30):  # about 30k env steps
        res = agent.train_iteration()
        (firsts if i < 5 else lasts if i >= 25 else []).extend(res.episode_returns)
        assert res.env_steps <= 4 * 256  # NEXT_STEP reset steps are not counted
    after = greedy_return(agent, PENDULUM, episodes=8)
    assert np.mean(lasts) > np.mean(firsts) + 200, (np.mean(firsts), np.mean(lasts))
    assert after > before + 300, (before, after)
    a = agent.act(np.zeros((3, 3), dtype=np.float32))
    assert a.shape == (3, 1) and a.dtype == np.float32 and np.all(np.abs(a) <= 2.0)


@pytest.mark.slow
def test_rnd_intrinsic_reward_falls_on_often_seen_states():
    agent = RNDPPO(env=deep_sea(6), seed=0, num_envs=4, num_steps=12, epochs=4, minibatch_size=48,
                   rnd_lr=1e-3, rnd_hidden=(64, 64), rnd_embed_dim=32)
    often = np.zeros((2, 36), dtype=np.float32)
    often[0, 6], often[1, 7] = 1.0, 1.0  # the two cells of row 1: every episode enters one of them
    never = np.zeros((1, 36), dtype=np.float32)
    never[0, 35] = 1.0  # bottom-right: essentially never reached by a near-random policy this early
    r0 = float(agent.rnd.intrinsic_reward(often).mean())
    for _ in range(15):
        res = agent.train_iteration()
        assert res.metrics["charts/intrinsic_reward"] > 0 and np.isfinite(res.metrics["losses/predictor_loss"])
    r1, r_never = float(agent.rnd.intrinsic_reward(often).mean()), float(agent.rnd.intrinsic_reward(never))
    assert r1 < 0.2 * r0, (r0, r1)
    assert r_never > 1.5 * r1, (r_never, r1)


def test_rnd_ppo_counts_random_init_steps_and_has_two_value_heads():
    # deep sea of size 4: 4 real steps per episode, then one NEXT_STEP reset step (not counted)
    agent = RNDPPO(env=deep_sea(4), seed=0, num_envs=2, num_steps=8, rnd_init_steps=5, rnd_hidden=(16,),
                   rnd_embed_dim=8, hidden=(16,))
    assert agent.critic[-1].out_features == 2
    assert agent.train_iteration().env_steps == 2 * 4 + 2 * 7  # 5 random steps (4 real) + 8 steps (7 real)
    assert agent.train_iteration().env_steps == 2 * 6
    assert agent.global_step == 2 * (4 + 7 + 6)


def test_rnd_ppo_takes_no_random_init_steps_when_nothing_reads_them():
    agent = RNDPPO(env=deep_sea(4), seed=0, num_envs=2, num_steps=8, rnd_init_steps=5, rnd_whiten=False,
                   rnd_hidden=(16,), rnd_embed_dim=8, hidden=(16,))
    assert agent.train_iteration().env_steps == 2 * 7  # the rollout's own steps only
    with pytest.raises(ConfigError, match="int_norm_decay"):
        RNDPPO(env=deep_sea(4), seed=0, num_envs=2, num_steps=8, int_norm_decay=0.0, hidden=(16,))


# -- rollout semantics ------------------------------------------------------------------------------
def test_rollout_marks_next_step_reset_and_keeps_final_observation():
    envs = make_vec({"name": "gym", "id": "test/Count-v0", "kwargs": {}}, 2, seed=0)
    space = envs.single_observation_space
    proc = ObsProcessor(space)
    actor = ActorNet(proc.dim, envs.single_action_space, hidden=(8,))
    col = RolloutCollector(envs, proc, actor, seed=0)
    ro = col.collect(lambda x: actor.sample(x), None, num_steps=8)
    obs = ro.obs_raw[:, 0, 0].tolist()
    # steps: 0->1, 1->2, 2->3 (truncated), 3->0 (reset step), 0->1, ...
    assert obs == [0, 1, 2, 3, 0, 1, 2, 3, 0]
    assert ro.truncated[:, 0].tolist() == [False, False, True, False, False, False, True, False]
    assert ro.valid[:, 0].tolist() == [True, True, True, False, True, True, True, False]
    assert not ro.terminated.any()
    assert ro.rewards[~ro.valid].abs().sum() == 0
    assert ro.env_steps == 12 and ro.episode_returns == [3.0] * 4 and ro.episode_lengths == [3] * 4
    term, dones = ro.gae_flags()
    # the truncated step is not terminated: GAE bootstraps it from V(obs[t+1]) = V(final observation)
    assert not term[2, 0] and dones[2, 0] and term[3, 0] and dones[3, 0]


def test_act_uses_but_never_updates_observation_statistics():
    agent = PPO(env=CARTPOLE, seed=0, normalize_obs=True, num_steps=8, epochs=1)
    agent.train_iteration()
    count = agent.obs_proc.rms.count
    mean = agent.obs_proc.rms.mean.copy()
    agent.act(np.full((5, 4), 3.0, dtype=np.float32))
    agent.act(np.full((5, 4), 3.0, dtype=np.float32), explore=True)
    assert agent.obs_proc.rms.count == count and np.array_equal(agent.obs_proc.rms.mean, mean)


def test_ppo_runs_on_goal_env_by_concatenating_goal():
    agent = PPO(env=BITFLIP, seed=0, num_envs=2, num_steps=8, epochs=1, hidden=(16,))
    res = agent.train_iteration()
    assert agent.obs_proc.dim == 8  # 4 observation bits + 4 goal bits
    assert res.env_steps > 0 and all(s in (0.0, 1.0) for s in res.episode_successes)
    obs, _ = make_vec(BITFLIP, 3, seed=0).reset(seed=0)
    assert agent.act(obs).shape == (3,)


# -- checkpoints ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("cls, env, kw", [
    (PPO, CARTPOLE, dict(num_steps=8, epochs=1, normalize_obs=True)),
    (Reinforce, CARTPOLE, dict(baseline="critic")),
    (RNDPPO, deep_sea(4), dict(num_envs=2, num_steps=8, rnd_hidden=(16,), rnd_embed_dim=8)),
])
def test_state_dict_loads_with_weights_only_and_restores_behaviour(cls, env, kw):
    a = cls(env=env, seed=0, **kw)
    a.train_iteration()
    buf = io.BytesIO()
    torch.save(a.state_dict(), buf)
    buf.seek(0)
    state = torch.load(buf, weights_only=True)
    b = cls(env=env, seed=1, **kw)
    b.load_state_dict(state)
    obs = make_vec(env, 6, seed=5).reset(seed=5)[0]
    assert np.array_equal(a.act(obs), b.act(obs))
    assert np.array_equal(a.act(obs, explore=True), b.act(obs, explore=True))  # sampling RNG restored too
    assert b.iteration == a.iteration and b.global_step == a.global_step


# -- bad input -------------------------------------------------------------------------------------------
def test_unknown_env_id_is_a_config_error():
    with pytest.raises(ConfigError, match="unknown gymnasium env id"):
        make_vec({"name": "gym", "id": "NoSuchEnv-v9", "kwargs": {}}, 2, seed=0)
    with pytest.raises(ConfigError, match="unknown gymnasium env id"):
        PPO(env={"name": "gym", "id": "NoSuchEnv-v9", "kwargs": {}}, seed=0)


@pytest.mark.parametrize("name, target", [("ppo", "her_rl.algos.ppo.PPO"), ("reinforce", "her_rl.algos.reinforce.Reinforce"),
                                          ("rnd_ppo", "her_rl.algos.rnd_ppo.RNDPPO")])
def test_unsupported_action_space_is_a_clear_config_error(name, target):
    env = {"name": "gym", "id": "test/MultiBinaryAction-v0", "kwargs": {}}
    with pytest.raises(ConfigError, match=rf"algo '{name}' acts in Discrete or 1-D Box .*MultiBinary"):
        build_agent({"name": name, "_target_": target}, env=env, seed=0, device="cpu")


def test_bad_hyperparameters_are_config_errors():
    with pytest.raises(ConfigError, match="baseline"):
        Reinforce(env=CARTPOLE, seed=0, baseline="mean")
    with pytest.raises(ConfigError, match="anneal_steps"):
        PPO(env=CARTPOLE, seed=0, anneal_steps=None)
    with pytest.raises(ConfigError, match="gamma_ext"):
        build_agent({"name": "rnd_ppo", "gamma": 0.9}, env=deep_sea(4), seed=0, device="cpu")
    with pytest.raises(ConfigError, match="no parameter"):  # RND-PPO's signature lists PPO's arguments too
        build_agent({"name": "rnd_ppo", "no_such_key": 1}, env=deep_sea(4), seed=0, device="cpu")


NO_ENV = {"name": "gym", "id": "NoSuchEnv-v9", "kwargs": {}}  # never built: the values are checked first
ANNEAL = ("algo.anneal_steps=null is not allowed with lr_anneal or clip_anneal: annealing needs the env steps "
          "until lr/clip reach 0 (an integer >= 1)")


@pytest.mark.parametrize("cls, kw, text", [
    (PPO, dict(lr=-1), "algo.lr=-1 is not allowed: algo.lr must be a finite number > 0"),
    (PPO, dict(anneal_steps=None), ANNEAL),
    (PPO, dict(epochs=2.5), "algo.epochs=2.5 is not allowed: algo.epochs must be an integer >= 1"),
    (Reinforce, dict(lr=-1), "algo.lr=-1 is not allowed: algo.lr must be a finite number > 0"),
    (Reinforce, dict(baseline="mean"),
     "algo.baseline='mean' is not allowed: algo.baseline must be one of none, critic"),
    (Reinforce, dict(num_envs=0), "algo.num_envs=0 is not allowed: algo.num_envs must be an integer in [1, 4096]"),
    (RNDPPO, dict(lr=-1), "algo.lr=-1 is not allowed: algo.lr must be a finite number > 0"),
    (RNDPPO, dict(clip_anneal=True, anneal_steps=None), ANNEAL),
    (RNDPPO, dict(int_norm_decay=0.0),
     "algo.int_norm_decay=0.0 is not allowed: algo.int_norm_decay must be a number in (0, 1]"),
])
def test_python_built_learner_refuses_a_bad_value_with_the_command_line_text(cls, kw, text):
    with pytest.raises(ConfigError) as err:
        cls(env=NO_ENV, seed=0, **kw)
    assert str(err.value) == text


@pytest.mark.parametrize("name, cls", [("reinforce", Reinforce), ("ppo", PPO), ("rnd_ppo", RNDPPO)])
def test_every_config_key_has_a_rule_and_every_rule_a_key(name, cls):
    from her_rl.config.registry import accepted_params

    rules = rules_of(cls)
    assert sorted(accepted_params(name)) == sorted(rules)
    cls.check_config({k: getattr(cls, k) for k in rules})  # the defaults meet the rules


def test_rnd_ppo_check_refuses_gamma_naming_its_two_discounts():
    with pytest.raises(ConfigError, match="rnd_ppo has gamma_ext and gamma_int instead of gamma"):
        RNDPPO.check_config({"gamma": 0.9})
    PPO.check_config({"gamma": 0.9})


class _ConstantAgent:
    def __init__(self, action: int):
        self.action = action

    def act(self, obs, explore: bool = False):
        return np.full(len(obs), self.action)


def test_evaluate_tells_terminal_ends_from_time_limits():
    from her_rl.run.evaluation import evaluate

    # MountainCar: always pushing right never reaches the flag, every episode hits the 200-step limit
    car = make_vec({"name": "mountaincar", "id": "MountainCar-v0", "kwargs": {}}, 3, seed=0)
    result = evaluate(_ConstantAgent(2), car, seed=0)
    assert result["terminated_rate"] == 0.0 and result["return"] == -200.0
    # deep sea always terminates after N steps
    sea = make_vec({"name": "deep_sea", "id": "her_rl/DeepSea-v0", "kwargs": {"size": 4}}, 2, seed=0)
    result = evaluate(_ConstantAgent(0), sea, seed=0)
    assert result["terminated_rate"] == 1.0 and result["length"] == 4.0


def test_rnd_ppo_with_deep_sea_settings_solves_size_14(tmp_path):
    """The tuned/rnd_ppo_deep_sea.yaml settings find and then exploit the single rewarding path
    (a random policy finds it once in 2^14 episodes, ~16,000 episodes = 230k steps)."""
    from her_rl.config.compose import compose
    from her_rl.run.runner import run

    cfg = compose(["algo=rnd_ppo", "env=deep_sea", "size=14", "budget.env_steps=80000",
                   "eval.every_iterations=5", "progress=false", "threads=1"])
    assert cfg.algo.rnd_whiten is False and cfg.algo.norm_adv is False  # tuned settings applied
    results = run(cfg, out_dir=tmp_path)
    assert results["solved"] and results["eval_return"] > 0.5, results
