"""Side-by-side on-policy benchmarks.

``--task cartpole`` (default): our PPO against Stable-Baselines3 PPO, both with rl-zoo's CartPole-v1
hyperparameters and evaluated by the same function every ``--eval-every`` iterations on
``--eval-episodes`` greedy episodes; solved at a mean return >= 475. ``--task reinforce``: episodes
of our REINFORCE until its running mean return reaches 475. ``--task mountaincar`` / ``--task
deep_sea``: our RND-PPO against our PPO with the same PPO settings. The protocols:
:mod:`bench.onpolicy`.

    python scripts/bench_ppo.py --seeds 0 1 2
    python scripts/bench_ppo.py --task reinforce --seeds 0 1 2      # REINFORCE, CartPole, 1000 episodes
    python scripts/bench_ppo.py --task mountaincar --seeds 0 1 2 3 4 --budget 300000
    python scripts/bench_ppo.py --task deep_sea --size 20 --seeds 0 1 2 3 4   # tuned/rnd_ppo_deep_sea.yaml for both
    python scripts/bench_ppo.py --task deep_sea --size 10 20 30 40 50 --budget 2000000 --out ds.json  # the curve

SB3 is needed only for cartpole's SB3 side (a benchmark-only extra: ``pip install -e .[bench]``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Sequence

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/ lies beside the package
from bench import onpolicy, peers  # noqa: E402
from bench.jobs import write_rows  # noqa: E402


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--task", choices=["cartpole", "mountaincar", "deep_sea", "reinforce"], default="cartpole")
    p.add_argument("--episodes", type=int, default=1000, help="reinforce: training episodes per seed")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--budget", type=int, default=None, help="env steps per run (default: 100k cartpole, 300k others)")
    p.add_argument("--eval-every", type=int, default=None, help="iterations between evaluations (default 4 cartpole, 20 others)")
    p.add_argument("--eval-episodes", type=int, default=20)
    p.add_argument("--size", type=int, nargs="+", default=[20], help="deep sea grid size(s): several give the curve")
    p.add_argument("--ppo-budget", type=int, default=None,
                   help="exploration tasks: env steps for plain PPO (default: --budget)")
    p.add_argument("--table", type=Path, default=None, help="only print the size table of this JSON report")
    p.add_argument("--algos", nargs="+", default=["rnd_ppo", "ppo"], help="exploration tasks: which of ours to run")
    p.add_argument("--set", nargs="*", default=[], metavar="algo.KEY=VALUE",
                   help="exploration tasks: overrides applied to both algorithms, e.g. algo.normalize_obs=false")
    p.add_argument("--no-sb3", action="store_true", help="cartpole: skip the SB3 side")
    p.add_argument("--out", type=Path, default=None, help="write the JSON report here")
    args = p.parse_args(argv)
    if args.table:
        print(onpolicy.size_table(json.loads(args.table.read_text())["rows"]))
        return 0
    if args.task == "cartpole" and not args.no_sb3 and peers.missing():
        p.error(f"{peers.missing()}; --no-sb3 runs ours alone")
    report = onpolicy.run(args)
    print(json.dumps(report["summary"], indent=2))
    if args.task == "deep_sea" and len(args.size) > 1:
        print(onpolicy.size_table(report["rows"]))
    if args.out:
        write_rows(args.out, report["rows"], summary=report["summary"], args=report["args"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
