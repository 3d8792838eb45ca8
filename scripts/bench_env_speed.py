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

import argparse
import time

import gymnasium as gym
import numpy as np

import her_rl  # noqa: F401  (registers the ids)

IDS = {"push": "her_rl/Push-v0", "drag": "her_rl/Drag-v0", "bitflip": "her_rl/BitFlip-v0"}


def bench(name: str, num_envs: int, steps: int, repeats: int, warmup: int, kwargs: dict) -> tuple[str, float]:
    """(class name, best env steps per second) for one env at one batch size."""
    envs = gym.make_vec(IDS[name], num_envs=num_envs, seed=0, **kwargs)
    envs.action_space.seed(0)
    actions = np.stack([envs.action_space.sample() for _ in range(steps)])
    envs.reset(seed=0)
    for a in actions[:warmup]:
        envs.step(a)
    best = 0.0
    for _ in range(repeats):
        start = time.perf_counter()
        for a in actions:
            envs.step(a)
        best = max(best, steps * num_envs / (time.perf_counter() - start))
    return type(envs).__name__, best


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

    print("| env | class | copies | env steps/s | step calls/s |")
    print("|---|---|---:|---:|---:|")
    for name in args.envs:
        kwargs = {"n": args.bits} if name == "bitflip" else {"actions": args.actions}
        for n in args.num_envs:
            cls, rate = bench(name, n, args.steps, args.repeats, min(args.warmup, args.steps), kwargs)
            print(f"| {name} | {cls} | {n} | {rate:,.0f} | {rate / n:,.0f} |", flush=True)


if __name__ == "__main__":
    main()
