"""HER-DQN on the push and drag tasks, with and without hindsight (the HER paper's comparison).

Every run is ``her-run algo=her_dqn env=<env> seed=<s> algo.strategy=<strategy>`` with no other
override (the env's tuned file applies, as on the command line), one torch thread, stopped when the
greedy success over 100 evaluation episodes reaches the target, or at its env-step or wall cap.
A baseline given the budgets of earlier runs (:func:`budgets_from`) runs them whole. Wall seconds
count from the call of ``run`` (agent construction and every evaluation included); the curve of
each run is read back from its ``metrics.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Sequence

from bench.ours import run_ours
from bench.rows import target_row
from bench.tables import fmt, target_table


def run_one(env: str, strategy: str, seed: int, target: float, max_steps: int, max_seconds: float,
            stop_at_target: bool, extra: Sequence[str]) -> dict[str, Any]:
    overrides = [f"env={env}", "algo=her_dqn", f"seed={seed}", f"algo.strategy={strategy}", "progress=false",
                 "threads=1", f"budget.env_steps={max_steps}", f"budget.wall_time_s={max_seconds}",
                 f"eval.success_threshold={target}", f"eval.stop_when_solved={str(stop_at_target).lower()}", *extra]
    ours = run_ours(overrides)
    res, curve = ours.results, ours.curve()
    return {"env": env, "strategy": strategy, "seed": seed,
            **target_row(curve, target, env_steps=res["env_steps"], wall_s=res["wall_time_s"],
                         final_success=res["eval_success_rate"]),
            "curve": curve, "overrides": overrides}


def budgets_from(path: Path) -> dict[tuple[str, int], int]:
    """(env, seed) -> the env steps the runs in an earlier JSON file used."""
    return {(r["env"], r["seed"]): r["env_steps"] for r in json.loads(Path(path).read_text())["rows"]}


def run_job(job: tuple[str, str, int, int, argparse.Namespace]) -> dict[str, Any]:
    env, strategy, seed, steps, args = job
    print(f"[bench] {env} {strategy} seed {seed} (budget {steps:,} steps) ...", file=sys.stderr, flush=True)
    row = run_one(env, strategy, seed, args.target, steps, args.max_seconds, stop_at_target=not args.budget_from,
                  extra=args.override)
    print(f"[bench] {({k: v for k, v in row.items() if k not in ('curve', 'overrides')})}", file=sys.stderr, flush=True)
    return row


def jobs(args: argparse.Namespace) -> list[tuple[str, str, int, int, argparse.Namespace]]:
    budgets = budgets_from(args.budget_from) if args.budget_from else {}
    return [(env, strategy, seed, budgets.get((env, seed), args.max_steps), args)
            for env in args.envs for strategy in args.strategies for seed in args.seeds]


def format_table(rows: Sequence[dict[str, Any]], target: float) -> str:
    def cells(r: dict[str, Any]) -> list[Any]:
        return [r["env"], r["strategy"], r["seed"], fmt(r["steps_to_target"]), fmt(r["wall_to_target"], 1),
                f"{r['env_steps']:,}", f"{r['final_success']:.2f}", f"{r['best_success']:.2f}"]

    return target_table(rows, ["env", "strategy", "seed", f"env steps to {target}", f"wall s to {target}",
                               "budget (env steps)", "success at end of budget", "best success"], "llrrrrrr", cells,
                        lambda r: (f"**{r['env']} {r['strategy']}**", ""))
