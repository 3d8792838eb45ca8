"""Continuous-action HER, side by side: her_rl's HER-SAC / HER-DDPG against Stable-Baselines3's SAC +
HerReplayBuffer (:func:`bench.zoo.sac_her`), at the same env-step budget and with the same
evaluation.

Ours:  ``her-run algo=<algo> env=<env> seed=<s>`` with its defaults plus the job's overrides, one
       torch thread, evaluated every ``eval_every`` env steps (a whole number of cycles).
Both:  ``eval_episodes`` greedy episodes on separate env copies with fixed seeds, played in
       lock-step; success is ``info['is_success']`` of an episode's last step, as the runner counts
       it. Wall seconds count from the start of training and include the evaluations. A run ends at
       its budget, or with ``stop`` at its first evaluation >= ``target``; SB3's wall cap is checked
       at its evaluations. Our curves are read from each run's ``metrics.jsonl``.

The env names are the runner's (``push``, ``drag``: the built-in tasks with ``actions=continuous``;
``fetch_reach``, ``fetch_push``, ...: gymnasium-robotics). SB3 builds the same env through
``gymnasium.make`` with the same keyword arguments.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Sequence

from bench import peers, zoo
from bench.ours import run_ours as run_ours_with
from bench.rows import target_row
from bench.tables import fmt, target_table

HORIZON = 50  # every env benchmarked here has 50-step episodes
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
    from her_rl.config.compose import compose

    from her_rl.algos.cycle import cycle_episodes

    return cycle_episodes(compose(ours_base(job)).algo.episodes_per_cycle, HORIZON) * HORIZON


def run_ours(job: dict[str, Any]) -> list[tuple[int, float, float]]:
    overrides = [*ours_base(job), f"budget.env_steps={job['budget']}", f"eval.episodes={job['eval_episodes']}",
                 f"eval.every_iterations={job['eval_every'] // ours_cycle_steps(job)}",
                 f"eval.success_threshold={job['target']}", f"eval.stop_when_solved={str(job['stop']).lower()}"]
    job["overrides_used"] = overrides
    out = None
    if job["keep"]:  # a kept run folder survives a stopped bench: its metrics.jsonl can still be read
        out = Path(job["keep"]) / f"{job['algo']}-{job['env']}-s{job['seed']}"
        out.mkdir(parents=True, exist_ok=False)
    return run_ours_with(overrides, out).curve()


def run_sb3(job: dict[str, Any]) -> list[tuple[int, float, float]]:
    env_id, kwargs, _ = ENVS[job["env"]]
    protocol = peers.Protocol(job["eval_every"], job["budget"], job["target"] if job["stop"] else None,
                              job["sb3_max_seconds"], cap_at_evals=True)
    return zoo.sac_her(env_id, kwargs, job["seed"], protocol, job["eval_episodes"], HORIZON).curve


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    print(f"[bench] {job['side']} {job['env']} seed {job['seed']} (budget {job['budget']:,}) ...", file=sys.stderr,
          flush=True)
    curve = run_ours(job) if job["side"] == "ours" else run_sb3(job)
    row = {**job, **target_row(curve, job["target"]), "curve": curve}
    print(f"[bench] {({k: v for k, v in row.items() if k != 'curve'})}", file=sys.stderr, flush=True)
    return row


def jobs(args: argparse.Namespace) -> list[dict[str, Any]]:
    return [{"side": side, "env": env, "seed": seed, "algo": args.algo, "budget": args.budget,
             "eval_every": args.eval_every, "eval_episodes": args.eval_episodes, "target": args.target,
             "stop": args.stop_at_target, "sb3_max_seconds": args.sb3_max_seconds, "overrides": args.override,
             "jobs_at_once": args.jobs, "keep": str(args.keep) if args.keep else None}
            for env in args.envs for seed in args.seeds for side in args.sides]


def refusal(args: argparse.Namespace, planned: Sequence[dict[str, Any]]) -> str | None:
    """Why these arguments cannot give both sides evaluations at the same env steps (None: they can)."""
    if args.eval_episodes < 20:
        return "--eval-episodes must be at least 20"
    if args.budget % args.eval_every:
        return "--budget must be a multiple of --eval-every (both sides evaluate at the same steps)"
    for job in planned:
        if job["side"] == "ours" and args.eval_every % ours_cycle_steps(job):
            return (f"--eval-every {args.eval_every} is not a whole number of {args.algo} cycles on {job['env']} "
                    f"({ours_cycle_steps(job)} env steps each)")
    if "sb3" in args.sides:
        return peers.missing()
    return None


def label(row: dict[str, Any]) -> str:
    return row["algo"] if row["side"] == "ours" else "SB3 SAC + HER"


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    def cells(r: dict[str, Any]) -> list[Any]:
        return [r["env"], label(r), r["seed"], f"{fmt(r['steps_to_target'])} (>= {r['target']})",
                fmt(r["wall_to_target"], 1), f"{r['env_steps']:,}", fmt(r["wall_s"], 1), fmt(r["final_success"], 2),
                f"{r['best_success']:.2f}"]

    return target_table(rows, ["env", "learner", "seed", "steps to target", "wall s to target", "env steps run",
                               "wall s", "success at end", "best"], "llrrrrrrr", cells,
                        lambda r: (f"**{r['env']}**", f"**{label(r)}**"))


def success_at(row: dict[str, Any], steps: int) -> float | None:
    """The last evaluation at or before ``steps`` env steps (None: none yet)."""
    done = [v for s, _, v in row["curve"] if s <= steps]
    return done[-1] if done else None
