"""The one training driver: config -> checks -> env + agent -> training loop -> logs, checkpoint.

A run is first checked without writing anything (:mod:`her_rl.run.plan`, the gate: values, the
env's spaces, the run folder, the checkpoint to resume); :func:`start` then locks the run folder, seeds
everything, builds the agent (:mod:`her_rl.run.build`) and trains it (:mod:`her_rl.run.trainer`: greedy
evaluations, atomic checkpoints, the non-finite guard, stopping at the budget, once solved or on a
signal), and writes ``results.json`` (:mod:`her_rl.run.results`). ``resume=true`` continues the run in
the folder from its saved config and checkpoint. Algorithms only implement the interface in
``her_rl/agent.py``. The runner only trains: ``load=``, the gate's :class:`~her_rl.run.plan.Evaluation`,
is handed by her-run and ``her_rl.train`` to the saved side (:mod:`her_rl.saved.evaluate`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig

from her_rl.folder import checkpoint
from her_rl.run import requeue, results
from her_rl.run.build import make_agent
from her_rl.errors import OutputError, printable
from her_rl.run.plan import Evaluation, Plan, gate, given_overrides, plan_run
from her_rl.config.saved import describe
from her_rl.rl.utils import set_seed
from her_rl.folder.rundir import RESULTS
from her_rl.folder.state import RunState
from her_rl.run.signals import resume_command
from her_rl.run.trainer import Trainer

__all__ = ["main", "run", "start", "train"]


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
