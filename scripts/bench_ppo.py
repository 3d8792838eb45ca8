"""Side-by-side on-policy benchmarks.

``--task cartpole`` (default): our PPO (through the her-run runner) against Stable-Baselines3 PPO,
both with rl-zoo's CartPole-v1 hyperparameters (8 envs, n_steps 32, batch 256, 20 epochs,
gae_lambda 0.8, gamma 0.98, lr and clip linearly annealed from 1e-3 and 0.2 over 1e5 steps,
ent_coef 0, separate 64x64 tanh actor and critic, 1 torch thread). Both are evaluated with the
same protocol and the same function (``her_rl.runner.evaluate``): every ``--eval-every``
iterations (= rollouts of 256 steps) the greedy policy plays ``--eval-episodes`` episodes; a run is
solved when their mean return is >= 475. Reported: env steps and wall seconds (training plus
those evaluations) until solved, per seed, medians, and ours/SB3 ratios.

``--task mountaincar`` / ``--task deep_sea``: our RND-PPO against our PPO with the same PPO
settings (those of ``conf/algo/rnd_ppo.yaml`` plus ``conf/tuned/rnd_ppo_<env>.yaml``; ``gamma = gamma_ext``),
through the runner.
Reported: env steps until the flag / the deep-sea reward is first reached in training (the run's
``charts/episodic_return_max`` in its ``metrics.jsonl``), until the greedy evaluation reaches it (solved),
and the final greedy evaluation: its mean return and the share of its episodes that ended in a terminal
state (MountainCar: reached the flag). MountainCar runs train the whole budget (no early stop) so
that final evaluation measures the policy after ``--budget`` steps.

    python scripts/bench_ppo.py --seeds 0 1 2
    python scripts/bench_ppo.py --task reinforce --seeds 0 1 2      # REINFORCE, CartPole, 1000 episodes
    python scripts/bench_ppo.py --task mountaincar --seeds 0 1 2 3 4 --budget 300000
    python scripts/bench_ppo.py --task deep_sea --size 20 --seeds 0 1 2 3 4   # tuned/rnd_ppo_deep_sea.yaml for both
    python scripts/bench_ppo.py --task deep_sea --size 10 20 30 40 50 --budget 2000000 --out ds.json  # the curve

SB3 is imported only inside :func:`sb3_cartpole` (a benchmark-only extra: ``pip install -e .[bench]``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import yaml
from omegaconf import OmegaConf

from her_rl.bench import OursRun, exact_median, run_ours, write_report
from her_rl.envs import make_vec
from her_rl.runner import compose, evaluate

ROOT = Path(__file__).resolve().parents[1]
CARTPOLE_ENV = {"name": "cartpole", "id": "CartPole-v1", "kwargs": {}, "solved_return": 475}


def _median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def ours(overrides: list[str], out: Path) -> OursRun:
    return run_ours(overrides + ["progress=false", "checkpoint.every_s=100000"], out)


# -- CartPole: ours vs SB3 ----------------------------------------------------------------------
def ours_cartpole(seed: int, args, tmp: Path) -> dict:
    res = ours([
        "algo=ppo", "env=cartpole", f"seed={seed}", f"eval.episodes={args.eval_episodes}",
        f"eval.every_iterations={args.eval_every}", f"budget.env_steps={args.budget}", "threads=1",
    ], tmp / f"ours_cartpole_{seed}").results
    return {"solved": res["solved"], "env_steps": res["solved_at_env_steps"],
            "wall_s": res["wall_time_s"] if res["solved"] else None, "final_eval": res["eval_return"]}


def sb3_cartpole(seed: int, args) -> dict:
    from stable_baselines3 import PPO as SB3PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env

    torch.set_num_threads(1)

    def linear(v0):
        return lambda progress_remaining: progress_remaining * v0

    class Greedy:  # the runner's evaluate() calls agent.act(obs, explore=False)
        def __init__(self, model):
            self.model = model

        def act(self, obs, explore=False):
            return self.model.predict(obs, deterministic=not explore)[0]

    eval_envs = make_vec(CARTPOLE_ENV, args.eval_episodes, seed=seed)
    state = {"rollouts": 0, "solved_at": None, "eval": None}

    class EvalEvery(BaseCallback):
        def _on_step(self) -> bool:
            return state["solved_at"] is None

        def _on_rollout_end(self) -> None:
            state["rollouts"] += 1
            if state["rollouts"] % args.eval_every == 0:
                seed_i = int(np.random.SeedSequence([seed, state["rollouts"], 7]).generate_state(1)[0])
                state["eval"] = evaluate(Greedy(self.model), eval_envs, seed_i)["return"]
                if state["eval"] >= 475:
                    state["solved_at"] = self.num_timesteps

    start = time.perf_counter()
    env = make_vec_env("CartPole-v1", n_envs=8, seed=seed)
    model = SB3PPO("MlpPolicy", env, n_steps=32, batch_size=256, n_epochs=20, gae_lambda=0.8, gamma=0.98,
                   learning_rate=linear(1e-3), clip_range=linear(0.2), ent_coef=0.0, seed=seed, device="cpu",
                   verbose=0)
    model.learn(total_timesteps=100_000, callback=EvalEvery())  # 1e5: the horizon of rl-zoo's schedules
    wall = time.perf_counter() - start
    solved = state["solved_at"] is not None
    return {"solved": solved, "env_steps": state["solved_at"], "wall_s": round(wall, 3) if solved else None,
            "final_eval": state["eval"]}


def bench_cartpole(args, tmp: Path) -> dict:
    rows = {"ours": [], "sb3": []}
    for seed in args.seeds:
        rows["ours"].append({"seed": seed, **ours_cartpole(seed, args, tmp)})
        print("ours", rows["ours"][-1], flush=True)
        if not args.no_sb3:
            rows["sb3"].append({"seed": seed, **sb3_cartpole(seed, args)})
            print("sb3 ", rows["sb3"][-1], flush=True)
    summary = {}
    for name, rs in rows.items():
        if rs:
            summary[name] = {"solved": f"{sum(r['solved'] for r in rs)}/{len(rs)}",
                             "median_env_steps": _median([r["env_steps"] for r in rs]),
                             "median_wall_s": _median([r["wall_s"] for r in rs])}
    if rows["sb3"] and summary["sb3"]["median_env_steps"] and summary["ours"]["median_env_steps"]:
        summary["ratio_ours_over_sb3"] = {
            k: round(summary["ours"][k] / summary["sb3"][k], 3) for k in ("median_env_steps", "median_wall_s")}
    return {"rows": rows, "summary": summary}


# -- REINFORCE on CartPole: episodes until the running mean of training returns reaches 475 ------------
def bench_reinforce(args, tmp: Path) -> dict:
    """Drives the agent directly (the target is about training episodes, not greedy evaluation)."""
    from her_rl.algos.reinforce import Reinforce

    torch.set_num_threads(1)
    hp = yaml.safe_load((ROOT / "her_rl/conf/algo/reinforce.yaml").read_text())
    hp = {k: v for k, v in hp.items() if k not in ("name", "_target_")}
    rows = []
    for seed in args.seeds:
        torch.manual_seed(seed)
        agent = Reinforce(env=CARTPOLE_ENV, seed=seed, **hp)
        returns, ema, ema_at, last100_at, start = [], None, None, None, time.perf_counter()
        while len(returns) < args.episodes:
            for r in agent.train_iteration().episode_returns:
                returns.append(r)
                ema = r if ema is None else 0.95 * ema + 0.05 * r  # the classic "running reward"
                if ema_at is None and ema >= 475:
                    ema_at = len(returns)
                if last100_at is None and len(returns) >= 100 and np.mean(returns[-100:]) >= 475:
                    last100_at = len(returns)
        rows.append({"seed": seed, "episodes_to_ema_475": ema_at, "episodes_to_last100_mean_475": last100_at,
                     "mean_last100": float(np.mean(returns[-100:])), "wall_s": round(time.perf_counter() - start, 1)})
        print(rows[-1], flush=True)
    summary = {"ema_reached": f"{sum(r['episodes_to_ema_475'] is not None for r in rows)}/{len(rows)}",
               "median_episodes_to_ema_475": _median([r["episodes_to_ema_475"] for r in rows]),
               "median_episodes_to_last100_mean_475": _median([r["episodes_to_last100_mean_475"] for r in rows])}
    return {"rows": rows, "summary": summary}


# -- MountainCar / deep sea: RND-PPO vs PPO ------------------------------------------------------------
def ppo_overrides_like_rnd(env: str, overrides: list[str] = ()) -> list[str]:
    """Our PPO with exactly the PPO settings RND-PPO gets on ``env`` (its algo group plus any
    ``tuned/rnd_ppo_<env>.yaml``, as composed with ``overrides``; gamma = gamma_ext)."""
    rnd = OmegaConf.to_container(compose(["algo=rnd_ppo", f"env={env}", *overrides]).algo, resolve=True)
    ppo_keys = set(compose(["algo=ppo", f"env={env}"]).algo) - {"name", "_target_", "gamma"}
    return [f"algo.gamma={rnd['gamma_ext']}"] + [f"algo.{k}={json.dumps(rnd[k])}" for k in sorted(ppo_keys & set(rnd))]


def bench_exploration(args, tmp: Path) -> dict:
    env = {"mountaincar": "mountaincar", "deep_sea": "deep_sea"}[args.task]
    found = -200.0 if env == "mountaincar" else 0.5  # a training episode above this reached the goal
    sizes = args.size if env == "deep_sea" else [None]
    rows = {name: [] for name in args.algos}
    report = {"rows": rows, "summary": {}}
    for size in sizes:
        common = [f"env={env}", "threads=1", f"eval.every_iterations={args.eval_every}"]
        if env == "deep_sea":
            common += [f"size={size}", "eval.episodes=1"]  # deterministic env + greedy policy
        else:  # train the whole budget: the final evaluation says how reliably the flag is reached
            common += [f"eval.episodes={args.eval_episodes}", "eval.stop_when_solved=false"]
        algos = {"rnd_ppo": ["algo=rnd_ppo"], "ppo": ["algo=ppo", *ppo_overrides_like_rnd(env, common)]}
        budgets = {"rnd_ppo": args.budget, "ppo": args.ppo_budget or args.budget}
        for name, ovr in algos.items():  # --set algo.KEY=VALUE applies to both sides, replacing a default
            keys = {o.split("=", 1)[0] for o in args.set}
            algos[name] = [o for o in ovr if o.split("=", 1)[0] not in keys] + list(args.set)
        for seed in args.seeds:
            for name in args.algos:
                out = tmp / f"{name}_{env}_{size}_{seed}"
                run = ours(algos[name] + common + [f"budget.env_steps={budgets[name]}", f"seed={seed}"], out)
                res = run.results
                row = {"seed": seed, "size": size, "budget": budgets[name],
                       "first_found_train_steps": run.first_step_above("charts/episodic_return_max", found),
                       "solved": res["solved"], "solved_at_env_steps": res["solved_at_env_steps"],
                       "env_steps": res["env_steps"], "wall_s": res["wall_time_s"], "final_eval": res["eval_return"],
                       "final_eval_terminated": res["eval_terminated_rate"]}
                rows[name].append(row)
                print(name, row, flush=True)
                report["summary"] = summarize(rows)
                if args.out:  # rewritten after every run, so a long sweep loses nothing when stopped
                    write_report(args.out, {**report, "args": vars(args)})
    return report


def summarize(rows: dict[str, list[dict]]) -> dict:
    """Per algorithm (and per deep sea size when there is more than one): solved share and medians."""
    def one(rs):
        return {"solved": f"{sum(r['solved'] for r in rs)}/{len(rs)}",
                "found_in_training": f"{sum(r['first_found_train_steps'] is not None for r in rs)}/{len(rs)}",
                "median_first_found_train_steps": _median([r["first_found_train_steps"] for r in rs]),
                "median_solved_at_env_steps": _median([r["solved_at_env_steps"] for r in rs]),
                "median_final_eval": _median([r["final_eval"] for r in rs]),
                "median_final_eval_terminated": _median([r["final_eval_terminated"] for r in rs])}
    summary = {}
    for name, rs in rows.items():
        sizes = sorted({r.get("size") for r in rs}, key=lambda v: -1 if v is None else v)
        if len(sizes) <= 1:
            summary[name] = one(rs)
        else:
            summary[name] = {f"size {n}": one([r for r in rs if r.get("size") == n]) for n in sizes}
    return summary


def size_table(rows: dict[str, list[dict]]) -> str:
    """Markdown: per deep sea size, each algorithm's solved share and env steps to solve (per seed, median)."""
    names = list(rows)
    sizes = sorted({r["size"] for rs in rows.values() for r in rs})
    head = "| size | " + " | ".join(f"{n} solved | {n} solved at env steps (median)" for n in names) + " |"
    lines = [head, "|---:|" + "---|---|" * len(names)]
    for size in sizes:
        cells = []
        for n in names:
            rs = [r for r in rows[n] if r["size"] == size]
            steps = [r["solved_at_env_steps"] for r in rs]
            per = " / ".join(f"{x:,}" if x is not None else f">{r['budget']:,}" for x, r in zip(steps, rs))
            med = exact_median([r["budget"] if x is None else x for x, r in zip(steps, rs)], [x is None for x in steps])
            cells += [f"{sum(r['solved'] for r in rs)}/{len(rs)}", per + (f" ({med:,.0f})" if med is not None else "")]
        lines.append(f"| {size} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
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
    args = p.parse_args()
    if args.table:
        print(size_table(json.loads(args.table.read_text())["rows"]))
        return
    args.budget = args.budget or (100_000 if args.task == "cartpole" else 300_000)
    args.eval_every = args.eval_every or (4 if args.task == "cartpole" else 20)
    with tempfile.TemporaryDirectory(prefix="bench_ppo_") as tmp:
        bench = {"cartpole": bench_cartpole, "reinforce": bench_reinforce}.get(args.task, bench_exploration)
        report = bench(args, Path(tmp))
    report["args"] = vars(args)
    print(json.dumps(report["summary"], indent=2))
    if args.task == "deep_sea" and len(args.size) > 1:
        print(size_table(report["rows"]))
    if args.out:
        write_report(args.out, report)


if __name__ == "__main__":
    main()
