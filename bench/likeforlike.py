"""Continuous HER like for like: ours against Stable-Baselines3 under one protocol, in two pairings:

* ``zoo``: our HER-DDPG (its Fetch tuned file) against SB3 at RL-Zoo's own hyperparameters
  (:data:`bench.zoo.ZOO`: SAC + HER on FetchReach, TQC + HER on the other Fetch tasks);
* ``twins``: each of her_sac, her_ddpg and her_td3 against its SB3 twin given our composed
  config's values (:func:`bench.zoo.twin_settings`); on Fetch both run 2 episodes per cycle
  (the her_sac / her_ddpg Fetch tuned files; her_td3 is given the same).

The protocol, both sides alike: an evaluation every ``eval_every`` env steps of ``eval_episodes``
greedy episodes on fresh seeds (a new seed at every evaluation), success = ``is_success`` at each
episode's last step; wall seconds count from the start of training (agent, replay and evaluation
envs built before, on both sides) and include the evaluations; one torch thread. Ours writes no
checkpoint before its end (``checkpoint.every_s`` huge, no replay in it) but does log TensorBoard
events and ``metrics.jsonl`` every iteration; SB3 logs nothing (no ``tensorboard_log``).

Per evaluation point the runs' success rates are summarised by their median and IQM with 95%
bootstrap intervals (:func:`bench.stats.interval`), in tables and in a PNG of curves (median
line, interquartile band), against env steps and against wall seconds; :func:`wall_table` compares
the sides at matched wall seconds.
"""

from __future__ import annotations

import statistics
import sys
import time
from typing import Any, Sequence

import numpy as np

from bench import peers, zoo
from bench.continuous import ENVS, HORIZON
from bench.ours import run_ours
from bench.stats import interval
from bench.tables import fmt, markdown

PAIRS = ("zoo", "twins")
ZOO_OURS = "her_ddpg"
TWIN_ALGOS = ("her_sac", "her_ddpg", "her_td3")  # the twins pair (her_crossq's twin: bench.frontier)
FETCH_CYCLE = ["algo.episodes_per_cycle=2"]  # twins on Fetch: the cycle of the Fetch tuned files, her_td3 too
NO_CHECKPOINTS = ["checkpoint.every_s=1000000000", "checkpoint.save_replay=false"]


def ours_overrides(job: dict[str, Any]) -> list[str]:
    extra = FETCH_CYCLE if job["pair"] != "zoo" and job["env"].startswith("fetch") else []
    return [f"algo={job['algo']}", f"env={job['env']}", f"seed={job['seed']}", "progress=false", "threads=1",
            *ENVS[job["env"]][2], *extra]


def ours_algo(job: dict[str, Any]) -> dict[str, Any]:
    """Our composed ``algo`` config for the job (tuned file and overrides applied)."""
    from omegaconf import OmegaConf

    from her_rl.config.compose import compose

    return OmegaConf.to_container(compose(ours_overrides(job)).algo, resolve=True)


def cycle_steps(job: dict[str, Any]) -> int:
    from her_rl.algos.cycle import cycle_episodes

    return cycle_episodes(ours_algo(job)["episodes_per_cycle"], HORIZON) * HORIZON


def peer_settings(job: dict[str, Any]) -> dict[str, Any]:
    if job["pair"] == "zoo":
        return zoo.zoo_settings(ENVS[job["env"]][0])
    return zoo.twin_settings(ours_algo(job), HORIZON)


def jobs(pair: str, envs: Sequence[str], seeds: Sequence[int], budget: int, eval_every: int, eval_episodes: int,
         sb3_max_seconds: float | None = None, ours_max_seconds: float | None = None) -> list[dict[str, Any]]:
    """Seed by seed, ours then its peer, so a bench stopped early holds as many runs of each side."""
    algos = [ZOO_OURS] if pair == "zoo" else list(TWIN_ALGOS)
    return [{"pair": pair if pair == "zoo" else algo, "side": side, "algo": algo, "env": env, "seed": seed,
             "budget": budget, "eval_every": eval_every, "eval_episodes": eval_episodes,
             "max_seconds": sb3_max_seconds if side == "sb3" else ours_max_seconds}
            for env in envs for algo in algos for seed in seeds for side in ("ours", "sb3")]


