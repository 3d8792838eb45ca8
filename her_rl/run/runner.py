"""The one training driver: config -> checks -> env + agent -> training loop -> logs, checkpoint.

A run is first checked without writing anything (:mod:`her_rl.run.plan`, the gate: values, the
env's spaces, the run folder, the checkpoint to resume); :func:`start` then locks the run folder, seeds
everything, builds the agent (:func:`make_agent`) and trains it (:mod:`her_rl.run.trainer`: greedy
evaluations, atomic checkpoints, the non-finite guard, stopping at the budget, once solved or on a
signal), and writes ``results.json`` (:mod:`her_rl.run.results`). ``resume=true`` continues the run in
the folder from its saved config and checkpoint. Algorithms only implement the interface in
``her_rl/agent.py``. The runner only trains: ``load=``, the gate's :class:`~her_rl.run.plan.Evaluation`,
is handed by her-run and ``her_rl.train`` to the saved side (:mod:`her_rl.saved.evaluate`).

A new run, a resumed one, ``her-run load=`` and ``her_rl.load`` all make their agent with
:func:`make_agent` (built to train, or only to act), so an agent is built from a config one way and a
saved state that does not fit it is one line. A saved state is checked before it is loaded: every
float in it finite (weights, optimiser moments, input statistics, the replay memory) and every tensor
of the shape this config builds; after loading, each optimiser's moments of its parameters' shapes
(torch checks neither).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig

from her_rl.config.registry import build_agent
from her_rl.config.saved import describe
from her_rl.errors import CheckpointError, OutputError, one_line, outside, printable
from her_rl.folder import checkpoint
from her_rl.folder.rundir import RESULTS
from her_rl.folder.checkpoint import RunState
from her_rl.rl.utils import set_seed
from her_rl.run import requeue, results
from her_rl.run.guard import components
from her_rl.run.plan import Evaluation, Plan, gate, given_overrides, plan_run
from her_rl.run.signals import resume_command
from her_rl.run.trainer import Trainer


ENV_SNAPSHOT = "envs"
"""The key of a vector env's own snapshot (her_rl/envs/state.py): its attributes may rightly hold inf
(an unbounded space's bounds), and restoring it checks it against the env."""

SELF_CHECKED = ("memory", "collector")
"""Entries whose own ``load_state_dict`` checks their shapes (a replay memory's length is the number of
transitions stored) and says what is wrong in its own words."""

CHUNK = 1 << 24  # elements per isfinite pass: a large replay memory is checked without a copy of its size


def device_name(name: str) -> str:
    """``auto``: cuda when there is one (the config check already refused a missing cuda)."""
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return name


def _leaves(state: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    """``(path, value)`` of every leaf of a nested state (dicts, lists, tuples), env snapshots left out."""
    if isinstance(state, Mapping):
        for key, value in state.items():
            if key != ENV_SNAPSHOT:
                yield from _leaves(value, (*path, str(key)))
    elif isinstance(state, (list, tuple)):
        for i, value in enumerate(state):
            yield from _leaves(value, (*path, str(i)))
    else:
        yield path, state


def _finite(value: Any) -> bool:
    if isinstance(value, torch.Tensor):
        if not (value.is_floating_point() or value.is_complex()):
            return True
        return all(bool(torch.isfinite(part).all()) for part in value.reshape(-1).split(CHUNK))
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "fc":
            return True
        flat = value.reshape(-1)
        return all(bool(np.isfinite(flat[i:i + CHUNK]).all()) for i in range(0, flat.size, CHUNK))
    if isinstance(value, float):
        return math.isfinite(value)
    return True


def _name(path: tuple[str, ...]) -> str:
    return "/".join(path)


def check_state(agent: Any, state: Mapping[str, Any], path: str | Path | None, algo: str) -> None:
    """One CheckpointError if a float in ``state`` is NaN or inf, or a tensor's shape is not the one
    ``agent`` (freshly built from the run's config) has there (:data:`SELF_CHECKED` entries are
    compared by their owners on loading)."""
    for where, value in _leaves(state):
        if not _finite(value):
            raise CheckpointError(f"cannot load checkpoint {path}: its agent entry '{_name(where)}' holds NaN or inf "
                                  "(saved from a run that diverged, or edited)")
    fresh = dict(_leaves({k: v for k, v in agent.state_dict().items() if k not in SELF_CHECKED}))
    for where, value in _leaves({k: v for k, v in state.items() if k not in SELF_CHECKED}):
        want = fresh.get(where)
        # uint8: RNG states, sized by device; empty: a placeholder sized on first use (RND's running return)
        if not isinstance(want, torch.Tensor) or want.dtype == torch.uint8 or want.numel() == 0:
            continue
        got = tuple(value.shape) if isinstance(value, (torch.Tensor, np.ndarray)) else None
        if got != tuple(want.shape):
            what = f"has shape {got}" if got is not None else f"is a {type(value).__name__}, not a tensor"
            raise CheckpointError(f"cannot load checkpoint {path}: its agent entry '{_name(where)}' {what}, but algo "
                                  f"'{algo}' with this config has shape {tuple(want.shape)} there")


def check_optimizers(agent: Any, path: str | Path | None) -> None:
    """Loaded optimiser moments of their parameters' shapes: torch loads any shape, and the first
    update would fail on it (or broadcast) after the run folder is taken."""
    for name, optimizer in components(agent)[1]:
        params = [p for group in optimizer.param_groups for p in group["params"]]
        for i, param in enumerate(params):
            for key, value in optimizer.state.get(param, {}).items():
                if key != "step" and isinstance(value, torch.Tensor) and value.shape != param.shape:
                    raise CheckpointError(f"cannot load checkpoint {path}: its agent entry '{name}/state/{i}/{key}' "
                                          f"has shape {tuple(value.shape)}, but that parameter has shape "
                                          f"{tuple(param.shape)}")


def load_state(agent: Any, state: dict[str, Any], path: str | Path | None, algo: str) -> None:
    """Load an agent state (a checkpoint's ``agent``); one CheckpointError naming ``path`` if it does not fit."""
    check_state(agent, state, path, algo)
    try:
        agent.load_state_dict(state)
    except Exception as exc:  # key or shape mismatches surface as KeyError/RuntimeError/ValueError
        raise CheckpointError(f"cannot load checkpoint {path}: its agent state does not fit algo '{algo}' "
                              f"({outside(one_line(exc)[:300])})") from None
    check_optimizers(agent, path)


def make_agent(config: dict[str, Any], device: str = "cpu", *, inference: bool = False,
               state: dict[str, Any] | None = None, source: str | Path | None = None, checked: bool = False) -> Any:
    """The agent of a run's resolved ``config`` on ``device`` (``cpu``, ``cuda``, ``auto``).

    ``inference``: only what acting needs (networks, input statistics), no training envs and no
    replay memory. ``state``: a saved agent state to load (its replay memory too, unless
    ``inference``), checked first (see :func:`check_state`); ``source`` is the checkpoint it came
    from, named if the state does not fit. ``checked``: the config passed :func:`her_rl.config.checks.check`
    (a plan's), so the learner does not check its values again.
    """
    agent = build_agent(config["algo"], env=config["env"], seed=int(config.get("seed", 0)),
                        device=device_name(device), inference=inference, checked=checked)
    if state is not None:
        if inference:
            state = {k: v for k, v in state.items() if k != "memory"}
        load_state(agent, state, source, config["algo"]["name"])
    return agent


def main(overrides: list[str], out_dir: str | Path | None = None) -> dict[str, Any]:
    """``her_rl.train``'s training, without its checks of the arguments' types (scripts, tests)."""
    return start(gate(overrides, out_dir))


def start(plan: Plan | Evaluation) -> dict[str, Any]:
    """The gate's checked plan trained, its folder released at the end."""
    if isinstance(plan, Evaluation):  # the saved side's, which imports this folder: it cannot be called from here
        raise TypeError("load= evaluates a saved run: her_rl.train or her_rl.saved.evaluate.evaluate_checkpoint "
                        "takes it, not the training runner")
    try:
        return train(plan)
    finally:
        plan.release()


def run(cfg: DictConfig | dict[str, Any], out_dir: str | Path | None = None,
        overrides: list[str] | None = None) -> dict[str, Any]:
    """Train a config composed already (a sweep's job, which Hydra composed; a script's); returns the
    results dict.

    ``overrides``: the keys given on the command line; with ``resume`` the run folder's saved
    config is the base and only these are compared with it. None (a config built in Python, not
    through Hydra): the whole config is compared. ``her_rl.run.runner.main`` passes them for you.
    """
    return start(plan_run(cfg, out_dir, given_overrides(overrides)))


def train(plan: Plan) -> dict[str, Any]:
    """Run a checked plan to its end: seed, build (and on resume restore) the agent, take the
    folder, train, write ``results.json`` and print the run's last line."""
    config, saved = plan.config, plan.saved
    torch.set_num_threads(int(config["threads"]))
    set_seed(int(config["seed"]))
    agent = make_agent(config, config["device"], state=saved["agent"] if saved else None, source=plan.checkpoint,
                       checked=True)
    state = RunState.restore(saved["runner"], plan.checkpoint) if saved else RunState()
    if saved is not None:
        checkpoint.set_rng_state(saved["rng"])
    plan.take_folder(state.env_steps)  # every check passed: from here on the folder is ours and may be written
    (plan.out / RESULTS).unlink(missing_ok=True)  # an earlier end's results would name a checkpoint about to change
    if saved is not None:
        requeue.clear(plan.out)
        print(printable(f"resumed from {plan.checkpoint} at env step {state.env_steps:,}"
                        + (f"; changed: {describe(plan.changes)}" if plan.changes else "")))
    elif config["resume"] == "auto":
        print(printable(f"resume=auto: no checkpoint in {plan.out}; starting a new run"))
    trainer = Trainer(plan, agent, state)
    saved_final = trainer.train()
    trainer.signals.end_run(plan.out, state.env_steps, saved_final, config["env"].get("id"))  # after a signal: exits here
    numbers = trainer.results()
    if not saved_final:  # results.json would name a checkpoint that is not on disk
        kept = (f"the checkpoint at env step {trainer.saved_at:,} is kept ({resume_command(plan.out, config['env'].get('id'))} "
                "continues from it)" if trainer.saved_at is not None else "no checkpoint was written")
        raise OutputError(f"could not write the final checkpoint {plan.checkpoint}; {kept}; {RESULTS} was not "
                          f"written; the run's numbers: {json.dumps({k: v for k, v in numbers.items() if k != 'checkpoint'})}")
    trainer.check_folder()  # results.json is written by path: into the folder the run took, or not at all
    results.write(plan.out, numbers, trainer.saved_at)
    print(printable(results.final_line(numbers, plan.out)))
    return numbers


__all__ = ["check_optimizers", "check_state", "device_name", "load_state", "main", "make_agent", "run", "start",
           "train"]
