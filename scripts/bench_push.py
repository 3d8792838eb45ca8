"""HER-DQN on the push and drag tasks, with and without hindsight (the HER paper's comparison).

    .venv/bin/python scripts/bench_push.py --envs push drag --seeds 0 1 2 --strategies future --json her.json
    .venv/bin/python scripts/bench_push.py --envs push drag --seeds 0 1 2 --strategies none \\
        --budget-from her.json --json none.json
    .venv/bin/python scripts/bench_push.py --table her.json none.json

Every run is ``her-run algo=her_dqn env=<env> seed=<s> algo.strategy=<strategy>`` with no other
override (the env's tuned file applies, as on the command line), one torch thread. A run stops
when the greedy success over 100 evaluation episodes reaches ``--target`` (default 0.9), or at
``--max-steps`` / ``--max-seconds``. ``--budget-from`` gives each (env, seed) the env steps that
the runs in that JSON file used, so the no-hindsight baseline gets the same budget (and does not
stop early). Wall seconds count from the call of ``run`` (agent construction and every
evaluation included). The curve of each run (eval success against env steps and wall seconds)
is read back from its ``metrics.jsonl`` and kept in the JSON file. A median over seeds counts a run
that missed the target as more than the budget it ran (``-`` when only that bound is known).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Sequence

from her_rl.bench import first_reaching, run_ours, to_target, write_report


def run_one(env: str, strategy: str, seed: int, target: float, max_steps: int, max_seconds: float,
            stop_at_target: bool, extra: Sequence[str]) -> dict[str, Any]:
    overrides = [f"env={env}", "algo=her_dqn", f"seed={seed}", f"algo.strategy={strategy}", "progress=false",
                 "threads=1", f"budget.env_steps={max_steps}", f"budget.wall_time_s={max_seconds}",
                 f"eval.success_threshold={target}", f"eval.stop_when_solved={str(stop_at_target).lower()}", *extra]
    ours = run_ours(overrides)
    res, curve = ours.results, ours.curve()
    reached = first_reaching(curve, target)
    return {"env": env, "strategy": strategy, "seed": seed, "reached": reached is not None,
            "steps_to_target": reached[0] if reached else None, "wall_to_target": reached[1] if reached else None,
            "env_steps": res["env_steps"], "wall_s": res["wall_time_s"], "final_success": res["eval_success_rate"],
            "best_success": max((v for _, _, v in curve), default=0.0), "curve": curve, "overrides": overrides}


def _fmt(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def format_table(rows: Sequence[dict[str, Any]], target: float) -> str:
    lines = [f"| env | strategy | seed | env steps to {target} | wall s to {target} | budget (env steps) | "
             f"success at end of budget | best success |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['env']} | {r['strategy']} | {r['seed']} | {_fmt(r['steps_to_target'])} | "
                     f"{_fmt(r['wall_to_target'], 1)} | {r['env_steps']:,} | {r['final_success']:.2f} | "
                     f"{r['best_success']:.2f} |")
    groups = dict.fromkeys((r["env"], r["strategy"]) for r in rows)
    for env, strategy in groups:
        mine = [r for r in rows if (r["env"], r["strategy"]) == (env, strategy)]
        hit, steps, wall = to_target(mine)
        lines.append(f"| **{env} {strategy}** | | {hit}/{len(mine)} reached | {_fmt(steps)} (median) | "
                     f"{_fmt(wall, 1)} (median) | | | |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--envs", nargs="+", default=["push", "drag"])
    p.add_argument("--strategies", nargs="+", default=["future"])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--target", type=float, default=0.9)
    p.add_argument("--max-steps", type=int, default=5_000_000)
    p.add_argument("--max-seconds", type=float, default=600.0)
    p.add_argument("--budget-from", type=Path, help="JSON of earlier runs: same env steps per (env, seed), no early stop")
    p.add_argument("--override", action="append", default=[], metavar="KEY=VALUE", help="extra her-run override")
    p.add_argument("--json", type=Path, help="write rows here (rewritten after every run)")
    p.add_argument("--table", type=Path, nargs="+", help="only print the table of these JSON files")
    args = p.parse_args(argv)

    if args.table:
        rows = [r for f in args.table for r in json.loads(f.read_text())["rows"]]
        print(format_table(rows, args.target))
        return 0
    budgets = {}
    if args.budget_from:
        budgets = {(r["env"], r["seed"]): r["env_steps"] for r in json.loads(args.budget_from.read_text())["rows"]}
    rows: list[dict[str, Any]] = []
    for env in args.envs:
        for strategy in args.strategies:
            for seed in args.seeds:
                steps = budgets.get((env, seed), args.max_steps)
                print(f"[bench] {env} {strategy} seed {seed} (budget {steps:,} steps) ...", file=sys.stderr, flush=True)
                row = run_one(env, strategy, seed, args.target, steps, args.max_seconds,
                              stop_at_target=not args.budget_from, extra=args.override)
                print(f"[bench] {({k: v for k, v in row.items() if k not in ('curve', 'overrides')})}",
                      file=sys.stderr, flush=True)
                rows.append(row)
                if args.json:
                    write_report(args.json, {"settings": vars(args), "rows": rows})
    print(format_table(rows, args.target))
    return 0


if __name__ == "__main__":
    sys.exit(main())