def refusal(planned: Sequence[dict[str, Any]]) -> str | None:
    """Why these jobs cannot give both sides evaluations at the same env steps (None: they can)."""
    for job in planned:  # the protocol first: it is wrong whatever is installed
        if job["eval_episodes"] < 50:
            return "--eval-episodes must be at least 50"
        if job["budget"] % job["eval_every"]:
            return "--budget must be a multiple of --eval-every (both sides evaluate at the same steps)"
        if job["side"] == "ours" and job["eval_every"] % cycle_steps(job):
            return (f"--eval-every {job['eval_every']} is not a whole number of {job['algo']} cycles on "
                    f"{job['env']} ({cycle_steps(job)} env steps each)")
        if why := zoo.robotics_missing(ENVS[job["env"]][0]):
            return why
        if job["side"] == "sb3":
            try:
                peer_settings(job)
            except ValueError as exc:
                return str(exc)
            if why := zoo.missing("zoo" if job["pair"] == "zoo" else "twin", ENVS[job["env"]][0]):
                return why
    return None


def label(row: dict[str, Any]) -> str:
    if row["side"] == "ours":
        return row["algo"]
    s = row["settings"]
    return f"SB3 {s['algo'].upper()} + HER" + (" (RL-Zoo)" if row["pair"] == "zoo" else " (twin)")


def training_start(metrics: dict[str, list[Any]], evals: set[int]) -> float:
    """Unix time training began: the first iteration without an evaluation logged its SPS at
    env_steps / SPS seconds in (the trainer's clock starts after the agent and eval envs exist)."""
    for p in metrics.get("charts/SPS", []):
        if p.step not in evals and p.value > 0:
            return p.wall_time - p.step / p.value
    raise ValueError("no iteration without an evaluation: cannot tell when training started")


def run_ours_job(job: dict[str, Any]) -> dict[str, Any]:
    every = job["eval_every"] // cycle_steps(job)
    overrides = [*ours_overrides(job), f"budget.env_steps={job['budget']}", f"eval.episodes={job['eval_episodes']}",
                 f"eval.every_iterations={every}", "eval.stop_when_solved=false", *NO_CHECKPOINTS]
    if job["max_seconds"]:
        overrides.append(f"budget.wall_time_s={job['max_seconds']}")
    run = run_ours(overrides)
    points = run.metrics.get("eval/success_rate", [])
    start = training_start(run.metrics, {p.step for p in points})
    curve = [(p.step, round(p.wall_time - start, 2), round(p.value, 3)) for p in points]
    return {"overrides": overrides, "settings": ours_algo(job), "curve": curve, "build_s": round(start - run.started, 2),
            "env_steps": int(run.results["env_steps"]), "wall_s": curve[-1][1] if curve else None}


def run_sb3_job(job: dict[str, Any]) -> dict[str, Any]:
    settings = peer_settings(job)
    env_id, kwargs, _ = ENVS[job["env"]]
    protocol = peers.Protocol(job["eval_every"], job["budget"], None, job["max_seconds"], cap_at_evals=True)
    run, build_s = zoo.train_peer(settings, env_id, kwargs, job["seed"], protocol, job["eval_episodes"], HORIZON,
                                  f"{settings['algo']} {env_id} seed {job['seed']}")
    return {"settings": settings, "curve": run.curve, "build_s": round(build_s, 2), "env_steps": run.env_steps,
            "wall_s": run.curve[-1][1] if run.curve else None}


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    print(f"[like] {job['pair']} {job['side']} {job['env']} seed {job['seed']} ...", file=sys.stderr, flush=True)
    began = time.perf_counter()
    row = {**job, **(run_ours_job(job) if job["side"] == "ours" else run_sb3_job(job))}
    row["learner"] = label(row)
    print(f"[like] {row['learner']} {job['env']} seed {job['seed']}: {row['env_steps']:,} steps, {row['wall_s']} s "
          f"training ({time.perf_counter() - began:.0f} s in all), last {row['curve'][-1] if row['curve'] else None}",
          file=sys.stderr, flush=True)
    return row


# ---------------------------------------------------------------- reading the rows


def groups(rows: Sequence[dict[str, Any]]) -> dict[tuple[str, str], dict[str, list[dict[str, Any]]]]:
    """(env, pair) -> side -> rows, in the order they first appear."""
    out: dict[tuple[str, str], dict[str, list[dict[str, Any]]]] = {}
    for r in rows:
        out.setdefault((r["env"], r["pair"]), {}).setdefault(r["side"], []).append(r)
    return out


def at_steps(side_rows: Sequence[dict[str, Any]]) -> dict[int, list[tuple[float, float]]]:
    """env step -> [(wall s, success)] of every run evaluated there."""
    points: dict[int, list[tuple[float, float]]] = {}
    for r in side_rows:
        for step, wall, value in r["curve"]:
            points.setdefault(int(step), []).append((float(wall), float(value)))
    return dict(sorted(points.items()))


