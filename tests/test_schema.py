"""Every value is checked before anything is built or written: one line naming key, value and rule."""

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from her_rl.config import checks
from her_rl.config.checks import validate
from her_rl.errors import ConfigError
from her_rl.config.compose import compose
from her_rl.run.runner import main

HER = ["algo=her_dqn", "env=bitflip"]
PPO = ["algo=ppo", "env=cartpole"]
REINFORCE = ["algo=reinforce", "env=cartpole"]
RND = ["algo=rnd_ppo", "env=mountaincar"]

BAD = [
    # top level
    ([], "n=0", "n must be an integer in [1, 4096]"),
    ([], "n=100000", "n must be an integer in [1, 4096]"),
    ([], "n=abc", "n must be an integer"),
    ([], "n=4.0", "n must be an integer"),
    ([], "seed=-1", "seed must be an integer in [0, 4294967295]"),
    ([], "seed=99999999999", "seed must be an integer in [0, 4294967295]"),
    ([], "threads=0", "threads must be an integer in [1, 1024]"),
    ([], "device=tpu", "device must be one of cpu, cuda, auto"),
    ([], "progress=maybe", "progress must be true or false"),
    ([], "resume=maybe", "resume must be one of false, true, auto"),
    ([], "resume=1", "resume must be one of false, true, auto"),
    ([], "budget.env_steps=0", "budget.env_steps must be an integer >= 1"),
    ([], "budget.env_steps=1e6", "budget.env_steps must be an integer >= 1"),
    ([], "budget.wall_time_s=-5", "budget.wall_time_s must be null or a finite number > 0"),
    ([], "eval.episodes=0", "eval.episodes must be an integer in [1, 4096]"),
    ([], "eval.every_iterations=0", "eval.every_iterations must be an integer >= 1"),
    ([], "eval.success_threshold=1.5", "eval.success_threshold must be a number in (0, 1]"),
    ([], "eval.return_threshold=nan", "eval.return_threshold must be null or a finite number"),
    ([], "eval.stop_when_solved=yes", "eval.stop_when_solved must be true or false"),
    ([], "checkpoint.every_s=-1", "checkpoint.every_s must be a finite number >= 0"),
    ([], "checkpoint.save_replay=2", "checkpoint.save_replay must be true or false"),
    ([], "guard.nonfinite=ignore", "guard.nonfinite must be one of stop, skip"),
    ([], "+foo=1", "unknown config key 'foo'"),
    ([], "+eval.foo=1", "unknown config key 'eval.foo'"),
    # her_dqn
    (HER, "algo.k=1.5", "algo.k must be an integer >= 0"),
    (HER, "algo.k=-1", "algo.k must be an integer >= 0"),
    (HER, "algo.lr=inf", "algo.lr must be a finite number > 0"),
    (HER, "algo.lr=0", "algo.lr must be a finite number > 0"),
    (HER, "algo.gamma=1.5", "algo.gamma must be a number in (0, 1]"),
    (HER, "algo.gamma=0", "algo.gamma must be a number in (0, 1]"),
    (HER, "algo.polyak=-0.1", "algo.polyak must be a number in [0, 1]"),
    (HER, "algo.epsilon=2", "algo.epsilon must be a number in [0, 1]"),
    (HER, "algo.random_mix=1.5", "algo.random_mix must be a number in [0, 1]"),
    (HER, "algo.double_dqn=maybe", "algo.double_dqn must be true or false"),
    (HER, "algo.clip_target=0", "algo.clip_target must be true or false"),
    (HER, "algo.grad_clip=-1", "algo.grad_clip must be null or a finite number > 0"),
    (HER, "algo.hidden=[]", "algo.hidden must be a non-empty list of positive integers"),
    (HER, "algo.hidden=[64,0]", "algo.hidden must be a non-empty list of positive integers"),
    (HER, "algo.hidden=64", "algo.hidden must be a non-empty list of positive integers"),
    (HER, "algo.updates_per_cycle=-3", "algo.updates_per_cycle must be an integer >= 1"),
    (HER, "algo.episodes_per_cycle=0", "algo.episodes_per_cycle must be null or an integer in [1, 4096]"),
    (HER, "algo.strategy=later", "algo.strategy must be one of future, final, episode, random, next, next_future, none"),
    (HER, "algo.batch_size=512 algo.buffer_size=100", "larger than algo.buffer_size"),
    (HER, "+algo.nope=1", "algo 'her_dqn' has no parameter(s) ['nope']; accepted:"),
    (HER, "algo._target_=os.system", "only registered builders may be used"),
    # ppo
    (PPO, "algo.gae_lambda=2", "algo.gae_lambda must be a number in [0, 1]"),
    (PPO, "algo.clip_eps=-1", "algo.clip_eps must be a finite number > 0"),
    (PPO, "algo.ent_coef=nan", "algo.ent_coef must be a finite number >= 0"),
    (PPO, "algo.ent_coef=-0.1", "algo.ent_coef must be a finite number >= 0"),
    (PPO, "algo.vf_coef=-1", "algo.vf_coef must be a finite number >= 0"),
    (PPO, "algo.max_grad_norm=-0.5", "algo.max_grad_norm must be null or a finite number > 0"),
    (PPO, "algo.epochs=0", "algo.epochs must be an integer >= 1"),
    (PPO, "algo.num_steps=-1", "algo.num_steps must be an integer >= 1"),
    (PPO, "algo.minibatch_size=2.5", "algo.minibatch_size must be an integer >= 1"),
    (PPO, "algo.activation=relux", "algo.activation must be one of"),
    (PPO, "algo.norm_adv=maybe", "algo.norm_adv must be true or false"),
    (PPO, "algo.target_kl=0", "algo.target_kl must be null or a finite number > 0"),
    (PPO, "algo.anneal_steps=null", "algo.anneal_steps=null is not allowed with lr_anneal"),
    # reinforce
    (REINFORCE, "algo.baseline=value", "algo.baseline must be one of none, critic"),
    (REINFORCE, "algo.vf_lr=-1", "algo.vf_lr must be a finite number > 0"),
    (REINFORCE, "algo.max_grad_norm=-1", "algo.max_grad_norm must be null or a finite number > 0"),
    (REINFORCE, "algo.num_envs=0", "algo.num_envs must be an integer in [1, 4096]"),
    # rnd_ppo
    (RND, "algo.gamma_int=1.5", "algo.gamma_int must be a number in (0, 1]"),
    (RND, "algo.predictor_fraction=0", "algo.predictor_fraction must be a number in (0, 1]"),
    (RND, "algo.rnd_hidden=[-1]", "algo.rnd_hidden must be a non-empty list of positive integers"),
    (RND, "algo.rnd_init_steps=-1", "algo.rnd_init_steps must be an integer >= 0"),
    (RND, "algo.int_coef=inf", "algo.int_coef must be a finite number >= 0"),
    (RND, "+algo.gamma=0.9", "algo 'rnd_ppo' has no parameter(s) ['gamma']"),
    # env groups
    (["algo=ppo", "env=deep_sea"], "size=1000", "size must be an integer in [1, 256]"),
    (["algo=ppo", "env=deep_sea"], "env.kwargs.mapping_seed=-1", "env.kwargs.mapping_seed must be an integer"),
    (["algo=ppo", "env=deep_sea"], "+env.kwargs.foo=3", "rejected by 'her_rl/DeepSea-v0'"),
    (PPO, "env.solved_return=inf", "eval.return_threshold=inf (from ${env.solved_return}) is not allowed"),
    (["algo=ppo", "env=gym"], "env.id=NoSuchEnv-v9", "unknown gymnasium env id 'NoSuchEnv-v9'"),
    (["algo=ppo", "env=gym"], "env.id=NoSuchEnv:Evil-v0", "cannot import module 'NoSuchEnv'"),
    (["algo=ppo", "env=gym"], "env.id=os:Evil-v0", "module 'os' was imported but registers no env 'Evil-v0'"),
    (["algo=ppo", "env=gym"], "env.id=Blackjack-v1", None),  # Tuple observations: refused when the agent is built
    (["algo=her_dqn", "env=cartpole"], "seed=0", "needs a goal-conditioned env"),
]


