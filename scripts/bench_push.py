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
is read back from its TensorBoard events and kept in the JSON file.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence


def _curve(tb_dir: Path, start: float) -> list[tuple[int, float, float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(tb_dir), size_guidance={"scalars": 0})
    acc.Reload()
    return [(int(e.step), round(e.wall_time - start, 2), round(float(e.value), 3)) for e in acc.Scalars("eval/success_rate")]


def run_one(env: str, strategy: str, seed: int, target: float, max_steps: int, max_seconds: float,
            stop_at_target: bool, extra: Sequence[str]) -> dict[str, Any]:
    from her_rl.runner import compose, run

    overrides = [f"env={env}", "algo=her_dqn", f"seed={seed}", f"algo.strategy={strategy}", "progress=false",
                 "threads=1", f"budget.env_steps={max_steps}", f"budget.wall_time_s={max_seconds}",
                 f"eval.success_threshold={target}", f"eval.stop_when_solved={str(stop_at_target).lower()}", *extra]
    with tempfile.TemporaryDirectory(prefix="bench_push_") as tmp, contextlib.redirect_stdout(sys.stderr):
        start = time.time()
        res = run(compose(overrides), out_dir=tmp)
        curve = _curve(Path(tmp) / "tb", start)
    reached = next(((s, w, v) for s, w, v in curve if v >= target), None)
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
        hit = [r for r in mine if r["reached"]]
        steps = statistics.median([r["steps_to_target"] for r in hit]) if len(hit) == len(mine) else None
        wall = statistics.median([r["wall_to_target"] for r in hit]) if len(hit) == len(mine) else None
        lines.append(f"| **{env} {strategy}** | | {len(hit)}/{len(mine)} reached | {_fmt(steps)} (median) | "
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
                    args.json.write_text(json.dumps({"settings": vars(args) | {"json": str(args.json),
                                                     "budget_from": str(args.budget_from), "table": None},
                                                     "rows": rows}, indent=1) + "\n")
    print(format_table(rows, args.target))
    return 0


if __name__ == "__main__":
    sys.exit(main())
