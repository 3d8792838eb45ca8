"""The Fetch frontier presets against their SB3 twins (:mod:`bench.frontier`): run seeds of one side
and add their rows to a JSON file as each finishes, or report on the file (tables and curves).

    .venv/bin/python scripts/bench_fetch_frontier.py --side sb3 --seeds 0 1 2 --json docs/bench/fetch_frontier.json
    .venv/bin/python scripts/bench_fetch_frontier.py --report docs/bench/fetch_frontier.json --png push.png
    .venv/bin/python scripts/bench_fetch_frontier.py --preset fetch_slide_frontier --report docs/bench/fetch_frontier.json --every 100000
    .venv/bin/python scripts/bench_fetch_frontier.py --preset fetch_pick_and_place_frontier --side ours --seeds 0 \
        --set env.start_in_gripper=0.5 --json docs/bench/fetch_frontier.json
    .venv/bin/python scripts/bench_fetch_frontier.py --heights outputs/pick_and_place --episodes 200
    .venv/bin/python scripts/bench_fetch_frontier.py --lifts outputs/pick_and_place --window 1000
    .venv/bin/python scripts/bench_fetch_frontier.py --carry outputs/panda_pick_and_place --episodes 100

``--keep DIR`` keeps our runs' folders (``DIR/<preset>-seed<S>``) to evaluate their final policies
with more episodes afterwards; without it each run's folder is temporary.

``--set`` runs a variant of the preset (her-run overrides added to it); its rows carry them and are
a series of their own in the tables and curves. The SB3 twin mirrors held starts
(``env.start_in_gripper``) and the batch (``algo.batch_size``) and no other override, so
``--side sb3`` takes only those. ``--min-seeds N`` leaves series of fewer seeds out of the table per
evaluation and the curves (the table per run keeps them).

Seeds run one after another in this process (one torch thread); start one process per seed to use
more cores: the rows file is extended under a lock.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Sequence

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/ lies beside the package
from bench import frontier  # noqa: E402
from her_rl.errors import ConfigError  # noqa: E402


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", default="fetch_push_frontier", choices=frontier.PRESETS)
    p.add_argument("--side", choices=("ours", "sb3"), help="run this side's seeds")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--json", type=Path, help="add each run's row to this file")
    p.add_argument("--set", nargs="+", default=[], metavar="KEY=VALUE",
                   help="her-run overrides added to the preset (a variant of it); with --side sb3 only "
                        "env.start_in_gripper and algo.batch_size, which the twin mirrors")
    p.add_argument("--keep", type=Path, metavar="DIR",
                   help="with --side ours: keep each run's folder as DIR/<preset>-seed<S> (a new folder), so that "
                        "its final policy can be evaluated later (her-run load=FOLDER eval.episodes=500)")
    p.add_argument("--report", type=Path, help="print the tables of this rows file")
    p.add_argument("--png", type=Path, help="with --report: write the curves here")
    p.add_argument("--still", type=int, metavar="EPISODES",
                   help="with --report: also the success of an arm kept still over this many episodes (a line on the curves)")
    p.add_argument("--every", type=int, help="with --report: the table per evaluation at multiples of this many env steps")
    p.add_argument("--min-seeds", type=int, default=1, metavar="N",
                   help="with --report: only series of at least N seeds in the table per evaluation and the curves")
    p.add_argument("--heights", type=Path, metavar="RUN",
                   help="a finished run's folder: its greedy success on goals on the table and goals in the air")
    p.add_argument("--episodes", type=int, default=200, help="with --heights or --carry: fresh episodes to play")
    p.add_argument("--lifts", type=Path, metavar="RUN",
                   help="a run's folder (its checkpoint kept the replay): per window of training episodes, the "
                        "share that raised the object 3 cm and 8 cm above its start")
    p.add_argument("--window", type=int, default=1000, help="with --lifts: training episodes per row")
    p.add_argument("--carry", type=Path, metavar="RUN",
                   help="a finished panda-gym PickAndPlace run's folder: on goals in the air, a scripted grasp lifts "
                        "the block, then its greedy policy takes over: how often it still succeeds")
    args = p.parse_args(argv)
    if args.carry:
        return carry(p, args.carry, args.episodes)
    if args.heights:
        return heights(p, args.heights, args.episodes)
    if args.lifts:
        return lifts(p, args.lifts, args.window)
    if args.report:
        if not args.report.is_file():
            p.error(f"--report {args.report}: no such file")
        if args.every is not None and args.every < 1:
            p.error(f"--every: a number of env steps, at least 1, got {args.every}")
        if args.still is not None and args.still < 1:
            p.error(f"--still: a number of episodes, at least 1, got {args.still}")
        if args.min_seeds < 1:
            p.error(f"--min-seeds: a number of seeds, at least 1, got {args.min_seeds}")
        rows = json.loads(args.report.read_text())["rows"]
        print(frontier.step_table(rows, args.preset, args.every, args.min_seeds), frontier.level_table(rows, args.preset),
              sep="\n\n")
        still = None
        if args.still:
            still = frontier.still_success(frontier.env_id(args.preset), args.still)
            print(f"\n{frontier.env_id(args.preset)}, the arm kept still: {still:.3f} success over {args.still} episodes")
        if args.png:
            frontier.plot(rows, args.preset, args.png, still, args.min_seeds)
        return 0
    if not (args.side and args.json):
        p.error("give --side and --json to run, or --report to read")
    if args.keep and args.side != "ours":
        p.error("--keep keeps our runs' folders: give it with --side ours")
    folders = {seed: args.keep / f"{args.preset}-seed{seed}" for seed in args.seeds} if args.keep else {}
    taken = [str(f) for f in folders.values() if f.exists()]
    if taken:
        p.error(f"--keep {args.keep}: {', '.join(taken)} already exists; give a new folder")
    if args.side == "sb3" and (why := frontier.zoo.missing("twin", frontier.env_id(args.preset))):
        p.error(why)
    if args.set:
        try:
            if args.side == "sb3":
                frontier.check_twin_sets(args.set)
            frontier.check_sets(args.preset, args.set)
        except (ConfigError, ValueError) as exc:
            p.error(f"--set {' '.join(args.set)}: {exc}")
    for seed in args.seeds:
        if args.side == "sb3":
            row = frontier.run_sb3(args.preset, seed, args.set)
        else:
            row = frontier.run_ours(args.preset, seed, args.set, folders.get(seed))
        frontier.add_row(args.json, row)
        print(f"[frontier] {args.side} seed {seed}: last evaluation {row['evals'][-1] if row['evals'] else None}",
              file=sys.stderr, flush=True)
    return 0


def _policy(p: argparse.ArgumentParser, flag: str, run: Path, episodes: int):
    """The run's saved policy, for ``episodes`` fresh episodes (a refusal: one line, exit 2)."""
    import her_rl

    if episodes < 1:
        p.error(f"--episodes: at least 1, got {episodes}")
    try:
        return her_rl.load(run)
    except ConfigError as exc:
        p.error(f"{flag} {run}: {exc}")


