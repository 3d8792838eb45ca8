"""HER-DQN on the push and drag tasks, with and without hindsight (the HER paper's comparison).

    .venv/bin/python scripts/bench_push.py --envs push drag --seeds 0 1 2 --strategies future --json her.json
    .venv/bin/python scripts/bench_push.py --envs push drag --seeds 0 1 2 --strategies none \\
        --budget-from her.json --json none.json
    .venv/bin/python scripts/bench_push.py --table her.json none.json

A run stops when the greedy success over 100 evaluation episodes reaches ``--target`` (default
0.9), or at ``--max-steps`` / ``--max-seconds``. ``--budget-from`` gives each (env, seed) the env
steps that the runs in that JSON file used, so the no-hindsight baseline gets the same budget (and
does not stop early). The curve of each run is kept in the JSON file. A median over seeds counts a
run that missed the target as more than the budget it ran (``-`` when only that bound is known).
The protocol: :mod:`bench.push`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Sequence

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/ lies beside the package
from bench import push  # noqa: E402
from bench.jobs import run_jobs  # noqa: E402


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
        print(push.format_table([r for f in args.table for r in json.loads(f.read_text())["rows"]], args.target))
        return 0
    print(push.format_table(run_jobs(push.run_job, push.jobs(args), 1, args.json, args), args.target))
    return 0


if __name__ == "__main__":
    sys.exit(main())
