"""Checkpoint keys of every learner: those earlier versions wrote, so old runs still resume."""

import io

import pytest
import torch

from her_rl.algos.her_crossq import HerCrossQ
from her_rl.algos.her_ddpg import HerDDPG
from her_rl.algos.her_dqn import HerDQN
from her_rl.algos.her_redq import HerREDQ
from her_rl.algos.her_sac import HerSAC
from her_rl.algos.her_td3 import HerTD3
from her_rl.algos.ppo import PPO
from her_rl.algos.reinforce import Reinforce
from her_rl.algos.rnd_ppo import RNDPPO

BITFLIP = {"name": "bitflip", "id": "her_rl/BitFlip-v0", "kwargs": {"n": 4}}
PUSH = {"name": "push", "id": "her_rl/Push-v0", "kwargs": {"actions": "continuous"}}
CARTPOLE = {"name": "cartpole", "id": "CartPole-v1", "kwargs": {}}
SMALL = {"hidden": (8,), "episodes_per_cycle": 2, "updates_per_cycle": 2, "batch_size": 4}
HINDSIGHT = {"inputs", "memory", "rng", "updates"}
ON_POLICY = {"policy", "optimizer", "obs_rms", "gen", "global_step", "iteration"}

KEYS = [  # learner, env, keywords, the keys its checkpoint has held since before the shared base
    (HerDQN, BITFLIP, SMALL, HINDSIGHT | {"q", "q_target", "optimizer"}),
    (HerDDPG, PUSH, SMALL, HINDSIGHT | {"actor", "actor_target", "critic", "critic_target", "actor_optimizer",
                                        "critic_optimizer", "exploration"}),
    (HerTD3, PUSH, SMALL, HINDSIGHT | {"actor", "actor_target", "q1", "q2", "q1_target", "q2_target",
                                       "actor_optimizer", "critic_optimizer", "exploration", "generator"}),
    (HerSAC, PUSH, SMALL, HINDSIGHT | {"actor", "q1", "q2", "q1_target", "q2_target", "actor_optimizer",
                                       "critic_optimizer", "alpha_optimizer", "log_alpha", "generator"}),
    (HerREDQ, PUSH, {**SMALL, "ensemble": 3}, HINDSIGHT | {"actor", "critics", "critics_target", "actor_optimizer",
                                                           "critic_optimizer", "alpha_optimizer", "log_alpha",
                                                           "generator"}),
    (HerCrossQ, PUSH, SMALL, HINDSIGHT | {"actor", "q1", "q2", "actor_optimizer", "critic_optimizer",
                                          "alpha_optimizer", "log_alpha", "generator"}),
    (Reinforce, CARTPOLE, {"hidden": (8,)}, ON_POLICY),
    (Reinforce, CARTPOLE, {"hidden": (8,), "baseline": "critic"}, ON_POLICY | {"critic", "vf_optimizer"}),
    (PPO, CARTPOLE, {"hidden": (8,), "num_envs": 2, "num_steps": 4}, ON_POLICY | {"critic", "collector"}),
    (RNDPPO, CARTPOLE, {"hidden": (8,), "num_envs": 2, "num_steps": 4, "rnd_init_steps": 0},
     ON_POLICY | {"critic", "collector", "rnd", "rnd_optimizer", "rnd_rng", "pending_steps"}),
]


@pytest.mark.parametrize("cls, env, kw, keys", KEYS, ids=lambda v: getattr(v, "NAME", ""))
def test_a_checkpoint_holds_the_keys_earlier_versions_wrote(cls, env, kw, keys):
    assert set(cls(env=env, seed=0, **kw).state_dict()) == keys


def _saved(agent) -> dict:
    buf = io.BytesIO()
    torch.save(agent.state_dict(), buf)
    buf.seek(0)
    return torch.load(buf, weights_only=True)


def test_a_ddpg_checkpoint_of_an_earlier_version_loads_its_noise_as_the_exploration():
    a = HerDDPG(env=PUSH, seed=0, noise="ou", **SMALL)
    a.train_iteration()
    old = _saved(a)
    old["noise"] = old.pop("exploration")  # the key earlier versions wrote
    b = HerDDPG(env=PUSH, seed=1, noise="ou", **SMALL)
    b.load_state_dict(old)
    assert torch.equal(b.exploration.state_dict()["state"], a.exploration.state_dict()["state"])
    assert b.np_generator.bit_generator.state == a.np_generator.bit_generator.state
    assert a.train_iteration().metrics == b.train_iteration().metrics


def test_a_checkpoint_without_replay_memory_loads_and_one_missing_a_network_does_not():
    a = HerDQN(env=BITFLIP, seed=0, **SMALL)
    a.train_iteration()
    state = _saved(a)
    del state["memory"]  # checkpoint.save_replay=false
    b = HerDQN(env=BITFLIP, seed=1, **SMALL)
    b.load_state_dict(state)
    assert b.updates == a.updates and all(torch.equal(p, q) for p, q in zip(a.q.parameters(), b.q.parameters()))
    del state["q"]
    with pytest.raises(KeyError):
        HerDQN(env=BITFLIP, seed=1, **SMALL).load_state_dict(state)
