"""Sync vs async vector envs for the MuJoCo Fetch tasks: env steps/s of lock-step HER collection.

    .venv/bin/python scripts/bench_fetch_vec.py --id FetchPush-v4 --num-envs 2 4 16 --batches 4 --repeats 5

Needs the robotics extra (``pip install -e ".[robotics]"``). Each vector env is built by
``her_rl.envs.make_vec`` with ``env.vectorization`` set to ``sync`` (gymnasium's SyncVectorEnv: the
copies stepped in turn in this process) or ``async`` (AsyncVectorEnv: one worker process per copy).
One batch plays as HER collection does (``her_rl.rl.her.collect_episodes``): reset every
copy, then 50 lock-step steps with random actions (drawn in advance, so only reset and step are
timed). For each number of copies both vector envs are built, warmed up with one untimed batch, then
timed in turns (sync, async, sync, async, ...; ``--repeats`` runs of ``--batches`` batches each), so
both see the same background load on a shared machine; the best and the median run are reported.
Building the vector env (starting the workers, for async) is timed separately. Prints a markdown table.
"""

from __future__ import annotations

import sys
from pathlib import Path
import argparse
import os

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/ lies beside the package
from bench.speed import fetch_vec_lines  # noqa: E402


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--id", default="FetchPush-v4")
    parser.add_argument("--num-envs", nargs="+", type=int, default=[2, 4, 16])
    parser.add_argument("--modes", nargs="+", choices=["sync", "async"], default=["sync", "async"])
    parser.add_argument("--batches", type=int, default=6, help="lock-step batches of episodes per timed run")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per mode, taken in turns")
    parser.add_argument("--horizon", type=int, default=50, help="steps per batch (Fetch episodes are 50 long)")
    args = parser.parse_args(argv)

    print(f"{args.id}, {os.cpu_count()} CPUs, load average before: {load()}")
    for text in fetch_vec_lines(args.id, args.modes, args.num_envs, args.batches, args.repeats, args.horizon):
        print(text, flush=True)
    print(f"load average after: {load()}")


if __name__ == "__main__":
    main()
