"""Side-by-side benchmark on OUR random-goal bit-flip env: her_rl's HER-DQN vs Stable-Baselines3.

    .venv/bin/python scripts/bench_her.py --n 15 20 30 50 --seeds 0 1 2 --jobs 2 --json bench_her.json

Both sides train on ``her_rl/BitFlip-v0`` (random start, random goal every episode, truncated
after n steps) until a greedy evaluation on 100 episodes reaches success >= 0.95. For each run it
records the env steps and the wall seconds at that evaluation, then prints a markdown table (per
seed rows, medians per side, ratios ours/SB3) that can go straight into a docs benchmark table.

Both sides evaluate at the same env-step interval, ``--eval-every`` (default 1,000): SB3 exactly at
each multiple, ours after the first training cycle that crosses it (``eval.every_env_steps``; a
cycle is 16 episodes, so ours is charged up to one cycle more than the multiple).

Ours:  ``her_rl.runner.run(compose([n, seed, progress=false, threads, eval.every_env_steps]))`` with
       its default config (the tuned bit-flip file included) and budget, plus ``--ours-override``.
SB3:   DQN + HerReplayBuffer with the settings of docs REFERENCES.md ("measured here"): ``future``
       with n_sampled_goal=4, net [256, 256], lr 1e-3, batch 256, gamma 0.98, target update every
       500 steps, buffer 1e6, learning_starts 1000 (a few dozen complete episodes in the buffer
       before the first update, so HER can relabel from the start); every other argument is the SB3
       default (train_freq 4, one gradient step, epsilon 1 -> 0.05 over the first
       ``--sb3-exploration-fraction`` (default 0.1, SB3's default) of ``--max-steps``). A callback
       runs a greedy evaluation of 100 episodes on separate env instances every ``--eval-every`` steps and
       stops training once success >= 0.95, or once ``--sb3-max-seconds`` have passed.

Success is the same on both sides: ``info['is_success']`` at any step of the episode (the env
terminates on success). Wall time on both sides counts from the start of training (model / agent
construction excluded) and INCLUDES the periodic evaluations (ours evaluates inside its run, too)
and, for ours, its periodic checkpoints. ``--jobs 1`` runs one job at a time; ``--jobs 2`` runs two
at once (one per core, each one thread), in the order n, seed, side, so ours and SB3 of the same
seed usually run side by side under the same load.

Stable-Baselines3 is imported only inside ``run_sb3`` so that this module (its tables) is importable
without it; install it with the ``bench`` extra. The medians and ratios are
:mod:`her_rl.bench.stats`'s: an unsolved run counts as more than what it used.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

from her_rl.bench import Stat, censored_median, each_result, ratio, side_medians, write_report  # noqa: F401
from her_rl.bench import run_ours as run_ours_with

EVAL_EVERY = 1_000
EVAL_EPISODES = 100
SUCCESS_THRESHOLD = 0.95
SB3_LEARNING_STARTS = 1_000


@dataclass
class Row:
    """One run. When ``solved`` is False, env_steps / wall_s are what the run used before its cap
    (the true time to success is larger: a lower bound)."""

    side: str
    seed: int
    solved: bool
    env_steps: int
    wall_s: float
    n: int = 0


# ---------------------------------------------------------------- tables (no SB3)


def _cell(row: Row, key: str, digits: int) -> str:
    value = getattr(row, key)
    text = f"{value:,.{digits}f}"
    return text if row.solved else f">{text} (cap)"


def format_table(rows: Sequence[Row], n: int | None = None) -> str:
    """Markdown: per-run rows, then medians per side, then the ours/SB3 ratios of the medians."""
    lines = []
    if n is not None:
        lines.append(f"Random-goal bit-flip, n={n}: time to greedy success >= {SUCCESS_THRESHOLD} "
                     f"on {EVAL_EPISODES} eval episodes (wall time includes evaluation).")
        lines.append("")
    lines += ["| side | seed | solved | env steps to success | wall s to success |",
              "|---|---:|:---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r.side} | {r.seed} | {'yes' if r.solved else 'no'} | "
                     f"{_cell(r, 'env_steps', 0)} | {_cell(r, 'wall_s', 1)} |")
    sides = list(dict.fromkeys(r.side for r in rows))
    meds = {side: side_medians(rows, side) for side in sides}
    for side in sides:
        solved = sum(r.solved for r in rows if r.side == side)
        total = sum(1 for r in rows if r.side == side)
        lines.append(f"| **{side} median** | | {solved}/{total} | {meds[side]['env_steps'].fmt(0)} | "
                     f"{meds[side]['wall_s'].fmt(1)} |")
    if "ours" in meds and "sb3" in meds:
        steps = ratio(meds["ours"]["env_steps"], meds["sb3"]["env_steps"])
        wall = ratio(meds["ours"]["wall_s"], meds["sb3"]["wall_s"])
        lines.append(f"| **ours / sb3** | | | {steps.fmt(2)}x | {wall.fmt(2)}x |")
        if any(s.bound for s in (steps, wall)) or any(s.value is None for s in (steps, wall)):
            lines.append("")
            lines.append("`>x (cap)`: not solved within its cap, the value is what it used (a lower bound); "
                         "a ratio marked `<` or `>` is a bound, `n/a` means both sides are bounds.")
    return "\n".join(lines)


# ---------------------------------------------------------------- the two sides


def run_ours(n: int, seed: int, threads: int, extra: Sequence[str] = (), eval_every: int = EVAL_EVERY) -> Row:
    res = run_ours_with([f"n={n}", f"seed={seed}", "progress=false", f"threads={threads}",
                         f"eval.every_env_steps={eval_every}", *extra]).results
    solved = res["solved_at_env_steps"] is not None
    steps = res["solved_at_env_steps"] if solved else res["env_steps"]
    return Row("ours", seed, solved, int(steps), float(res["wall_time_s"]), n)


def _sb3_evaluate(model, envs: list, seed: int) -> float:
    """Greedy success rate: one episode on each env, all stepped in lock-step with one batched predict."""
    import numpy as np

    obs = [env.reset(seed=seed + i)[0] for i, env in enumerate(envs)]
    live = list(range(len(envs)))
    success = np.zeros(len(envs), dtype=bool)
    while live:
        batch = {k: np.stack([obs[i][k] for i in live]) for k in obs[live[0]]}
        actions, _ = model.predict(batch, deterministic=True)
        still = []
        for i, a in zip(live, actions):
            obs[i], _, terminated, truncated, info = envs[i].step(int(a))
            success[i] |= bool(info.get("is_success", False))
            if not (terminated or truncated):
                still.append(i)
        live = still
    return float(success.mean())


def run_sb3(n: int, seed: int, threads: int, max_steps: int, max_seconds: float,
            exploration_fraction: float = 0.1, verbose: bool = True, eval_every: int = EVAL_EVERY) -> Row:
    import gymnasium as gym
    import torch
    from stable_baselines3 import DQN, HerReplayBuffer
    from stable_baselines3.common.callbacks import BaseCallback

    import her_rl.envs  # noqa: F401  (registers her_rl/BitFlip-v0)

    torch.set_num_threads(threads)
    # The env truncates itself after n steps; the TimeLimit wrapper makes that explicit to
    # gymnasium / SB3 (it sets the same truncation at the same step).
    env = gym.make("her_rl/BitFlip-v0", n=n, max_episode_steps=n)
    eval_envs = [gym.make("her_rl/BitFlip-v0", n=n, max_episode_steps=n) for _ in range(EVAL_EPISODES)]

    class EvalStop(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.start = 0.0
            self.solved_at: tuple[int, float] | None = None
            self.evals = 0

        def _on_training_start(self) -> None:
            self.start = time.perf_counter()

        def _on_step(self) -> bool:
            if self.num_timesteps % eval_every == 0:
                self.evals += 1
                rate = _sb3_evaluate(self.model, eval_envs, seed=10_000 * (seed + 1) + 1_000 * self.evals)
                elapsed = time.perf_counter() - self.start
                if verbose:
                    print(f"  sb3 seed {seed}: {self.num_timesteps:,} steps, {elapsed:.1f} s, "
                          f"eval success {rate:.2f}", file=sys.stderr, flush=True)
                if rate >= SUCCESS_THRESHOLD:
                    self.solved_at = (self.num_timesteps, elapsed)
                    return False
            return time.perf_counter() - self.start < max_seconds

    model = DQN(
        "MultiInputPolicy", env,
        replay_buffer_class=HerReplayBuffer,
        replay_buffer_kwargs=dict(n_sampled_goal=4, goal_selection_strategy="future"),
        policy_kwargs=dict(net_arch=[256, 256]),
        learning_rate=1e-3, batch_size=256, gamma=0.98, target_update_interval=500,
        learning_starts=SB3_LEARNING_STARTS, buffer_size=1_000_000,
        exploration_fraction=exploration_fraction,
        seed=seed, device="cpu", verbose=0,
    )
    callback = EvalStop()
    model.learn(total_timesteps=max_steps, callback=callback)
    if callback.solved_at is not None:
        steps, wall = callback.solved_at
        return Row("sb3", seed, True, int(steps), float(wall), n)
    return Row("sb3", seed, False, int(model.num_timesteps), float(time.perf_counter() - callback.start), n)


# ---------------------------------------------------------------- CLI


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, nargs="+", default=[15, 20, 30, 50], help="numbers of bits (default 15 20 30 50)")
    p.add_argument("--eval-every", type=int, default=EVAL_EVERY, help="env steps between evaluations, both sides")
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
    return p.parse_args(argv)


def run_job(job: tuple[str, int, int, argparse.Namespace]) -> Row:
    side, n, seed, args = job
    print(f"[bench] {side} n={n} seed={seed} ...", file=sys.stderr, flush=True)
    if side == "ours":
        row = run_ours(n, seed, args.threads, args.ours_override, args.eval_every)
    else:
        row = run_sb3(n, seed, args.threads, args.max_steps, args.sb3_max_seconds, args.sb3_exploration_fraction,
                      eval_every=args.eval_every)
    print(f"[bench] {row}", file=sys.stderr, flush=True)
    return row


def format_summary(rows: Sequence[Row]) -> str:
    """One line per n: medians of both sides and the ours/SB3 ratios (the headline table of docs/benchmarks/bitflip.md)."""
    lines = ["| n | ours solved | ours median steps | SB3 solved | SB3 median steps | steps ours/SB3 | "
             "ours median wall s | SB3 median wall s | wall ours/SB3 |",
             "|---:|:---:|---:|:---:|---:|---:|---:|---:|---:|"]
    for n in dict.fromkeys(r.n for r in rows):
        mine = [r for r in rows if r.n == n]
        ours, sb3 = side_medians(mine, "ours"), side_medians(mine, "sb3")
        solved = {side: f"{sum(r.solved for r in mine if r.side == side)}/{sum(r.side == side for r in mine)}"
                  for side in ("ours", "sb3")}
        lines.append(f"| {n} | {solved['ours']} | {ours['env_steps'].fmt(0)} | {solved['sb3']} | "
                     f"{sb3['env_steps'].fmt(0)} | {ratio(ours['env_steps'], sb3['env_steps']).fmt(2)} | "
                     f"{ours['wall_s'].fmt(1)} | {sb3['wall_s'].fmt(1)} | {ratio(ours['wall_s'], sb3['wall_s']).fmt(3)} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    sides = ["ours", "sb3"] if args.only == "both" else [args.only]
    jobs = [(side, n, seed, args) for n in args.n for seed in args.seeds for side in sides]
    rows: list[Row] = []
    for row in each_result(run_job, jobs, args.jobs):  # --jobs 2: a fresh process per job
        rows.append(row)
        if args.json is not None:  # rewrite after every run: partial results survive a long bench
            _write_json(args, rows)
    for n in args.n:
        print(format_table([r for r in rows if r.n == n], n))
        print()
    if len(sides) == 2:
        print(format_summary(rows))
    return 0


def _write_json(args: argparse.Namespace, rows: Sequence[Row]) -> None:
    settings: dict[str, Any] = {**vars(args), "eval_episodes": EVAL_EPISODES, "success_threshold": SUCCESS_THRESHOLD,
                                "sb3_learning_starts": SB3_LEARNING_STARTS}
    write_report(args.json, {"settings": settings, "rows": [asdict(r) for r in rows]})


if __name__ == "__main__":
    sys.exit(main())
