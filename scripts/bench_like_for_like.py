"""Continuous HER like for like against Stable-Baselines3: ``--pairs zoo`` (our HER-DDPG against SB3 at
RL-Zoo's hyperparameters) or ``--pairs twins`` (her_sac / her_ddpg / her_td3 against SB3 SAC / DDPG /
TD3 with our values), one protocol on both sides (:mod:`bench.likeforlike`).

    .venv/bin/python scripts/bench_like_for_like.py --envs fetch_reach --pairs zoo --seeds 0 1 2 \\
        --budget 10000 --eval-every 1000 --eval-episodes 50 --json reach_zoo.json --png reach_zoo.png
    .venv/bin/python scripts/bench_like_for_like.py --table reach_zoo.json reach_twins.json --png curves.png

Prints the tables (per evaluation point: median and IQM with 95% bootstrap intervals; at matched
wall seconds; per run). Jobs run one at a time unless ``--jobs``; each uses one torch thread.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Sequence

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/ lies beside the package
from bench import likeforlike as lfl  # noqa: E402
from bench.continuous import ENVS  # noqa: E402
from bench.jobs import run_jobs  # noqa: E402


def report(rows: list, png: Path | None) -> None:
    print(lfl.step_table(rows), lfl.wall_table(rows), lfl.run_table(rows), sep="\n\n")
    if png:
        lfl.plot(rows, str(png))


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--envs", nargs="+", default=["fetch_reach"], choices=sorted(ENVS))
    p.add_argument("--pairs", default="zoo", choices=lfl.PAIRS)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--budget", type=int, default=10_000, help="env steps per run")
    p.add_argument("--eval-every", type=int, default=1_000, help="env steps between evaluations (both sides)")
    p.add_argument("--eval-episodes", type=int, default=50)
    p.add_argument("--sb3-max-seconds", type=float, default=None, help="SB3's wall cap (checked at evaluations)")
    p.add_argument("--ours-max-seconds", type=float, default=None, help="our wall cap (budget.wall_time_s)")
    p.add_argument("--jobs", type=int, default=1, help="jobs at once (each one thread)")
    p.add_argument("--json", type=Path, help="write rows here (rewritten after every run)")
    p.add_argument("--png", type=Path, help="write the curves here")
    p.add_argument("--table", type=Path, nargs="+", help="only report on these JSON files")
    args = p.parse_args(argv)

    if args.table:
        report([r for f in args.table for r in json.loads(f.read_text())["rows"]], args.png)
        return 0
    jobs = lfl.jobs(args.pairs, args.envs, args.seeds, args.budget, args.eval_every, args.eval_episodes,
                    args.sb3_max_seconds, args.ours_max_seconds)
    if why := lfl.refusal(jobs):
        p.error(why)
    report(run_jobs(lfl.run_job, jobs, args.jobs, args.json, args), args.png)
    return 0


if __name__ == "__main__":
    sys.exit(main())
