"""Where a FetchPush training run spends its wall time (:mod:`bench.phases`), and how fast each side
collects and updates.

:func:`ours_side` and :func:`sb3_side` build the learners :func:`time_sides` times, the two halves
of training apart: env steps of collection with the exploring policy (storing into the replay
memory included), then gradient steps on relabelled batches, for our learners (built from their
``her-run`` config, tuned file included) and for Stable-Baselines3 learners with HER (SAC with our
net and batch, and rl-zoo's TQC recipe for FetchPush). SB3 and sb3-contrib are imported only there.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable, Sequence

from bench.phases import Phases


@dataclass
class Side:
    """One learner ready to be timed: ``collect(n)`` plays at least n env steps with the exploring
    policy into its replay memory, ``learn(m)`` takes m gradient steps; each returns how many it did."""

    side: str
    learner: str
    net: str
    batch: int
    collect: Callable[[int], int]
    learn: Callable[[int], int]
    close: Callable[[], None] = lambda: None
    threads: int = 1
    """torch threads while this side is timed (the setting is process-wide, so it is set per side)."""


@dataclass
class Rate:
    side: str
    learner: str
    net: str
    batch: int
    env_steps_per_s: float | None
    updates_per_s: float | None


def ours_side(algo: str, seed: int = 0, vectorization: str = "sync", joint_cache: bool = True,
              overrides: Sequence[str] = ()) -> Side:
    """One of our learners on FetchPush, built from its ``her-run`` config (its tuned file too) and
    ``overrides`` (``threads=2``, ``algo.hidden=[64,64,64]``, ...).
    ``joint_cache=False``: the env copies read their joints by name, as gymnasium-robotics does."""
    import torch

    from her_rl.run.runner import make_agent
    from her_rl.config.checks import resolved, validate
    from her_rl.envs.fetch import CachedJointUtils
    from her_rl.config.compose import compose

    cfg = compose([f"algo={algo}", "env=fetch_push", f"seed={seed}", f"env.vectorization={vectorization}", *overrides])
    validate(cfg)  # an override her-run would refuse is refused here, in the same words
    config = resolved(cfg)
    threads = int(config["threads"])
    torch.set_num_threads(threads)  # building allocates; time_sides sets it again for each turn
    agent = make_agent(config, "cpu")
    if not joint_cache and vectorization == "sync":
        for env in agent.envs.envs:
            env.unwrapped._utils = sys.modules[CachedJointUtils.MODULE]

    def collect(n: int) -> int:
        done = 0
        while done < n:
            episodes = agent.collect()
            agent.remember(episodes)
            agent.inputs.update(episodes)
            done += int(episodes["length"].sum())
        return done

    def learn(m: int) -> int:
        for _ in range(m):
            agent.learn()
        return m

    side = "ours" + ("" if vectorization == "sync" else f", {vectorization} env")
    side += "" if joint_cache else ", joints by name"
    side += "".join(f", {o}" for o in overrides if not o.startswith("algo.hidden="))  # the net has its column
    return Side(side, algo, "x".join(map(str, agent.hidden)), agent.batch_size, collect, learn, agent.envs.close,
                threads=threads)


def sb3_side(kind: str, seed: int = 0, threads: int = 1) -> Side:
    """SB3 SAC + HER with our net and batch (``sac``), or rl-zoo's TQC + HER for FetchPush (``tqc``):
    collection is ``learn`` with no gradient step (the policy acts from the first step), updates are
    ``train`` calls of one gradient step each, as SB3 trains at train_freq 1, gradient_steps 1.
    ``threads``: torch threads while it is timed (SB3 leaves torch's default, one per core)."""
    import torch

    from bench import zoo

    torch.set_num_threads(threads)
    settings = {**(zoo.SAC_HER if kind == "sac" else zoo.zoo_settings("FetchPush-v4")), "learning_starts": 0}
    model = zoo.build(settings, "FetchPush-v4", {}, seed)
    model.gradient_steps = 0  # learn() only collects; updates are timed apart

    def collect(n: int) -> int:
        model.learn(total_timesteps=n, reset_num_timesteps=False)
        return n

    def learn(m: int) -> int:
        for _ in range(m):
            model.train(gradient_steps=1, batch_size=model.batch_size)
        return m

    net = "x".join(map(str, settings["net_arch"]))
    side = "sb3" if threads == 1 else f"sb3, threads={threads}"
    return Side(side, f"{kind.upper()} + HER", net, settings["batch_size"], collect, learn, model.env.close,
                threads=threads)


@contextlib.contextmanager
def every_core():
    """Processes started inside may run on every core, whatever this one is pinned to (AsyncVectorEnv
    workers inherit the affinity of the process that starts them)."""
    pinned = os.sched_getaffinity(0)
    os.sched_setaffinity(0, range(os.cpu_count() or 1))
    try:
        yield
    finally:
        os.sched_setaffinity(0, pinned)


def _per_second(fn: Callable[[int], int], count: int, chunk: int, max_s: float) -> float | None:
    """Units per second of ``fn`` called ``chunk`` at a time until ``count`` are done or ``max_s`` passed."""
    if count <= 0:
        return None
    done, start = 0, time.perf_counter()
    while done < count and (done == 0 or time.perf_counter() - start < max_s):
        done += fn(min(chunk, count - done))
    return done / (time.perf_counter() - start)


def time_sides(sides: Sequence[Side], steps: int, updates: int, repeats: int = 3,
               learn_sides: Sequence[bool] | None = None, max_update_s: float = 20.0) -> list[Rate]:
    """Best of ``repeats`` rounds; in each round every side collects ``steps`` env steps in one go,
    then takes ``updates`` gradient steps (or as many as ``max_update_s`` seconds allow; a side with
    ``learn_sides[i]`` false only collects), one side after the other, so that all see the same
    background load. Each side first collects and learns a little untimed (first calls allocate;
    HER samples whole episodes only)."""
    import torch

    learn_sides = [True] * len(sides) if learn_sides is None else list(learn_sides)
    for side, learns in zip(sides, learn_sides):
        torch.set_num_threads(side.threads)
        side.collect(100)
        if learns:
            side.learn(2)
    best = [[0.0, 0.0] for _ in sides]
    for _ in range(repeats):
        for i, (side, learns) in enumerate(zip(sides, learn_sides)):
            torch.set_num_threads(side.threads)
            best[i][0] = max(best[i][0], _per_second(side.collect, steps, steps, float("inf")) or 0.0)
            if learns:
                best[i][1] = max(best[i][1], _per_second(side.learn, updates, 1, max_update_s) or 0.0)
    return [Rate(s.side, s.learner, s.net, s.batch, c or None, u or None) for s, (c, u) in zip(sides, best)]


def load_average() -> str:
    """The machine's load average over 1, 5 and 15 minutes: how busy the other cores were."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def rate_lines(rates: Sequence[Rate]) -> list[str]:
    from bench.tables import fmt, head, line

    rows = [head(["side", "learner", "net", "batch", "env steps/s", "updates/s"], "lllrrr")]
    rows += [line([r.side, r.learner, r.net, r.batch, fmt(r.env_steps_per_s), fmt(r.updates_per_s, 1)]) for r in rates]
    return rows


def as_json(rates: Sequence[Rate], phases: dict[str, Phases]) -> dict[str, Any]:
    return {"rates": [asdict(r) for r in rates], "phases": {k: asdict(v) for k, v in phases.items()}}


__all__ = ["Rate", "Side", "as_json", "every_core", "load_average", "ours_side", "rate_lines", "sb3_side", "time_sides"]