@pytest.mark.parametrize("group, override, message", BAD, ids=[b[1] for b in BAD])
def test_bad_value_is_refused_before_anything_is_written(tmp_path, monkeypatch, group, override, message):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "run"
    with pytest.raises(ConfigError) as err:
        main(["progress=false", "budget.env_steps=50", *group, *override.split()], out_dir=out)
    text = str(err.value)
    if message is not None:
        assert message in text
    assert "\n" not in text
    assert not out.exists() and list(tmp_path.iterdir()) == []  # no folder, no file


def test_rule_names_key_value_and_what_is_allowed():
    with pytest.raises(ConfigError, match=r"^algo\.k=1\.5 is not allowed: algo\.k must be an integer >= 0$"):
        validate(compose(["algo.k=1.5"]))


@pytest.mark.parametrize("overrides", [[], PPO, REINFORCE, RND, ["algo=rnd_ppo", "env=deep_sea"],
                                       ["algo=ppo", "env=pendulum"], ["algo=ppo", "env=bitflip"]])
def test_shipped_configs_pass(overrides):
    validate(compose(overrides))


def test_her_dqn_accepts_constructor_keys_without_a_rule(monkeypatch):
    import copy
    from types import MappingProxyType

    from her_rl.algos.her_dqn import HerDQN

    bare = copy.copy(HerDQN.__dataclass_fields__["epsilon"])
    bare.metadata = MappingProxyType({})  # as if epsilon were a key added to HerDQN without a rule
    monkeypatch.setitem(HerDQN.__dataclass_fields__, "epsilon", bare)
    validate(compose(["algo.epsilon=7"]))  # passes through unchecked, the constructor has it
    with pytest.raises(ConfigError, match="no parameter"):
        validate(compose(["+algo.epsilonn=0.1"]))


