"""What a finished run reports: the results dict, ``results.json`` and the run's last line."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from her_rl.folder.atomic import write_atomic_text
from her_rl.errors import OutputError
from her_rl.run.progress import count
from her_rl.folder.rundir import RESULTS


def results_of(config: dict[str, Any], state: Any, goal_env: bool, ckpt_path: Path) -> dict[str, Any]:
    """The results dict of a run (``state``: its :class:`her_rl.folder.checkpoint.RunState`)."""
    ev = state.eval or {}
    results: dict[str, Any] = {
        "algo": config["algo"]["name"], "env": config["env"]["name"], "env_id": config["env"]["id"],
        "seed": int(config["seed"]),
        "env_steps": state.env_steps, "iterations": state.iteration, "episodes": state.episodes,
        "wall_time_s": round(state.wall_time_s, 3),
        "sps": round(state.env_steps / max(state.wall_time_s, 1e-9), 1),
        "solved": state.solved_at_env_steps is not None,
        "solved_at_env_steps": state.solved_at_env_steps,
        "eval_return": ev.get("return"), "eval_terminated_rate": ev.get("terminated_rate"),
        "eval_episodes": int(config["eval"]["episodes"]),
        "checkpoint": str(ckpt_path),
    }
    for key in ("success_rate", "any_success_rate"):  # only where the task tells success
        if key in ev:
            results[f"eval_{key}"] = ev[key]
    env_kwargs = config["env"].get("kwargs") or {}
    for key in ("n", "size"):  # the sizes this env uses (bit-flip's n, deep sea's size)
        if key in env_kwargs:
            results[key] = int(env_kwargs[key])
    return results


def write(out: Path, results: dict[str, Any], saved_at: int | None = None) -> None:
    """``results.json``; if it cannot be written, an OutputError that carries the numbers and says
    which checkpoint (``saved_at``: its env step) the folder keeps."""
    try:
        write_atomic_text(out / RESULTS, json.dumps(results, indent=2) + "\n")
    except OSError as exc:
        kept = f"; the checkpoint at env step {saved_at:,} is kept" if saved_at is not None else ""
        raise OutputError(f"could not write {out / RESULTS} ({exc.strerror or exc}){kept}; the run's numbers: "
                          f"{json.dumps(results)}") from None


def shown(value: float) -> str:
    """A result as results.json holds it, to 4 significant digits: 0.99 stays 0.99 (never 1.0), 0.96 of
    100 episodes two decimals, 0.3333 of 3 four, a CartPole return 500 as 500."""
    if value == round(value, 2):
        return f"{value:.2f}" if abs(value) < 10 else f"{value:g}"
    return f"{value:.4g}"


def final_line(results: dict[str, Any], out: Path) -> str:
    """The run's last line, short enough for 100 columns: the folder names algo, env and seed (its
    results.json has the rest), given relative to the current folder when it lies below it."""
    score = (f"eval success {shown(results['eval_success_rate'])}" if "eval_success_rate" in results
             else f"eval return {shown(results['eval_return'])}")
    status = "solved" if results["solved"] else "not solved"
    where = os.path.relpath(out)
    return f"{status}: {score} at {count(results['env_steps'])} steps -> {out if where.startswith('..') else where}"


__all__ = ["final_line", "results_of", "shown", "write"]
