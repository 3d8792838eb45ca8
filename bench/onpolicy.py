"""On-policy benchmarks.

``cartpole``: our PPO (through the runner) against Stable-Baselines3 PPO
(:func:`bench.peers.ppo_cartpole`), both with rl-zoo's CartPole-v1 hyperparameters (8 envs,
n_steps 32, batch 256, 20 epochs, gae_lambda 0.8, gamma 0.98, lr and clip linearly annealed from
1e-3 and 0.2 over 1e5 steps, ent_coef 0, separate 64x64 tanh actor and critic, 1 torch thread), both
evaluated by the same function (``her_rl.run.evaluation.evaluate``): every ``eval_every`` iterations
(= rollouts of 256 steps) the greedy policy plays ``eval_episodes`` episodes; a run is solved when
their mean return is >= 475. Reported: env steps and wall seconds (training plus those
evaluations) until solved, per seed, medians over the solved seeds, and ours/SB3 ratios.

``reinforce``: training episodes of our REINFORCE on CartPole until the running mean of its returns
reaches 475 (the agent driven directly: the target is about training episodes, not evaluation).

``mountaincar`` / ``deep_sea``: our RND-PPO against our PPO with the same PPO settings (those of
``algo=rnd_ppo`` plus ``conf/tuned/rnd_ppo_<env>.yaml``; ``gamma = gamma_ext``), through the
runner. Reported: env steps until the flag / the deep-sea reward is first reached in training (the
run's ``charts/episodic_return_max`` in its ``metrics.jsonl``), until the greedy evaluation reaches it
(solved), and the final greedy evaluation: its mean return and the share of its episodes that ended
in a terminal state (MountainCar: reached the flag). MountainCar runs train the whole budget (no
early stop) so that final evaluation measures the policy after the budget.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench import peers
from bench.jobs import write_rows
from bench.ours import OursRun, run_ours
from bench.stats import exact_median, known_median
from bench.tables import markdown

SOLVED_RETURN = 475
SB3_HORIZON = 100_000  # the horizon of rl-zoo's annealing schedules


def ours(overrides: list[str], out: Path) -> OursRun:
    return run_ours(overrides + ["progress=false", "checkpoint.every_s=100000"], out)


# -- CartPole: ours vs SB3 ----------------------------------------------------------------------
def ours_cartpole(seed: int, args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    res = ours(["algo=ppo", "env=cartpole", f"seed={seed}", f"eval.episodes={args.eval_episodes}",
                f"eval.every_iterations={args.eval_every}", f"budget.env_steps={args.budget}", "threads=1"],
               tmp / f"ours_cartpole_{seed}").results
    return {"solved": res["solved"], "env_steps": res["solved_at_env_steps"],
            "wall_s": res["wall_time_s"] if res["solved"] else None, "final_eval": res["eval_return"]}


def sb3_cartpole(seed: int, args: argparse.Namespace) -> dict[str, Any]:
    protocol = peers.Protocol(args.eval_every, SB3_HORIZON, SOLVED_RETURN, per_rollout=True)
    run = peers.ppo_cartpole(seed, protocol, args.eval_episodes)
    solved = bool(run.curve) and run.curve[-1][2] >= SOLVED_RETURN
    return {"solved": solved, "env_steps": run.curve[-1][0] if solved else None,
            "wall_s": round(run.wall_s, 3) if solved else None, "final_eval": run.curve[-1][2] if run.curve else None}


def bench_cartpole(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    rows: dict[str, list[dict[str, Any]]] = {"ours": [], "sb3": []}
    for seed in args.seeds:
        rows["ours"].append({"seed": seed, **ours_cartpole(seed, args, tmp)})
        print("ours", rows["ours"][-1], flush=True)
        if not args.no_sb3:
            rows["sb3"].append({"seed": seed, **sb3_cartpole(seed, args)})
            print("sb3 ", rows["sb3"][-1], flush=True)
    summary: dict[str, Any] = {}
    for name, rs in rows.items():
        if rs:
            summary[name] = {"solved": f"{sum(r['solved'] for r in rs)}/{len(rs)}",
                             "median_env_steps": known_median([r["env_steps"] for r in rs]),
                             "median_wall_s": known_median([r["wall_s"] for r in rs])}
    if rows["sb3"] and summary["sb3"]["median_env_steps"] and summary["ours"]["median_env_steps"]:
        summary["ratio_ours_over_sb3"] = {
            k: round(summary["ours"][k] / summary["sb3"][k], 3) for k in ("median_env_steps", "median_wall_s")}
    return {"rows": rows, "summary": summary}


# -- REINFORCE on CartPole: episodes until the running mean of training returns reaches 475 ------------
def reinforce_seed(seed: int, episodes: int, hp: dict[str, Any]) -> dict[str, Any]:
    import torch

    from her_rl.algos.reinforce import Reinforce

    torch.manual_seed(seed)
    agent = Reinforce(env=peers.CARTPOLE, seed=seed, **hp)
    returns, ema, ema_at, last100_at, start = [], None, None, None, time.perf_counter()
    while len(returns) < episodes:
        for r in agent.train_iteration().episode_returns:
            returns.append(r)
            ema = r if ema is None else 0.95 * ema + 0.05 * r  # the classic "running reward"
            if ema_at is None and ema >= SOLVED_RETURN:
                ema_at = len(returns)
            if last100_at is None and len(returns) >= 100 and np.mean(returns[-100:]) >= SOLVED_RETURN:
                last100_at = len(returns)
    return {"seed": seed, "episodes_to_ema_475": ema_at, "episodes_to_last100_mean_475": last100_at,
            "mean_last100": float(np.mean(returns[-100:])), "wall_s": round(time.perf_counter() - start, 1)}


def bench_reinforce(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    import torch

    from her_rl.config.registry import defaults

    torch.set_num_threads(1)
    hp = defaults("reinforce")
    rows = []
    for seed in args.seeds:
        rows.append(reinforce_seed(seed, args.episodes, hp))
        print(rows[-1], flush=True)
    summary = {"ema_reached": f"{sum(r['episodes_to_ema_475'] is not None for r in rows)}/{len(rows)}",
               "median_episodes_to_ema_475": known_median([r["episodes_to_ema_475"] for r in rows]),
               "median_episodes_to_last100_mean_475": known_median([r["episodes_to_last100_mean_475"] for r in rows])}
    return {"rows": rows, "summary": summary}


# -- MountainCar / deep sea: RND-PPO vs PPO ------------------------------------------------------------
def ppo_overrides_like_rnd(env: str, overrides: list[str] = ()) -> list[str]:
    """Our PPO with exactly the PPO settings RND-PPO gets on ``env`` (its algo group plus any
    ``tuned/rnd_ppo_<env>.yaml``, as composed with ``overrides``; gamma = gamma_ext)."""
    from omegaconf import OmegaConf

    from her_rl.config.compose import compose

    rnd = OmegaConf.to_container(compose(["algo=rnd_ppo", f"env={env}", *overrides]).algo, resolve=True)
    ppo_keys = set(compose(["algo=ppo", f"env={env}"]).algo) - {"name", "_target_", "gamma"}
    return [f"algo.gamma={rnd['gamma_ext']}"] + [f"algo.{k}={json.dumps(rnd[k])}" for k in sorted(ppo_keys & set(rnd))]


def exploration_runs(args: argparse.Namespace, env: str, size: int | None) -> dict[str, tuple[list[str], int]]:
    """Each algorithm's overrides and env-step budget at one deep sea size (MountainCar: None);
    ``--set`` applies to both, replacing a default."""
    common = [f"env={env}", "threads=1", f"eval.every_iterations={args.eval_every}"]
    if env == "deep_sea":
        common += [f"size={size}", "eval.episodes=1"]  # deterministic env + greedy policy
    else:  # train the whole budget: the final evaluation says how reliably the flag is reached
        common += [f"eval.episodes={args.eval_episodes}", "eval.stop_when_solved=false"]
    algos = {"rnd_ppo": ["algo=rnd_ppo"], "ppo": ["algo=ppo", *ppo_overrides_like_rnd(env, common)]}
    keys = {o.split("=", 1)[0] for o in args.set}
    budgets = {"rnd_ppo": args.budget, "ppo": args.ppo_budget or args.budget}
    return {name: ([o for o in ovr if o.split("=", 1)[0] not in keys] + list(args.set) + common
                   + [f"budget.env_steps={budgets[name]}"], budgets[name]) for name, ovr in algos.items()}


def exploration_row(run: OursRun, seed: int, size: int | None, budget: int, found: float) -> dict[str, Any]:
    res = run.results
    return {"seed": seed, "size": size, "budget": budget,
            "first_found_train_steps": run.first_step_above("charts/episodic_return_max", found),
            "solved": res["solved"], "solved_at_env_steps": res["solved_at_env_steps"], "env_steps": res["env_steps"],
            "wall_s": res["wall_time_s"], "final_eval": res["eval_return"],
            "final_eval_terminated": res["eval_terminated_rate"]}


def bench_exploration(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    env = {"mountaincar": "mountaincar", "deep_sea": "deep_sea"}[args.task]
    found = -200.0 if env == "mountaincar" else 0.5  # a training episode above this reached the goal
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name in args.algos}
    report: dict[str, Any] = {"rows": rows, "summary": {}}
    for size in args.size if env == "deep_sea" else [None]:
        algos = exploration_runs(args, env, size)
        for seed in args.seeds:
            for name in args.algos:
                overrides, budget = algos[name]
                run = ours(overrides + [f"seed={seed}"], tmp / f"{name}_{env}_{size}_{seed}")
                rows[name].append(exploration_row(run, seed, size, budget, found))
                print(name, rows[name][-1], flush=True)
                report["summary"] = summarize(rows)
                if args.out:  # rewritten after every run, so a long sweep loses nothing when stopped
                    write_rows(args.out, rows, summary=report["summary"], args=args)
    return report


def summarize(rows: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Per algorithm (and per deep sea size when there is more than one): solved share and medians."""
    def one(rs: list[dict[str, Any]]) -> dict[str, Any]:
        return {"solved": f"{sum(r['solved'] for r in rs)}/{len(rs)}",
                "found_in_training": f"{sum(r['first_found_train_steps'] is not None for r in rs)}/{len(rs)}",
                **{f"median_{key}": known_median([r[key] for r in rs]) for key in (
                    "first_found_train_steps", "solved_at_env_steps", "final_eval", "final_eval_terminated")}}

    summary = {}
    for name, rs in rows.items():
        sizes = sorted({r.get("size") for r in rs}, key=lambda v: -1 if v is None else v)
        summary[name] = one(rs) if len(sizes) <= 1 else {f"size {n}": one([r for r in rs if r.get("size") == n])
                                                         for n in sizes}
    return summary