def test_goal_env_is_read_from_spaces_not_from_its_name():
    spaces_ = validate(compose(["algo=her_dqn", "env=gym", "env.id=her_rl/BitFlip-v0", "+env.kwargs.n=4"]))
    assert spaces_.goal_env


class _BoxGoalEnv(gym.Env):
    """A goal env with continuous actions: her_dqn cannot act in it."""

    def __init__(self):
        box = spaces.Box(-1, 1, (2,), np.float32)
        self.observation_space = spaces.Dict({"observation": box, "achieved_goal": box, "desired_goal": box})
        self.action_space = box

    def compute_reward(self, achieved_goal, desired_goal, info):
        return -np.ones(np.shape(achieved_goal)[:-1])

    def reset(self, seed=None, options=None):  # the config check takes one reset and one step
        return self.observation_space.sample(), {}

    def step(self, action):
        return self.observation_space.sample(), -1.0, False, False, {}


def test_goal_env_with_box_actions_is_refused_for_her_dqn():
    if "test_her_rl/BoxGoal-v0" not in gym.registry:
        gym.register("test_her_rl/BoxGoal-v0", entry_point=_BoxGoalEnv)
    with pytest.raises(ConfigError, match=r"algo 'her_dqn' acts in discrete action spaces; 'gym' "
                                          r"\(test_her_rl/BoxGoal-v0\) has action space Box"):
        validate(compose(["algo=her_dqn", "env=gym", "env.id=test_her_rl/BoxGoal-v0"]))
    assert validate(compose(["algo=ppo", "env=gym", "env.id=test_her_rl/BoxGoal-v0"])).goal_env
