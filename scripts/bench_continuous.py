"""Continuous-action HER, side by side: her_rl's HER-SAC / HER-DDPG against Stable-Baselines3's SAC +
HerReplayBuffer, at the same env-step budget and with the same evaluation.

    .venv/bin/python scripts/bench_continuous.py --envs fetch_reach --seeds 0 1 2 --budget 10000 \\
        --eval-every 1000 --json reach.json
    .venv/bin/python scripts/bench_continuous.py --envs push --sides ours --seeds 0 1 2 --budget 400000 \\
        --eval-every 8000 --stop-at-target --json push.json
    .venv/bin/python scripts/bench_continuous.py --table reach.json push.json

Both sides run to the full budget unless ``--stop-at-target`` (then a run ends at its first
evaluation >= ``--target``). ``--sb3-max-seconds`` caps SB3's wall time (a 1M-step SB3 run takes
hours here); a capped run reports the steps it reached. ``--jobs 2`` runs two jobs at once, one
per core. A median over seeds counts a run that missed the target as more than what it ran (``-``
when only that bound is known). The protocol and both sides' settings: :mod:`bench.continuous`;
the Fetch envs need the ``robotics`` extra, SB3 the ``bench`` extra.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Sequence

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/ lies beside the package
from bench import continuous  # noqa: E402
from bench.jobs import run_jobs  # noqa: E402


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--envs", nargs="+", default=["push", "fetch_reach", "fetch_push"], choices=sorted(continuous.ENVS))
    p.add_argument("--sides", nargs="+", default=["ours", "sb3"], choices=["ours", "sb3"])
    p.add_argument("--algo", default="her_sac", choices=["her_sac", "her_ddpg"], help="our learner")
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--budget", type=int, required=False, default=10_000, help="env steps per run")
    p.add_argument("--eval-every", type=int, default=1_000, help="env steps between evaluations (both sides)")
    p.add_argument("--eval-episodes", type=int, default=20)
    p.add_argument("--target", type=float, default=0.9)
    p.add_argument("--stop-at-target", action="store_true", help="end a run at its first evaluation >= target")
    p.add_argument("--sb3-max-seconds", type=float, default=None)
    p.add_argument("--override", action="append", default=[], metavar="KEY=VALUE", help="extra her-run override")
    p.add_argument("--jobs", type=int, default=1, help="jobs at once (each one thread)")
    p.add_argument("--keep", type=Path, help="keep our run folders under this directory (default: temporary)")
    p.add_argument("--json", type=Path, help="write rows here (rewritten after every run)")
    p.add_argument("--table", type=Path, nargs="+", help="only print the table of these JSON files")
    args = p.parse_args(argv)

    if args.table:
        print(continuous.format_table([r for f in args.table for r in json.loads(f.read_text())["rows"]]))
        return 0
    jobs = continuous.jobs(args)
    if why := continuous.refusal(args, jobs):
        p.error(why)
    print(continuous.format_table(run_jobs(continuous.run_job, jobs, args.jobs, args.json, args)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
