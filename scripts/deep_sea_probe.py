"""Watch RND-PPO explore deep sea: how deep along the all-right path it has been, and how likely
its policy is to get there.

Every ``--every`` iterations one line: env steps, seconds, the frontier (the deepest diagonal cell
any training episode has visited), the env step of the first rewarding training episode, P(reach k)
at a few depths, the lowest such probability up to the frontier, and the intrinsic reward per step.
It stops when the greedy policy goes right on every diagonal cell after the reward was found. Used
to screen the deep sea settings (docs/notes.md, deep sea settings):

    python scripts/deep_sea_probe.py --size 30 --seed 0 --budget 600000 algo.num_envs=16 algo.epochs=8

The run is built as ``her-run algo=rnd_ppo env=deep_sea`` would build it, but trained without the
runner, so its seeding differs from a her-run run of the same seed (:mod:`bench.probe`).
"""

from __future__ import annotations

import sys
from pathlib import Path
import argparse

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/ lies beside the package
from bench.probe import probe  # noqa: E402


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size", type=int, default=30)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--budget", type=int, default=600_000, help="env steps")
    p.add_argument("--every", type=int, default=25, help="iterations between lines")
    p.add_argument("overrides", nargs="*", help="her-run overrides, e.g. algo.epochs=8")
    args = p.parse_args(argv)
    return probe(args.size, args.seed, args.budget, args.every, args.overrides)


if __name__ == "__main__":
    main()
