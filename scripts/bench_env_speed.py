"""How many env steps per second our numpy-batched goal envs run, as built for training.

    .venv/bin/python scripts/bench_env_speed.py --envs push drag bitflip --num-envs 64 256 --steps 2000

Each env is built with ``gymnasium.make_vec(id, num_envs=N)`` (the vector entry point, i.e. the
class training uses) with its default task settings (bit-flip: ``--bits``), autoreset on, so
resets are included. Random actions are drawn in advance from the action space, so only
``step`` is timed. ``--repeats`` runs of ``--steps`` step calls each after ``--warmup`` calls; the
best run is reported (the others are noise from whatever else the machine is doing). Prints a
markdown table: env steps/s = N * step calls / s.
"""

from __future__ import annotations

import sys
from pathlib import Path
import argparse

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/ lies beside the package
from bench.speed import IDS, env_speed_lines  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--envs", nargs="+", choices=sorted(IDS), default=["push", "drag", "bitflip"])
    parser.add_argument("--num-envs", nargs="+", type=int, default=[64, 256])
    parser.add_argument("--steps", type=int, default=2000, help="step calls per timed run")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs; the best is reported")
    parser.add_argument("--warmup", type=int, default=100, help="untimed step calls first")
    parser.add_argument("--actions", choices=["discrete", "continuous"], default="discrete",
                        help="push/drag action space")
    parser.add_argument("--bits", type=int, default=15, help="bit-flip n")
    args = parser.parse_args(argv)
    for text in env_speed_lines(args.envs, args.num_envs, args.steps, args.repeats, args.warmup, args.actions,
                                args.bits):
        print(text, flush=True)


if __name__ == "__main__":
    main()