def size_table(rows: dict[str, list[dict[str, Any]]]) -> str:
    """Markdown: per deep sea size, each algorithm's solved share and env steps to solve (per seed, median)."""
    names = list(rows)
    body = []
    for size in sorted({r["size"] for rs in rows.values() for r in rs}):
        cells: list[Any] = [size]
        for n in names:
            rs = [r for r in rows[n] if r["size"] == size]
            steps = [r["solved_at_env_steps"] for r in rs]
            per = " / ".join(f"{x:,}" if x is not None else f">{r['budget']:,}" for x, r in zip(steps, rs))
            med = exact_median([r["budget"] if x is None else x for x, r in zip(steps, rs)], [x is None for x in steps])
            cells += [f"{sum(r['solved'] for r in rs)}/{len(rs)}", per + (f" ({med:,.0f})" if med is not None else "")]
        body.append(cells)
    header = ["size"] + [h for n in names for h in (f"{n} solved", f"{n} solved at env steps (median)")]
    return markdown(header, "r" + "ll" * len(names), body)


def run(args: argparse.Namespace) -> dict[str, Any]:
    """The task's report: ``rows``, ``summary`` and the ``args`` it ran with (our run folders are temporary)."""
    args.budget = args.budget or (100_000 if args.task == "cartpole" else 300_000)
    args.eval_every = args.eval_every or (4 if args.task == "cartpole" else 20)
    with tempfile.TemporaryDirectory(prefix="bench_ppo_") as tmp:
        bench = {"cartpole": bench_cartpole, "reinforce": bench_reinforce}.get(args.task, bench_exploration)
        report = bench(args, Path(tmp))
    return {**report, "args": vars(args)}
