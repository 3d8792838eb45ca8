"""algo.simultaneous=true (her_sac): an update's gradients all come from the parameters before it, so
the actor climbs the critics as they were before their step; with critic_threads 2 the critics' half
and the actor's half run on a thread each, with the numbers of one thread; the learners with their own
update refuse it."""

import pytest
import torch

from her_rl.algos.her_crossq import HerCrossQ
from her_rl.algos.her_redq import HerREDQ
from her_rl.algos.her_sac import HerSAC
from her_rl.errors import ConfigError
from her_rl.rl.actions import ContinuousAction

PUSH = {"name": "push", "id": "her_rl/Push-v0", "kwargs": {"actions": "continuous", "max_episode_steps": 10}}
SMALL = {"hidden": (32, 32), "episodes_per_cycle": 4, "updates_per_cycle": 5, "batch_size": 16}


def _agent(**kwargs) -> HerSAC:
    torch.manual_seed(0)  # the networks' initial weights come from torch's global generator
    agent = HerSAC(env=PUSH, seed=0, **SMALL, **kwargs)
    for _ in range(2):  # a memory to sample from, no update yet
        episodes = agent.collect()
        agent.remember(episodes)
        agent.inputs.update(episodes)
    return agent


def _one_update(agent: HerSAC) -> dict[str, float]:
    batch = agent.tensors(agent.memory.sample(agent.batch_size, agent.np_generator))
    metrics = agent.update(batch)
    agent.envs.close()
    return metrics


def _same(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    return all(torch.equal(p, q) for p, q in zip(a.state_dict().values(), b.state_dict().values()))


def test_the_actor_climbs_the_critics_before_their_step_and_the_critics_step_as_in_the_plain_update():
    together = _agent(simultaneous=True)
    plain = _agent()
    unmoved = _agent()  # the plain update with critics that do not move: its actor sees them as before
    for group in unmoved.critic_optimizer.param_groups:
        group["lr"] = 0.0
    metrics = _one_update(together)
    plain_metrics = _one_update(plain)
    _one_update(unmoved)
    assert _same(together.q1, plain.q1) and _same(together.q2, plain.q2)  # same target, same draws
    assert _same(together.actor, unmoved.actor) and torch.equal(together.log_alpha, unmoved.log_alpha)
    assert not _same(together.actor, plain.actor)  # the plain actor climbed the critics after their step
    assert metrics["losses/qf_loss"] == plain_metrics["losses/qf_loss"]


@pytest.mark.parametrize("precision", ["float32", "bfloat16"])
def test_two_threads_give_the_numbers_of_one(precision):
    def trained(threads: int) -> HerSAC:
        torch.manual_seed(0)
        agent = HerSAC(env=PUSH, seed=0, simultaneous=True, critic_threads=threads, precision=precision, **SMALL)
        for _ in range(3):
            agent.train_iteration()
        agent.envs.close()
        return agent

    one, two = trained(1), trained(2)
    assert one.halves._pool is None and two.halves._pool is not None  # two ran the actor's half on a thread
    assert two.side_by_side._pool is None  # ... and the critics one after the other on theirs
    for name in ("actor", "q1", "q2", "q1_target", "q2_target"):
        assert _same(getattr(one, name), getattr(two, name)), name
    assert torch.equal(one.log_alpha, two.log_alpha) and one.updates == two.updates == 15
    two.halves.close()


def test_given_noise_is_the_sample_the_generator_would_draw():
    mean, std = torch.randn(5, 3), torch.rand(5, 3) + 0.1
    generator = torch.Generator().manual_seed(3)
    drawn = ContinuousAction(mean, std, squash=True).sample_with_log_prob(generator)
    noise = torch.randn((5, 3), generator=torch.Generator().manual_seed(3))
    given = ContinuousAction(mean, std, squash=True).sample_with_log_prob(None, noise)
    assert all(torch.equal(a, b) for a, b in zip(drawn, given))
    with pytest.raises(ValueError, match=r"noise of shape \(5, 2\) for actions of shape \(5, 3\)"):
        ContinuousAction(mean, std).sample_with_log_prob(None, noise[:, :2])


@pytest.mark.parametrize("cls", [HerCrossQ, HerREDQ], ids=lambda c: c.NAME)
def test_the_learners_with_their_own_update_refuse_it(cls):
    with pytest.raises(ConfigError, match=rf"algo.simultaneous=true is not allowed for {cls.NAME}"):
        cls.check_config({"simultaneous": True})
    cls.check_config({"simultaneous": False})
    HerSAC.check_config({"simultaneous": True, "critic_threads": 2})


def test_her_run_refuses_it_for_her_crossq_in_one_line(her_run_here, tmp_path):
    out = her_run_here(["algo=her_crossq", "env=push", "env.kwargs.actions=continuous", "algo.simultaneous=true"],
                       tmp_path)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "her-run: error: algo.simultaneous=true is not allowed for her_crossq: it is her_sac's (leave it false)"]


def test_it_is_a_setting_a_resume_may_not_change():
    from omegaconf import OmegaConf

    from her_rl.config import bookkeeping
    from her_rl.config.compose import compose
    from her_rl.config.saved import merge

    base = ["algo=her_sac", "env=push", "env.kwargs.actions=continuous"]
    saved = OmegaConf.to_container(compose(base), resolve=True)
    current = OmegaConf.to_container(compose([*base, "algo.simultaneous=true"]), resolve=True)
    with pytest.raises(ConfigError, match="cannot resume: .*algo.simultaneous"):
        merge(saved, current, ["algo.simultaneous=true"])
    assert bookkeeping.is_setting("algo.simultaneous=true")
