"""algo.simultaneous=true (her_sac): an update's gradients all come from the parameters before it, so
the actor climbs the critics as they were before their step; with critic_threads 2 the critics' half
and the actor's half run on a thread each, with the numbers of one thread (her_rl/algos/parallel_update.py);
HER-CrossQ and HER-REDQ take no such key."""

import pytest
import torch

from her_rl.algos.her_crossq import HerCrossQ
from her_rl.algos.her_redq import HerREDQ
from her_rl.algos.her_sac import HerSAC
from her_rl.errors import ConfigError
from her_rl.rl.nets import ContinuousAction
from her_rl.algos.parallel_update import can_fork
from her_rl.config.registry import accepted_params

PUSH = {"name": "push", "id": "her_rl/Push-v0", "kwargs": {"actions": "continuous", "max_episode_steps": 10}}
SMALL = {"hidden": (32, 32), "episodes_per_cycle": 4, "updates_per_cycle": 5, "batch_size": 16}
needs_fork = pytest.mark.skipif(not can_fork(), reason="the forked half needs Linux")


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


def _trained(precision: str, threads: int, actor_half: str = "thread") -> HerSAC:
    torch.manual_seed(0)
    agent = HerSAC(env=PUSH, seed=0, simultaneous=True, critic_threads=threads, precision=precision,
                   actor_half=actor_half, **SMALL)
    for _ in range(3):
        agent.train_iteration()
    agent.envs.close()
    return agent


def _leaves(state) -> list:
    if isinstance(state, dict):
        return [leaf for key in sorted(state, key=str) for leaf in [key, *_leaves(state[key])]]
    if isinstance(state, (list, tuple)):
        return [leaf for item in state for leaf in _leaves(item)]
    return [state]


def _same_learner(one: HerSAC, two: HerSAC) -> None:
    """Weights, targets, the three optimisers' moments and counters, alpha: equal bit for bit."""
    for name in ("actor", "q1", "q2", "q1_target", "q2_target", "actor_optimizer", "critic_optimizer",
                 "alpha_optimizer"):
        a, b = _leaves(getattr(one, name).state_dict()), _leaves(getattr(two, name).state_dict())
        assert len(a) == len(b), name
        for x, y in zip(a, b):
            assert torch.equal(x, y) if isinstance(x, torch.Tensor) else x == y, name
    assert torch.equal(one.log_alpha, two.log_alpha) and one.updates == two.updates == 15


@pytest.mark.parametrize("precision", ["float32", "bfloat16"])
def test_two_threads_give_the_numbers_of_one(precision):
    one, two = _trained(precision, 1), _trained(precision, 2)
    assert one.parallel.halves._pool is None
    assert two.parallel.halves._pool is not None  # two ran the actor's half on a thread
    assert two.parallel.side_by_side._pool is None  # ... and the critics one after the other on theirs
    _same_learner(one, two)
    two.parallel.halves.close()


@needs_fork
@pytest.mark.parametrize("precision", ["float32", "bfloat16"])
def test_the_actors_half_in_a_forked_process_gives_the_numbers_of_one_thread(precision):
    one, forked = _trained(precision, 1), _trained(precision, 2, "process")
    assert forked.parallel.forked is not None and forked.parallel.forked._process.is_alive()  # from the second update on
    assert forked.parallel.forked._process.pid != __import__("os").getpid()
    _same_learner(one, forked)
    process = forked.parallel.forked._process
    forked.parallel.forked.close()
    assert not process.is_alive()


@needs_fork
@pytest.mark.parametrize("replace", ["weight", "optimiser state"])
def test_the_forked_half_starts_again_when_a_tensor_it_shares_is_replaced(replace):
    agent = _trained("float32", 2, "process")
    first = agent.parallel.forked._process
    if replace == "weight":
        agent.actor.trunk[0][0].weight.data = agent.actor.trunk[0][0].weight.data.clone()
    else:  # what loading a checkpoint or the guard's snapshot into the optimiser does
        agent.actor_optimizer.load_state_dict(__import__("copy").deepcopy(agent.actor_optimizer.state_dict()))
    agent.train_iteration()
    assert agent.parallel.forked._process is not first and not first.is_alive()
    assert agent.actor.trunk[0][0].weight.is_shared()
    assert all(v.is_shared() for state in agent.actor_optimizer.state.values() for v in state.values())
    agent.envs.close()
    agent.parallel.forked.close()


@needs_fork
def test_an_error_on_this_side_ends_the_forked_half_and_the_next_update_forks_anew(monkeypatch):
    agent = _trained("float32", 2, "process")
    first = agent.parallel.forked._process

    def failing(*args, **kwargs):
        raise FloatingPointError("non-finite critic loss")

    with monkeypatch.context() as m:
        m.setattr(agent.parallel, "critic_gradients", failing)
        with pytest.raises(FloatingPointError):
            agent.learn()
    assert agent.parallel.forked is None and not first.is_alive()
    agent.learn()
    assert agent.parallel.forked._process.is_alive() and agent.parallel.forked._process is not first
    agent.envs.close()
    agent.parallel.forked.close()


@pytest.mark.parametrize("cls", [HerCrossQ, HerREDQ], ids=lambda c: c.NAME)
def test_the_learners_with_their_own_update_take_no_such_key(cls):
    assert not {"simultaneous", "actor_half"} & set(accepted_params(cls.NAME))
    HerSAC.check_config({"simultaneous": True, "critic_threads": 2})


