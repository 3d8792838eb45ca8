"""Sync vs async vector envs for the MuJoCo Fetch tasks: env steps/s of lock-step HER collection.

    .venv/bin/python scripts/bench_fetch_vec.py --id FetchPush-v4 --num-envs 2 4 16 --batches 4 --repeats 5

Needs the robotics extra (``pip install -e ".[robotics]"``). Each vector env is built by
``her_rl.envs.make_vec`` with ``env.vectorization`` set to ``sync`` (gymnasium's SyncVectorEnv: the
copies stepped in turn in this process) or ``async`` (AsyncVectorEnv: one worker process per copy).
One batch plays as HER collection does (``her_rl.algos.offpolicy.collect_episodes``): reset every
copy, then 50 lock-step steps with random actions (drawn in advance, so only reset and step are
timed). For each number of copies both vector envs are built, warmed up with one untimed batch, then
timed in turns (sync, async, sync, async, ...; ``--repeats`` runs of ``--batches`` batches each), so
both see the same background load on a shared machine; the best and the median run are reported.
Building the vector env (starting the workers, for async) is timed separately. Prints a markdown table.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from her_rl.envs import make_vec


def one_run(envs, actions: np.ndarray, batches: int, seed: int) -> float:
    """Seconds for ``batches`` lock-step batches (reset + len(actions) steps each)."""
    start = time.perf_counter()
    for b in range(batches):
        envs.reset(seed=seed + b)
        for a in actions:
            envs.step(a)
    return time.perf_counter() - start


def bench(env_id: str, modes: list[str], num_envs: int, batches: int, repeats: int, horizon: int) -> dict:
    """{mode: (seconds to build, best env steps/s, median env steps/s)} for one number of copies."""
    built, rates = {}, {mode: [] for mode in modes}
    try:
        for mode in modes:
            start = time.perf_counter()
            envs = make_vec({"name": "bench", "id": env_id, "kwargs": {}, "vectorization": mode}, num_envs, seed=0)
            built[mode] = (envs, time.perf_counter() - start)
        actions = np.stack([built[modes[0]][0].action_space.sample() for _ in range(horizon)])
        for mode in modes:
            one_run(built[mode][0], actions, 1, seed=1000)  # warm-up
        for _ in range(repeats):
            for mode in modes:
                rates[mode].append(batches * horizon * num_envs / one_run(built[mode][0], actions, batches, seed=0))
    finally:
        for envs, _ in built.values():
            envs.close()
    return {mode: (built[mode][1], max(rates[mode]), float(np.median(rates[mode]))) for mode in modes}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--id", default="FetchPush-v4")
    parser.add_argument("--num-envs", nargs="+", type=int, default=[2, 4, 16])
    parser.add_argument("--modes", nargs="+", choices=["sync", "async"], default=["sync", "async"])
    parser.add_argument("--batches", type=int, default=6, help="lock-step batches of episodes per timed run")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per mode, taken in turns")
    parser.add_argument("--horizon", type=int, default=50, help="steps per batch (Fetch episodes are 50 long)")
    args = parser.parse_args(argv)

    print(f"{args.id}, {os.cpu_count()} CPUs, load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("| copies | mode | build s | env steps/s (best) | env steps/s (median) |")
    print("|---:|---|---:|---:|---:|")
    for n in args.num_envs:
        for mode, (build_s, best, median) in bench(args.id, args.modes, n, args.batches, args.repeats,
                                                   args.horizon).items():
            print(f"| {n} | {mode} | {build_s:.2f} | {best:,.0f} | {median:,.0f} |", flush=True)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
