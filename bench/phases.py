"""Where a training run spends its wall time: :func:`phase_profile` runs ``her-run`` for a few
iterations with a :class:`PhaseClock` wrapped around the calls of one iteration (env steps, acting,
storing, normalisation, relabelled sampling, batch tensors, the update's forward, backward and Adam
step, Polyak, evaluation, checkpointing, logging, the non-finite guard). Every wall second lands in
exactly one phase, the innermost one running; what no wrapped call covers is the loop's own Python.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Callable, Sequence
from unittest import mock

ROOT = "Python glue (loop, cycle)"
ENV = "env stepping (MuJoCo)"
EVAL = "evaluation (greedy episodes)"


class PhaseClock:
    """Exclusive wall time by phase: while a wrapped call runs, time goes to its phase, except
    while a call wrapped inside it runs; inside an ``opaque`` phase nested wrappers charge nothing."""

    def __init__(self, root: str = ROOT, clock: Callable[[], float] = time.perf_counter):
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self.stack, self.opaque, self.clock = [root], set(), clock
        self.mark = clock()
        self._undo: list[tuple[Any, str, Any, bool]] = []

    def _switch(self) -> None:
        now = self.clock()
        self.seconds[self.stack[-1]] += now - self.mark
        self.mark = now

    def start(self) -> None:
        self.mark = self.clock()

    def stop(self) -> None:
        self._switch()

    def wrap(self, owner: Any, attr: str, phase: str, opaque: bool = False) -> None:
        """Time every call of ``owner.attr`` (an instance's method, a class's or a module's function)."""
        fn, had = getattr(owner, attr), attr in vars(owner)
        if opaque:
            self.opaque.add(phase)

        def timed(*args, **kwargs):
            if self.stack[-1] in self.opaque:
                return fn(*args, **kwargs)
            self._switch()
            self.stack.append(phase)
            self.calls[phase] += 1
            try:
                return fn(*args, **kwargs)
            finally:
                self._switch()
                self.stack.pop()

        setattr(owner, attr, timed)
        self._undo.append((owner, attr, fn, had))

    def restore(self) -> None:
        for owner, attr, fn, had in reversed(self._undo):
            setattr(owner, attr, fn) if had else delattr(owner, attr)
        self._undo.clear()


def instrument(clock: PhaseClock, trainer: Any) -> None:
    """Wrap the calls of a hindsight learner's iteration and of the trainer's loop around it."""
    import torch

    import her_rl.algos.hindsight as hindsight

    agent, w = trainer.agent, clock.wrap
    w(agent.envs, "step", ENV)
    w(agent.envs, "reset", ENV)
    w(agent, "act", "acting: inputs, actor forward, noise")
    w(agent, "collect", "collection: episode arrays")
    w(agent, "remember", "store episodes")
    w(agent.inputs, "update", "normalisation statistics")
    w(agent.memory, "sample", "relabel + replay sample")
    w(agent, "tensors", "batch tensors + input normalisation")
    w(agent, "update", "update: forward, losses")
    w(torch.Tensor, "backward", "update: backward")
    for value in list(vars(agent).values()):
        if isinstance(value, torch.optim.Optimizer):
            w(value, "step", "update: Adam step")
            w(value, "zero_grad", "update: Adam step")
    w(hindsight, "polyak_update", "target Polyak step")
    w(trainer, "evaluate", EVAL, opaque=True)
    w(trainer, "save", "checkpointing")
    w(trainer.logger, "scalars", "logging, progress")
    w(trainer.progress, "update", "logging, progress")
    w(trainer.guard, "find_nonfinite", "non-finite guard")
    w(trainer.guard, "remember_good", "non-finite guard")


@dataclass
class Phases:
    iterations: int
    env_steps: int
    wall_s: float
    seconds: dict[str, float]
    calls: dict[str, int]


def phase_profile(overrides: Sequence[str], out: str) -> Phases:
    """``her-run <overrides>`` into ``out`` with every phase of its training loop timed."""
    from her_rl.config.compose import compose
    from her_rl.run.runner import run
    from her_rl.run.trainer import Trainer

    clock, train = PhaseClock(), Trainer.train

    def timed_train(self: Trainer) -> bool:
        instrument(clock, self)
        clock.start()
        try:
            return train(self)
        finally:
            clock.stop()
            clock.restore()

    with mock.patch.object(Trainer, "train", timed_train), contextlib.redirect_stdout(sys.stderr):
        results = run(compose(list(overrides)), out_dir=out)  # the run's own lines on stderr: tables on stdout
    wall = sum(clock.seconds.values())
    return Phases(int(results["iterations"]), int(results["env_steps"]), wall, dict(clock.seconds), dict(clock.calls))


def phase_lines(p: Phases) -> list[str]:
    from bench.tables import head, line

    rows = [head(["phase", "calls / iteration", "ms / iteration", "share"], "lrrr")]
    for phase, s in sorted(p.seconds.items(), key=lambda kv: -kv[1]):
        calls = p.calls.get(phase)
        rows.append(line([phase, "-" if calls is None else f"{calls / p.iterations:.3g}",
                          f"{1000 * s / p.iterations:,.1f}", f"{100 * s / p.wall_s:.1f}%"]))
    rows.append(line(["**all**", "", f"**{1000 * p.wall_s / p.iterations:,.1f}**", "100%"]))
    return rows