def test_her_run_refuses_it_for_her_crossq_in_one_line(her_run_here, tmp_path):
    out = her_run_here(["algo=her_crossq", "env=push", "env.kwargs.actions=continuous", "algo.simultaneous=true"],
                       tmp_path)
    assert out.returncode == 2
    [line] = out.stderr.strip().splitlines()
    assert line.startswith("her-run: error: unknown config key 'algo.simultaneous': algo 'her_crossq' has no such "
                           "key; its keys: actor_lr, ")


def test_it_is_a_setting_a_resume_may_not_change():
    from omegaconf import OmegaConf

    from her_rl.config import saved as bookkeeping
    from her_rl.config.compose import compose
    from her_rl.config.saved import merge

    base = ["algo=her_sac", "env=push", "env.kwargs.actions=continuous"]
    saved = OmegaConf.to_container(compose(base), resolve=True)
    current = OmegaConf.to_container(compose([*base, "algo.simultaneous=true"]), resolve=True)
    with pytest.raises(ConfigError, match="cannot resume: .*algo.simultaneous"):
        merge(saved, current, ["algo.simultaneous=true"])
    assert bookkeeping.is_setting("algo.simultaneous=true")


@pytest.mark.parametrize("extra", [[], ["algo.simultaneous=true"], ["algo.critic_threads=2"]],
                         ids=["alone", "without-threads", "without-simultaneous"])
def test_her_run_refuses_the_forked_half_without_its_two_keys_in_one_line(her_run_here, tmp_path, extra):
    out = her_run_here(["algo=her_sac", "env=push", "env.kwargs.actions=continuous", "algo.actor_half=process",
                        *extra], tmp_path)
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "her-run: error: algo.actor_half=process needs algo.simultaneous=true and algo.critic_threads=2"]


def test_her_run_refuses_an_unknown_place_for_the_actors_half_in_one_line(her_run_here, tmp_path):
    out = her_run_here(["algo=her_sac", "env=push", "env.kwargs.actions=continuous", "algo.actor_half=gpu"], tmp_path)
    assert out.returncode == 2
    assert len(out.stderr.strip().splitlines()) == 1 and "algo.actor_half" in out.stderr
    assert "thread" in out.stderr and "process" in out.stderr


@needs_fork
def test_an_error_in_the_forked_half_is_one_line_ends_it_and_the_next_update_forks_anew(monkeypatch):
    agent = _trained("float32", 2, "process")
    agent.parallel.forked.close()
    agent.parallel.forked = None

    def failing(*args, **kwargs):
        raise FloatingPointError("non-finite actor loss")

    with monkeypatch.context() as m:
        m.setattr(agent.parallel, "actor_gradients", failing)  # the next fork's child inherits it
        with pytest.raises(RuntimeError) as err:
            agent.learn()
    assert str(err.value) == "her_sac actor's half failed: FloatingPointError: non-finite actor loss"
    assert agent.parallel.forked is None
    agent.learn()  # forked anew, without the failing stand-in
    assert agent.parallel.forked._process.is_alive()
    agent.envs.close()
    agent.parallel.forked.close()


@needs_fork
def test_the_forked_half_is_refused_off_the_cpu_and_off_linux(monkeypatch):
    import her_rl.algos.parallel_update as parallel_update

    keys = {"simultaneous": True, "critic_threads": 2, "actor_half": "process"}
    HerSAC.check_config(keys)
    monkeypatch.setattr(parallel_update, "can_fork", lambda: False)
    with pytest.raises(ConfigError, match="needs Linux"):
        HerSAC.check_config(keys)
    monkeypatch.undo()
    agent = HerSAC(env=PUSH, seed=0, **keys, **SMALL)
    agent.envs.close()
    agent.device = torch.device("meta")  # what build sees with device=cuda (no CUDA here to build one)
    with pytest.raises(ConfigError, match="algo.actor_half=process runs on the CPU only, not device=meta"):
        agent.build_critics()


def test_where_the_actors_half_runs_is_bookkeeping_a_resume_may_change_it():
    from her_rl.config import saved as bookkeeping

    assert bookkeeping.is_bookkeeping("algo.actor_half=process")
    assert not bookkeeping.is_setting("algo.actor_half=process")


@needs_fork
def test_her_run_with_the_forked_half_checkpoints_resumes_and_exits(her_run, tmp_path):
    import json
    import os
    import subprocess

    out = tmp_path / "r"
    base = [her_run, "algo=her_sac", "env=push", "env.kwargs.actions=continuous", "algo.simultaneous=true",
            "algo.critic_threads=2", "eval.episodes=5", "progress=false", f"hydra.run.dir={out}"]
    env = {**os.environ, "HYDRA_FULL_ERROR": "0"}
    for extra in (["budget.env_steps=400", "algo.actor_half=process"],  # one cycle: 40 updates, 39 forked
                  ["budget.env_steps=800", "resume=true", "algo.actor_half=thread"]):  # a resume may change it
        p = subprocess.run([*base, *extra], cwd=tmp_path, env=env, text=True, capture_output=True, timeout=180)
        assert p.returncode == 0, p.stderr
    assert (out / "checkpoint.pt").is_file()
    assert json.loads((out / "results.json").read_text())["env_steps"] == 800
