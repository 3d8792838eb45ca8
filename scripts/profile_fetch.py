"""FetchPush: where a training iteration's wall time goes, and env steps/s and updates/s of ours
beside Stable-Baselines3's, timed in one process, one after the other.

    .venv/bin/python scripts/profile_fetch.py --core 1 --steps 1000 --updates 200 --repeats 3 --phases 30

Needs the robotics and bench extras (sb3-contrib for TQC). Each side: ``--steps`` env steps of
collection with the exploring policy, then ``--updates`` gradient steps on relabelled batches
(:mod:`bench.profile`), sides in turns, best of ``--repeats``. Ours: her_ddpg and her_sac
(FetchPush tuned files: 2 episodes per cycle); her_ddpg's collection again with the joints read by
name (the env as gymnasium-robotics ships it) and with ``env.vectorization=async``. SB3: SAC + HER
with our net and batch, rl-zoo's TQC + HER (512x512x512, batch 2048), on the env as shipped.
``--phases N``: also ``her-run`` N iterations of each of our learners with every phase timed (:mod:`bench.phases`).
``--variant "threads=2 algo.hidden=[64,64,64]"`` (repeatable): one more side of the first learner
with these ``her-run`` overrides, e.g. to see what threads and net width do to its updates/s.
``--peer-threads 1 2``: each peer timed on one torch thread and on two (SB3 leaves torch's default).
"""

from __future__ import annotations

import sys
from pathlib import Path
import argparse
import json
import os
import tempfile

from hydra.errors import HydraException
from omegaconf.errors import OmegaConfBaseException

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/ lies beside the package
from bench.peers import missing  # noqa: E402
from bench.phases import phase_lines, phase_profile  # noqa: E402
from bench.profile import as_json, every_core, load_average, ours_side, rate_lines, sb3_side, time_sides  # noqa: E402
from her_rl.cli import hydra_message
from her_rl.errors import ConfigError


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=1000, help="env steps of collection timed per side")
    parser.add_argument("--updates", type=int, default=200, help="gradient steps timed per side ...")
    parser.add_argument("--max-update-s", type=float, default=20.0, help="... or as many as fit in this many s")
    parser.add_argument("--algos", nargs="+", default=["her_ddpg", "her_sac"])
    parser.add_argument("--peers", nargs="*", default=["sac", "tqc"], choices=["sac", "tqc"])
    parser.add_argument("--peer-threads", nargs="+", type=int, default=[1], metavar="N",
                        help="time each peer at each of these torch thread counts (SB3's own default: one per core)")
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds, sides in turns; the best round is kept")
    parser.add_argument("--no-async", action="store_true", help="skip the first learner with env.vectorization=async")
    parser.add_argument("--phases", type=int, default=0, help="her-run N iterations per learner, timed by phase")
    parser.add_argument("--core", type=int, default=None, help="pin this process to one CPU core")
    parser.add_argument("--variant", action="append", default=[], metavar="OVERRIDES",
                        help="one more side of the first learner with these space-separated her-run overrides")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None, help="also write the numbers to this JSON file")
    args = parser.parse_args(argv)
    if not all(1 <= n <= 1024 for n in args.peer_threads):  # the bound her-run's threads= has
        parser.error(f"--peer-threads: each count must be 1 to 1024, got {' '.join(map(str, args.peer_threads))}")
    if args.peers and missing():  # one line, not a traceback, without the bench extra
        parser.error(missing())
    if args.core is not None:
        os.sched_setaffinity(0, {args.core})

    print(f"FetchPush-v4, {os.cpu_count()} CPUs, core {args.core if args.core is not None else 'any'}, "
          f"load average before: {load_average()}", flush=True)
    sides = [ours_side(a, args.seed) for a in args.algos]
    for variant in args.variant:
        try:
            sides.append(ours_side(args.algos[0], args.seed, overrides=variant.split()))
        except (HydraException, OmegaConfBaseException, ConfigError) as exc:  # one line, not a traceback
            message = exc if isinstance(exc, ConfigError) else hydra_message(exc, variant.split())
            parser.error(f"--variant {variant!r}: {message}")
    learns = [True] * len(sides)
    sides.append(ours_side(args.algos[0], args.seed, joint_cache=False))  # the env as gymnasium-robotics ships it
    if not args.no_async:
        with every_core():  # its worker processes may use the other core (which may be busy)
            sides.append(ours_side(args.algos[0], args.seed, vectorization="async"))
    learns += [False] * (len(sides) - len(learns))  # the collection-only sides
    sides += [sb3_side(kind, args.seed, threads) for kind in args.peers for threads in args.peer_threads]
    learns += [True] * (len(sides) - len(learns))
    try:
        rates = time_sides(sides, args.steps, args.updates, args.repeats, learns, args.max_update_s)
    finally:
        for side in sides:
            side.close()
    print("\n".join(rate_lines(rates)), flush=True)
    phases = {}
    for algo in args.algos if args.phases else []:
        with tempfile.TemporaryDirectory(prefix="profile_") as out:
            overrides = [f"algo={algo}", "env=fetch_push", f"seed={args.seed}", "progress=false",
                         f"budget.env_steps={args.phases * 100}", "eval.stop_when_solved=false"]
            phases[algo] = phase_profile(overrides, out)
        print(f"\n{algo}: {phases[algo].iterations} iterations of {phases[algo].env_steps // phases[algo].iterations}"
              f" env steps, {phases[algo].wall_s:.1f} s\n" + "\n".join(phase_lines(phases[algo])), flush=True)
    print(f"load average after: {load_average()}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(as_json(rates, phases), f, indent=1)


if __name__ == "__main__":
    main()
