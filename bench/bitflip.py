"""The bit-flip benchmark: her_rl's HER-DQN against Stable-Baselines3's DQN + HER on our random-goal
``her_rl/BitFlip-v0`` (random start, random goal every episode, truncated after n steps), each run
until a greedy evaluation on 100 episodes reaches success >= 0.95.

Both sides evaluate at the same env-step interval (``eval_every``, default 1,000): SB3 exactly at
each multiple, ours after the first training cycle that crosses it (``eval.every_env_steps``; a
cycle is 16 episodes, so ours is charged up to one cycle more than the multiple).

Ours:  ``her_rl.run.runner.run(compose([n, seed, progress=false, threads, eval.every_env_steps]))`` with
       its default config (the tuned bit-flip file included) and budget, plus any extra overrides.
SB3:   :func:`bench.peers.dqn_her_bitflip`, learning_starts 1000 (a few dozen complete
       episodes in the buffer before the first update, so HER can relabel from the start); its
       epsilon decays over the first ``exploration_fraction`` of its env-step cap. It stops once
       success >= 0.95, or once its wall cap has passed.

Success is the same on both sides: ``info['is_success']`` at any step of the episode (the env
terminates on success). Wall time on both sides counts from the start of training (model / agent
construction excluded) and includes the periodic evaluations and, for ours, its checkpoints. The
medians and ratios are :mod:`bench.stats`'s: an unsolved run counts as more than it used.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Sequence

from bench import peers
from bench.jobs import run_jobs
from bench.ours import run_ours as run_ours_with
from bench.rows import Row, solve_row
from bench.stats import ratio, side_medians
from bench.tables import markdown, ratio_table

EVAL_EVERY = 1_000
EVAL_EPISODES = 100
SUCCESS_THRESHOLD = 0.95


def run_ours(n: int, seed: int, threads: int, extra: Sequence[str] = (), eval_every: int = EVAL_EVERY) -> Row:
    res = run_ours_with([f"n={n}", f"seed={seed}", "progress=false", f"threads={threads}",
                         f"eval.every_env_steps={eval_every}", *extra]).results
    solved = res["solved_at_env_steps"] is not None
    steps = res["solved_at_env_steps"] if solved else res["env_steps"]
    return Row("ours", seed, solved, int(steps), float(res["wall_time_s"]), n)


def run_sb3(n: int, seed: int, threads: int, max_steps: int, max_seconds: float, exploration_fraction: float = 0.1,
            eval_every: int = EVAL_EVERY) -> Row:
    protocol = peers.Protocol(eval_every, max_steps, SUCCESS_THRESHOLD, max_seconds)
    run = peers.dqn_her_bitflip(n, seed, protocol, threads, exploration_fraction, EVAL_EPISODES)
    return solve_row("sb3", seed, n, run.curve, SUCCESS_THRESHOLD, (run.env_steps, run.wall_s))


def run_job(job: tuple[str, int, int, argparse.Namespace]) -> Row:
    side, n, seed, args = job
    print(f"[bench] {side} n={n} seed={seed} ...", file=sys.stderr, flush=True)
    if side == "ours":
        row = run_ours(n, seed, args.threads, args.ours_override, args.eval_every)
    else:
        row = run_sb3(n, seed, args.threads, args.max_steps, args.sb3_max_seconds, args.sb3_exploration_fraction,
                      args.eval_every)
    print(f"[bench] {row}", file=sys.stderr, flush=True)
    return row


def format_table(rows: Sequence[Row], n: int | None = None) -> str:
    """Markdown: per-run rows, then medians per side, then the ours/SB3 ratios of the medians."""
    if n is None:
        return ratio_table(rows)
    return (f"Random-goal bit-flip, n={n}: time to greedy success >= {SUCCESS_THRESHOLD} "
            f"on {EVAL_EPISODES} eval episodes (wall time includes evaluation).\n\n" + ratio_table(rows))


def format_summary(rows: Sequence[Row]) -> str:
    """One line per n: medians of both sides and the ours/SB3 ratios (the headline table of the bit-flip page)."""
    body = []
    for n in dict.fromkeys(r.n for r in rows):
        mine = [r for r in rows if r.n == n]
        ours, sb3 = side_medians(mine, "ours"), side_medians(mine, "sb3")
        solved = {side: f"{sum(r.solved for r in mine if r.side == side)}/{sum(r.side == side for r in mine)}"
                  for side in ("ours", "sb3")}
        body.append([n, solved["ours"], ours["env_steps"].fmt(0), solved["sb3"], sb3["env_steps"].fmt(0),
                     ratio(ours["env_steps"], sb3["env_steps"]).fmt(2), ours["wall_s"].fmt(1), sb3["wall_s"].fmt(1),
                     ratio(ours["wall_s"], sb3["wall_s"]).fmt(3)])
    return markdown(["n", "ours solved", "ours median steps", "SB3 solved", "SB3 median steps", "steps ours/SB3",
                     "ours median wall s", "SB3 median wall s", "wall ours/SB3"], "rcrcrrrrr", body)


def settings(args: argparse.Namespace) -> dict[str, Any]:
    return {**vars(args), "eval_episodes": EVAL_EPISODES, "success_threshold": SUCCESS_THRESHOLD,
            "sb3_learning_starts": peers.SB3_LEARNING_STARTS}


def run(args: argparse.Namespace) -> str:
    """Every job (in the order n, seed, side; ``args.jobs`` at once, a fresh process each), the
    JSON rows rewritten after each; returns the tables: one per n, then the summary."""
    sides = ["ours", "sb3"] if args.only == "both" else [args.only]
    jobs = [(side, n, seed, args) for n in args.n for seed in args.seeds for side in sides]
    rows = run_jobs(run_job, jobs, args.jobs, args.json, settings(args))
    tables = [format_table([r for r in rows if r.n == n], n) for n in args.n]
    return "\n\n".join(tables + ([format_summary(rows)] if len(sides) == 2 else [])) + "\n"
