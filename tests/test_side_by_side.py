"""algo.critic_threads=2: the twin critics' passes run one per thread (her_rl/algos/parallel_update.py), and
the numbers are those of the plain update; the actor's gradient through min(Q1, Q2) is the one autograd
gives; HER-REDQ takes no such key."""

import threading

import pytest
import torch

from her_rl.algos.her_crossq import HerCrossQ
from her_rl.algos.her_redq import HerREDQ
from her_rl.algos.her_sac import HerSAC
from her_rl.algos.her_td3 import HerTD3
from her_rl.errors import ConfigError
from her_rl.algos.parallel_update import ParallelUpdate, SideBySide
from her_rl.config.registry import accepted_params, check_algo_keys

PUSH = {"name": "push", "id": "her_rl/Push-v0", "kwargs": {"actions": "continuous", "max_episode_steps": 10}}
SMALL = {"hidden": (32, 32), "episodes_per_cycle": 4, "updates_per_cycle": 5, "batch_size": 16}


def test_side_by_side_runs_the_first_item_here_and_the_second_on_another_thread_in_order():
    here = threading.get_ident()
    pair = SideBySide(2)
    try:
        out = pair.map(lambda item: (item, threading.get_ident()), ["q1", "q2"])
    finally:
        pair.close()
    assert [item for item, _ in out] == ["q1", "q2"]
    assert out[0][1] == here and out[1][1] != here
    assert SideBySide(1).map(lambda _: threading.get_ident(), [1, 2]) == [here, here]


def test_when_the_first_piece_raises_the_others_have_ended_before_the_error_reaches_the_caller():
    import time

    done = []

    def piece(item):
        if item == "q1":
            raise ValueError("non-finite loss")
        time.sleep(0.2)
        done.append(item)

    pair = SideBySide(2)
    try:
        with pytest.raises(ValueError, match="non-finite"):
            pair.map(piece, ["q1", "q2"])
        assert done == ["q2"]  # not still running while the caller goes on to its next update
    finally:
        pair.close()


def _trained(cls, critic_threads: int, precision: str):
    torch.manual_seed(0)  # the networks' initial weights come from torch's global generator
    agent = cls(env=PUSH, seed=0, critic_threads=critic_threads, precision=precision, **SMALL)
    for _ in range(3):
        agent.train_iteration()
    agent.envs.close()
    return agent


@pytest.mark.parametrize("cls", [HerSAC, HerTD3, HerCrossQ], ids=lambda c: c.NAME)
@pytest.mark.parametrize("precision", ["float32", "bfloat16"])
def test_two_critic_threads_give_the_numbers_of_one(cls, precision):
    one, two = _trained(cls, 1, precision), _trained(cls, 2, precision)
    assert one.parallel is None and two.parallel.side_by_side._pool is not None  # two did use a second thread
    for name in ("actor", "q1", "q2"):
        for (key, a), (_, b) in zip(getattr(one, name).state_dict().items(), getattr(two, name).state_dict().items()):
            assert torch.equal(a, b), f"{cls.NAME} {name}.{key}"
    if cls is not HerTD3:
        assert torch.equal(one.log_alpha, two.log_alpha)
    two.parallel.side_by_side.close()


@pytest.mark.parametrize("critic_threads", [1, 2])
def test_the_actors_critic_gradient_is_that_of_min_q1_q2(critic_threads):
    torch.manual_seed(0)
    agent = HerSAC(env=PUSH, seed=0, critic_threads=critic_threads, **SMALL)
    agent.envs.close()
    parallel = ParallelUpdate(agent)
    x, a = torch.randn(64, agent.inputs.dim), torch.rand(64, agent.act_dim) * 2 - 1
    a[:, 0] = 1.0  # the actions' bound, where the critics are steep or flat alike
    q_min, grad = parallel.min_q_and_action_gradient(x, a)
    a_ref = a.clone().requires_grad_(True)
    reference = torch.min(agent.q1(x, a_ref), agent.q2(x, a_ref))
    (grad_ref,) = torch.autograd.grad(reference.mean(), a_ref)
    torch.testing.assert_close(q_min, reference.detach(), rtol=0, atol=0)
    torch.testing.assert_close(grad, grad_ref)
    assert not q_min.requires_grad and not any(p.grad is not None for p in agent.q1.parameters())
    parallel.side_by_side.close()


def test_critic_threads_is_refused_outside_1_and_2_and_her_redq_takes_no_such_key():
    with pytest.raises(ConfigError, match=r"algo.critic_threads=3 is not allowed"):
        HerSAC.check_config({"critic_threads": 3})
    HerTD3.check_config({"critic_threads": 2})
    HerCrossQ.check_config({"critic_threads": 2})
    assert "critic_threads" not in accepted_params(HerREDQ.NAME)  # its critics are one batched ensemble
    with pytest.raises(ConfigError, match=r"algo 'her_redq' has no parameter\(s\) \['critic_threads'\]"):
        check_algo_keys(HerREDQ.NAME, {"critic_threads": 1})


def test_her_run_refuses_critic_threads_for_her_redq_in_one_line(her_run_here, tmp_path):
    out = her_run_here(["algo=her_redq", "env=push", "algo.critic_threads=2"], tmp_path)
    assert out.returncode == 2
    [line] = out.stderr.strip().splitlines()
    assert line.startswith("her-run: error: unknown config key 'algo.critic_threads': algo 'her_redq' has no such "
                           "key; its keys: ") and "critic_threads" not in line.split("its keys: ")[1]
    assert not any(tmp_path.iterdir())


def test_critic_threads_is_bookkeeping_a_resume_may_change_it_and_it_names_no_folder_or_summary_row():
    from omegaconf import OmegaConf

    from her_rl.config import saved as bookkeeping
    from her_rl.config.compose import compose
    from her_rl.config.saved import merge

    saved = OmegaConf.to_container(compose(["algo=her_sac", "env=push", "env.kwargs.actions=continuous"]), resolve=True)
    current = OmegaConf.to_container(compose(["algo=her_sac", "env=push", "env.kwargs.actions=continuous",
                                              "algo.critic_threads=2"]), resolve=True)
    effective, changes = merge(saved, current, ["algo.critic_threads=2"])
    assert changes == {"algo.critic_threads": [1, 2]} and effective["algo"]["critic_threads"] == 2
    with pytest.raises(ConfigError, match="cannot resume: .*algo.precision"):
        merge(saved, {**current, "algo": {**current["algo"], "precision": "bfloat16"}}, ["algo.precision=bfloat16"])
    assert "algo.critic_threads" in bookkeeping.exclude_keys()
    assert not bookkeeping.is_setting("algo.critic_threads=2") and bookkeeping.is_setting("algo.precision=bfloat16")
