"""Continuous-action HER, side by side: her_rl's HER-SAC / HER-DDPG against Stable-Baselines3's SAC +
HerReplayBuffer, at the same env-step budget and with the same evaluation.

    .venv/bin/python scripts/bench_continuous.py --envs fetch_reach --seeds 0 1 2 --budget 10000 \\
        --eval-every 1000 --json reach.json
    .venv/bin/python scripts/bench_continuous.py --envs push --sides ours --seeds 0 1 2 --budget 400000 \\
        --eval-every 8000 --stop-at-target --json push.json
    .venv/bin/python scripts/bench_continuous.py --table reach.json push.json

Ours:  ``her-run algo=<--algo> env=<env> seed=<s>`` with its defaults plus ``--override`` keys,
       one torch thread, evaluated every ``--eval-every`` env steps (a whole number of cycles).
SB3:   ``SAC("MultiInputPolicy", replay_buffer_class=HerReplayBuffer, future, n_sampled_goal=4)``
       with net [256, 256, 256], batch 256, lr 1e-3, gamma 0.98, tau 0.05, buffer 1e6,
       learning_starts 1,000, and SB3's defaults otherwise (one gradient step per env step, automatic
       entropy tuning): the settings rl-zoo gives its HER runs, with ours' network, batch and gamma.

Evaluation, both sides: ``--eval-episodes`` greedy episodes (ours: the policy mean / actor output;
SB3: ``deterministic=True``) on separate env copies with fixed seeds, played in lock-step; success
is ``info['is_success']`` of an episode's last step, as the runner counts it. Wall seconds count
from the start of training and include the evaluations. Both sides run to the full budget unless
``--stop-at-target`` (then a run ends at its first evaluation >= ``--target``). ``--sb3-max-seconds``
caps SB3's wall time (a 1M-step SB3 run takes hours here); a capped run reports the steps it
reached. ``--jobs 2`` runs two jobs at once, one per core: the table then says so. A median over
seeds counts a run that missed the target as more than what it ran (``-`` when only that bound is
known). Our curves are read from each run's ``metrics.jsonl``.

The env names are the runner's (``push``, ``drag``: the built-in tasks with ``actions=continuous``;
``fetch_reach``, ``fetch_push``, ...: gymnasium-robotics, needs the ``robotics`` extra). SB3 builds
the same env through ``gymnasium.make`` with the same keyword arguments.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from her_rl.bench import each_result, first_reaching, to_target, write_report
from her_rl.bench import run_ours as run_ours_with

HORIZON = 50  # every env benchmarked here has 50-step episodes
SB3_LEARNING_STARTS = 1_000
# The runner's name for an env -> (gymnasium id, keyword arguments) for SB3, and the runner overrides.
ENVS = {
    "push": ("her_rl/Push-v0", {"actions": "continuous"}, ["env.kwargs.actions=continuous"]),
    "drag": ("her_rl/Drag-v0", {"actions": "continuous"}, ["env.kwargs.actions=continuous"]),
    "fetch_reach": ("FetchReach-v4", {}, []),
    "fetch_push": ("FetchPush-v4", {}, []),
    "fetch_slide": ("FetchSlide-v4", {}, []),
    "fetch_pick_and_place": ("FetchPickAndPlace-v4", {}, []),
}


def ours_base(job: dict[str, Any]) -> list[str]:
    return [f"algo={job['algo']}", f"env={job['env']}", f"seed={job['seed']}", "progress=false", "threads=1",
            *ENVS[job["env"]][2], *job["overrides"]]


def ours_cycle_steps(job: dict[str, Any]) -> int:
    """Env steps of one training iteration of ours (a cycle of lock-step episodes)."""
    from her_rl.runner import compose

    return int(compose(ours_base(job)).algo.episodes_per_cycle) * HORIZON


def run_ours(job: dict[str, Any]) -> list[tuple[int, float, float]]:
    base = ours_base(job)
    overrides = [*base, f"budget.env_steps={job['budget']}", f"eval.episodes={job['eval_episodes']}",
                 f"eval.every_iterations={job['eval_every'] // ours_cycle_steps(job)}",
                 f"eval.success_threshold={job['target']}", f"eval.stop_when_solved={str(job['stop']).lower()}"]
    job["overrides_used"] = overrides
    out = None
    if job["keep"]:  # a kept run folder survives a stopped bench: its metrics.jsonl can still be read
        out = Path(job["keep"]) / f"{job['algo']}-{job['env']}-s{job['seed']}"
        out.mkdir(parents=True, exist_ok=False)
    return run_ours_with(overrides, out).curve()


def greedy_success(predict, envs, seed: int) -> float:
    """Success rate of one batch of lock-step greedy episodes, one per copy of ``envs``, fixed seeds."""
    import numpy as np

    obs, _ = envs.reset(seed=seed)
    for _ in range(HORIZON):
        obs, _, terminated, truncated, info = envs.step(predict(obs))
        if np.all(terminated | truncated):
            break
    return float(np.mean(info["is_success"]))


def run_sb3(job: dict[str, Any]) -> list[tuple[int, float, float]]:
    import gymnasium as gym
    import torch
    from stable_baselines3 import SAC, HerReplayBuffer
    from stable_baselines3.common.callbacks import BaseCallback

    import her_rl.envs  # noqa: F401  (registers her_rl/Push-v0 and friends)

    torch.set_num_threads(1)
    env_id, kwargs, _ = ENVS[job["env"]]
    if env_id.startswith("Fetch"):
        import gymnasium_robotics  # noqa: F401

        gym.register_envs(gymnasium_robotics)
    model = SAC("MultiInputPolicy", gym.make(env_id, **kwargs), replay_buffer_class=HerReplayBuffer,
                replay_buffer_kwargs={"n_sampled_goal": 4, "goal_selection_strategy": "future"},
                learning_rate=1e-3, buffer_size=1_000_000, learning_starts=SB3_LEARNING_STARTS, batch_size=256,
                tau=0.05, gamma=0.98, policy_kwargs={"net_arch": [256, 256, 256]}, seed=job["seed"], device="cpu")
    eval_envs = gym.make_vec(env_id, num_envs=job["eval_episodes"], vectorization_mode="sync", **kwargs)
    curve: list[tuple[int, float, float]] = []

    class Evaluate(BaseCallback):
        def _on_training_start(self) -> None:
            self.start = time.time()

        def _on_step(self) -> bool:
            if self.num_timesteps % job["eval_every"]:
                return True
            success = greedy_success(lambda o: self.model.predict(o, deterministic=True)[0], eval_envs,
                                     seed=10_000 + job["seed"])
            curve.append((self.num_timesteps, round(time.time() - self.start, 2), round(success, 3)))
            print(f"[sb3] {job['env']} seed {job['seed']} step {self.num_timesteps:,}: {success:.2f}",
                  file=sys.stderr, flush=True)
            if job["stop"] and success >= job["target"]:
                return False
            return job["sb3_max_seconds"] is None or time.time() - self.start < job["sb3_max_seconds"]

    model.learn(total_timesteps=job["budget"], callback=Evaluate())
    eval_envs.close()
    return curve


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    print(f"[bench] {job['side']} {job['env']} seed {job['seed']} (budget {job['budget']:,}) ...", file=sys.stderr,
          flush=True)
    curve = run_ours(job) if job["side"] == "ours" else run_sb3(job)
    reached = first_reaching(curve, job["target"])
    row = {**job, "reached": reached is not None, "steps_to_target": reached[0] if reached else None,
           "wall_to_target": reached[1] if reached else None,
           "env_steps": curve[-1][0] if curve else 0, "wall_s": curve[-1][1] if curve else None,
           "final_success": curve[-1][2] if curve else None, "best_success": max((v for *_, v in curve), default=0.0),
           "curve": curve}
    print(f"[bench] {({k: v for k, v in row.items() if k != 'curve'})}", file=sys.stderr, flush=True)
    return row


def _fmt(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def label(row: dict[str, Any]) -> str:
    return row["algo"] if row["side"] == "ours" else "SB3 SAC + HER"


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    lines = ["| env | learner | seed | steps to target | wall s to target | env steps run | wall s | success at end | best |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['env']} | {label(r)} | {r['seed']} | {_fmt(r['steps_to_target'])} (>= {r['target']}) | "
                     f"{_fmt(r['wall_to_target'], 1)} | {r['env_steps']:,} | {_fmt(r['wall_s'], 1)} | "
                     f"{_fmt(r['final_success'], 2)} | {r['best_success']:.2f} |")
    for env, name in dict.fromkeys((r["env"], label(r)) for r in rows):
        mine = [r for r in rows if (r["env"], label(r)) == (env, name)]
        hit, steps, wall = to_target(mine)
        lines.append(f"| **{env}** | **{name}** | {hit}/{len(mine)} reached | {_fmt(steps)} (median) | "
                     f"{_fmt(wall, 1)} (median) | | | | |")
    return "\n".join(lines)


def success_at(row: dict[str, Any], steps: int) -> float | None:
    """The last evaluation at or before ``steps`` env steps (None: none yet)."""
    done = [v for s, _, v in row["curve"] if s <= steps]
    return done[-1] if done else None


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--envs", nargs="+", default=["push", "fetch_reach", "fetch_push"], choices=sorted(ENVS))
    p.add_argument("--sides", nargs="+", default=["ours", "sb3"], choices=["ours", "sb3"])
    p.add_argument("--algo", default="her_sac", choices=["her_sac", "her_ddpg"], help="our learner")
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--budget", type=int, required=False, default=10_000, help="env steps per run")
    p.add_argument("--eval-every", type=int, default=1_000, help="env steps between evaluations (both sides)")
    p.add_argument("--eval-episodes", type=int, default=20)
    p.add_argument("--target", type=float, default=0.9)
    p.add_argument("--stop-at-target", action="store_true", help="end a run at its first evaluation >= target")
    p.add_argument("--sb3-max-seconds", type=float, default=None)
    p.add_argument("--override", action="append", default=[], metavar="KEY=VALUE", help="extra her-run override")
    p.add_argument("--jobs", type=int, default=1, help="jobs at once (each one thread)")
    p.add_argument("--keep", type=Path, help="keep our run folders under this directory (default: temporary)")
    p.add_argument("--json", type=Path, help="write rows here (rewritten after every run)")
    p.add_argument("--table", type=Path, nargs="+", help="only print the table of these JSON files")
    args = p.parse_args(argv)

    if args.table:
        print(format_table([r for f in args.table for r in json.loads(f.read_text())["rows"]]))
        return 0
    if args.eval_episodes < 20:
        p.error("--eval-episodes must be at least 20")
    if args.budget % args.eval_every:
        p.error("--budget must be a multiple of --eval-every (both sides evaluate at the same steps)")
    jobs = [{"side": side, "env": env, "seed": seed, "algo": args.algo, "budget": args.budget,
             "eval_every": args.eval_every, "eval_episodes": args.eval_episodes, "target": args.target,
             "stop": args.stop_at_target, "sb3_max_seconds": args.sb3_max_seconds, "overrides": args.override,
             "jobs_at_once": args.jobs, "keep": str(args.keep) if args.keep else None}
            for env in args.envs for seed in args.seeds for side in args.sides]
    for job in jobs:
        if job["side"] == "ours" and args.eval_every % ours_cycle_steps(job):
            p.error(f"--eval-every {args.eval_every} is not a whole number of {args.algo} cycles on {job['env']} "
                    f"({ours_cycle_steps(job)} env steps each)")
    rows: list[dict[str, Any]] = []
    for row in each_result(run_job, jobs, args.jobs):  # --jobs 2: a fresh process per job
        rows.append(row)
        if args.json:
            write_report(args.json, {"settings": vars(args), "rows": rows})
    print(format_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