def step_table(rows: Sequence[dict[str, Any]]) -> str:
    """Per (env, pair) and evaluation point: each side's median and IQM [95% CI] over its runs."""
    parts = []
    for (env, pair), sides in groups(rows).items():
        names = {side: label(rs[0]) for side, rs in sides.items()}
        points = {side: at_steps(rs) for side, rs in sides.items()}
        steps = sorted({s for p in points.values() for s in p})
        header, body = ["env steps"], []
        for side in sides:
            header += [f"{names[side]} median", "IQM [95% CI]", "wall s"]
        for step in steps:
            cells: list[Any] = [f"{step:,}"]
            for side in sides:
                got = points[side].get(step)
                if not got:
                    cells += ["-", "-", "-"]
                    continue
                iv = interval([v for _, v in got])
                cells += [f"{iv.median:.2f} (n={iv.n})", iv.fmt("iqm"), fmt(statistics.median(w for w, _ in got), 0)]
            body.append(cells)
        parts.append(f"**{env}, {pair}**\n\n" + markdown(header, "r" * len(header), body))
    return "\n\n".join(parts)


def success_by(row: dict[str, Any], wall: float) -> tuple[float, int] | None:
    """(success, env steps) of the run's last evaluation within ``wall`` seconds (None: none yet)."""
    done = [(v, s) for s, w, v in row["curve"] if w <= wall]
    return done[-1] if done else None


def wall_table(rows: Sequence[dict[str, Any]]) -> str:
    """Per (env, pair), at matched wall seconds (the quicker side's median run time, and half of it):
    each side's success there (median, IQM [95% CI]) over the runs evaluated by then, and the env
    steps those had reached (median); ``-`` where no run had been evaluated yet."""
    body = []
    for (env, pair), sides in groups(rows).items():
        if len(sides) < 2:
            continue
        ends = [statistics.median(r["wall_s"] for r in rs if r["wall_s"] is not None) for rs in sides.values()]
        for wall in (min(ends) / 2, min(ends)):
            for side, rs in sides.items():
                got = [g for g in (success_by(r, wall) for r in rs) if g is not None]
                cells = ["-", "-", "-"]
                if got:
                    iv = interval([v for v, _ in got])
                    cells = [f"{iv.median:.2f}", iv.fmt("iqm"), f"{statistics.median(s for _, s in got):,.0f}"]
                body.append([env, pair, f"{wall:,.0f}", label(rs[0]), *cells, f"{len(got)}/{len(rs)}"])
    return markdown(["env", "pair", "wall s", "learner", "success (median)", "IQM [95% CI]", "env steps reached",
                     "runs evaluated"], "llrlrrrr", body)


def run_table(rows: Sequence[dict[str, Any]]) -> str:
    body = [[r["env"], r["pair"], r["learner"], r["seed"], f"{r['env_steps']:,}", fmt(r["wall_s"], 1),
             fmt(r["build_s"], 1), r["curve"][-1][2] if r["curve"] else "-"] for r in rows]
    return markdown(["env", "pair", "learner", "seed", "env steps", "wall s (training)", "build s", "last success"],
                    "lllrrrrr", body)


def plot(rows: Sequence[dict[str, Any]], path: str) -> None:
    """Curves of every (env, pair): success against env steps (top) and wall seconds (bottom),
    per side the median over runs as a line and the interquartile range as a band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    grouped = groups(rows)
    fig, axes = plt.subplots(2, len(grouped), figsize=(4.2 * len(grouped), 6.4), squeeze=False)
    for col, ((env, pair), sides) in enumerate(grouped.items()):
        for side, rs in sides.items():
            points = at_steps(rs)
            steps = np.array(list(points))
            vals = [np.array([v for _, v in got]) for got in points.values()]
            walls = np.array([np.median([w for w, _ in got]) for got in points.values()])
            med = np.array([np.median(v) for v in vals])
            q1, q3 = np.array([np.percentile(v, 25) for v in vals]), np.array([np.percentile(v, 75) for v in vals])
            for ax, x in ((axes[0][col], steps), (axes[1][col], walls)):
                (line,) = ax.plot(x, med, marker="o", markersize=2.5, label=f"{label(rs[0])} (n={len(rs)})")
                ax.fill_between(x, q1, q3, color=line.get_color(), alpha=0.25)
        axes[0][col].set_title(f"{env}, {pair}", fontsize=10)
        axes[0][col].set_xlabel("env steps")
        axes[0][col].xaxis.set_major_formatter(lambda v, _: f"{v / 1000:g}k" if v else "0")
        axes[1][col].set_xlabel("wall seconds (training, incl. evaluations)")
        for ax in (axes[0][col], axes[1][col]):
            ax.set_ylim(-0.03, 1.03)
            ax.set_ylabel("greedy success")
            ax.grid(alpha=0.3)
        axes[0][col].legend(fontsize=7, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