def heights(p: argparse.ArgumentParser, run: Path, episodes: int) -> int:
    policy = _policy(p, "--heights", run, episodes)
    if "desired_goal" not in getattr(policy.observation_space, "spaces", {}):
        p.error(f"--heights {run}: {policy.env_id} is not a goal env (no desired_goal to place)")
    split = frontier.success_by_goal_height(policy, policy.env_id, episodes)
    for where, (n, success) in split.items():
        told = "no episodes" if success is None else f"{success:.2f} greedy success over {n} episodes"
        print(f"{policy.env_id}, goals {where}: {told}")
    return 0


def carry(p: argparse.ArgumentParser, run: Path, episodes: int) -> int:
    policy = _policy(p, "--carry", run, episodes)
    if not str(policy.env_id).startswith("PandaPickAndPlace"):
        p.error(f"--carry {run}: it trains {policy.env_id}; the scripted grasp reads panda-gym's PickAndPlace "
                "observation only")
    in_air, handed, carried = frontier.carry_success(policy, policy.env_id, episodes)
    share = f"{carried / handed:.2f}" if handed else "no hand-over"
    print(f"{policy.env_id}, goals >= 5 cm above the block: {in_air} of {episodes} episodes; the scripted grasp "
          f"lifted the block in {handed}; the policy then succeeded in {carried} ({share})")
    return 0


def lifts(p: argparse.ArgumentParser, run: Path, window: int) -> int:
    from her_rl.folder.checkpoint import load

    if window < 1:
        p.error(f"--window: at least 1 episode, got {window}")
    try:
        saved = load(run)
    except ConfigError as exc:
        p.error(f"--lifts {run}: {exc}")
    memory = saved["agent"].get("memory")  # load checked that agent is a mapping
    episodes = memory.get("episodes") if isinstance(memory, dict) else None
    data = episodes.get("data") if isinstance(episodes, dict) else None
    if not isinstance(data, dict) or "achieved_goal" not in data or not int(episodes.get("size", 0)):
        p.error(f"--lifts {run}: its checkpoint holds no replay of goal episodes (a hindsight learner's, "
                "saved with checkpoint.save_replay=true, after its first episodes)")
    try:
        rates = frontier.lift_rates(episodes, window)
    except (ValueError, TypeError, KeyError) as exc:
        p.error(f"--lifts {run}: {exc}")
    print("training episodes  raised >= 3 cm  raised >= 8 cm")
    for start, end, (low, high) in rates:
        print(f"{start:>8,} - {end:<8,} {low:>10.3f} {high:>15.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
