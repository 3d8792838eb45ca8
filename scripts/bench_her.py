"""Side-by-side benchmark on OUR random-goal bit-flip env: her_rl's HER-DQN vs Stable-Baselines3.

    .venv/bin/python scripts/bench_her.py --n 15 20 30 50 --seeds 0 1 2 --jobs 2 --json bench_her.json

Both sides train on ``her_rl/BitFlip-v0`` until a greedy evaluation on 100 episodes reaches success
>= 0.95; for each run the env steps and wall seconds at that evaluation, then a markdown table per
n (per seed rows, medians per side, ratios ours/SB3) and one line per n. ``--jobs 2`` runs two jobs
at once (one per core, each one thread), in the order n, seed, side, so ours and SB3 of the same
seed usually run side by side under the same load. The protocol: :mod:`bench.bitflip`.
Stable-Baselines3 is the ``bench`` extra.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/ lies beside the package
from bench import bitflip, peers  # noqa: E402


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, nargs="+", default=[15, 20, 30, 50], help="numbers of bits (default 15 20 30 50)")
    p.add_argument("--eval-every", type=int, default=bitflip.EVAL_EVERY, help="env steps between evaluations, both sides")
    p.add_argument("--jobs", type=int, default=1, help="jobs at once (1 or 2 on this 2-core machine)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--max-steps", type=int, default=150_000,
                   help="SB3 env-step cap per run (also sets SB3's epsilon schedule length); ours uses its own budget")
    p.add_argument("--sb3-max-seconds", type=float, default=400.0, help="SB3 wall cap per run (default 400)")
    p.add_argument("--sb3-exploration-fraction", type=float, default=0.1,
                   help="SB3 epsilon decays 1 -> 0.05 over this fraction of --max-steps (SB3 default 0.1)")
    p.add_argument("--only", choices=["ours", "sb3", "both"], default="both")
    p.add_argument("--threads", type=int, default=1, help="torch threads for both sides (default 1: fastest here)")
    p.add_argument("--ours-override", action="append", default=[], metavar="KEY=VALUE",
                   help="extra her-run override for ours (repeatable), e.g. budget.wall_time_s=400")
    p.add_argument("--json", type=Path, default=None, help="write the raw rows (and settings) here")
    return p


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    return parser().parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    if args.only != "ours" and peers.missing():
        p.error(f"{peers.missing()}; --only ours runs without it")
    print(bitflip.run(args), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
