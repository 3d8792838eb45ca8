"""The Fetch frontier: a preset (``experiment=fetch_push_frontier`` and its siblings) against its SB3
twin (SB3 SAC + HER given the preset's net, batch, gamma, updates per env step and HER settings:
:func:`bench.zoo.twin_settings`), one protocol on both sides, rows kept in ``docs/bench/fetch_frontier.json``:

    {"rows": [{"side": "ours" | "sb3", "algo", "env", "seed", "preset", "eval_episodes",
               "overrides" (ours) | "settings" (sb3), "evals": [[env_steps, success, wall_s], ...],
               "set": [override, ...] (a variant of the preset: a series of its own; absent otherwise)}]}

Protocol: an evaluation of ``eval.episodes`` fresh greedy episodes (a new seed each time) every
``eval.every_env_steps`` env steps of the preset, success = ``is_success`` at each episode's last
step; the twin plays the episodes ours plays at the same env step (:func:`ours_eval_seed`; rows with
``"eval_draws": "ours"``), so that both sides score on the same goals and block positions; wall
seconds count from the start of training and include the evaluations; one torch thread. The rows file
is read, extended and rewritten atomically under a lock after every run, so runs of several
processes (one per seed) land in one file as they finish.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import statistics
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from bench import peers, zoo
from bench.continuous import HORIZON
from bench.stats import first_reaching, interval
from bench.tables import markdown

PRESETS = ("fetch_push_frontier", "fetch_pick_and_place_frontier", "fetch_slide_frontier")


def preset_config(preset: str, sets: Sequence[str] = ()) -> Any:
    """The preset's composed config, with a variant's overrides ``sets``."""
    from her_rl.config.compose import compose

    return compose([f"experiment={preset}", *sets])


def env_id(preset: str) -> str:
    return str(preset_config(preset).env.id)


TWIN_SETS = ("env.start_in_gripper", "algo.batch_size")
"""The overrides a twin mirrors, so the only ones a twin's variant may have: any other would run the
twin unchanged under the variant's name."""


def twin(preset: str, sets: Sequence[str] = ()) -> dict[str, Any]:
    """The SB3 twin's settings for the preset's composed learner (with a variant's ``sets``); for the
    3-step presets (FetchPickAndPlace, FetchSlide) the nearest twin, with 1-step returns and ``differs``
    saying so. Held starts (``env.start_in_gripper``) are mirrored: the twin's training env holds the
    same share (:func:`bench.zoo.build`)."""
    from omegaconf import OmegaConf

    cfg = preset_config(preset, sets)
    settings = zoo.twin_settings(OmegaConf.to_container(cfg.algo, resolve=True), HORIZON, one_step=True)
    if cfg.env.get("start_in_gripper"):
        settings["start_in_gripper"] = float(cfg.env.start_in_gripper)
    return settings


def check_twin_sets(sets: Sequence[str]) -> None:
    """Refuse (ValueError, one line) a twin variant's override the twin does not mirror."""
    for override in sets:
        if override.split("=", 1)[0].lstrip("+~") not in TWIN_SETS:
            raise ValueError(f"{override}: the SB3 twin mirrors only {', '.join(TWIN_SETS)}")


def ours_eval_seed(seed: int, env_steps: int, cycle_steps: int) -> int:
    """The seed ours resets its evaluation envs with when it evaluates at ``env_steps``:
    ``eval_seed(seed, iteration)``, its iteration being one cycle of ``cycle_steps`` env steps (Fetch
    episodes never end before their 50 steps, so every cycle is as long), the first to reach
    ``env_steps``. The same seed gives the same episodes on both sides (``gymnasium.make_vec``)."""
    from her_rl.run.evaluation import eval_seed

    return eval_seed(seed, -(-env_steps // cycle_steps))


def run_sb3(preset: str, seed: int, sets: Sequence[str] = ()) -> dict[str, Any]:
    """One SB3 twin run of the preset (or its variant ``sets``) to its budget, each evaluation on the
    episodes ours evaluates on at that env step; its row."""
    cfg, settings = preset_config(preset, sets), twin(preset, sets)
    protocol = peers.Protocol(int(cfg.eval.every_env_steps), int(cfg.budget.env_steps), cap_at_evals=True)
    cycle_steps = int(settings["train_freq_episodes"]) * HORIZON
    run, _ = zoo.train_peer(settings, cfg.env.id, {}, seed, protocol, int(cfg.eval.episodes), HORIZON,
                            f"SB3 twin {cfg.env.id} seed {seed}",
                            eval_seed_at=lambda step: ours_eval_seed(seed, step, cycle_steps))
    return {"side": "sb3", "algo": settings["algo"], "env": str(cfg.env.id), "seed": seed, "preset": preset,
            "eval_episodes": int(cfg.eval.episodes), "settings": settings, "eval_draws": "ours",
            "evals": [[int(step), float(value), float(wall)] for step, wall, value in run.curve],
            **({"set": list(sets)} if sets else {})}


def run_ours(preset: str, seed: int, sets: Sequence[str] = (), out: Path | None = None) -> dict[str, Any]:
    """One run of ``her-run experiment=<preset> seed=<seed> <sets>`` to its budget (no early stop);
    its row. ``sets``: overrides that make a variant of the preset (its rows are a series of their own).
    ``out``: the run folder, kept (to evaluate its final policy later); None: a temporary one."""
    from bench import ours

    overrides = [f"experiment={preset}", f"seed={seed}", "eval.stop_when_solved=false", "progress=false", "threads=1",
                 *sets]
    return ours_row(preset, seed, overrides, ours.run_ours(overrides, out).metrics, sets)


def ours_row(preset: str, seed: int, overrides: Sequence[str], metrics: dict[str, Any],
             sets: Sequence[str] = ()) -> dict[str, Any]:
    """The row of a finished run of the preset from its metrics (``her_rl.folder.metrics.read_metrics``):
    evaluations as [env steps, success, seconds since training began]."""
    from bench.likeforlike import training_start

    points = metrics.get("eval/success_rate", [])
    start = training_start(metrics, {p.step for p in points})
    cfg = preset_config(preset, sets)  # a variant may run another learner or evaluate otherwise
    row = {"side": "ours", "algo": str(cfg.algo.name), "env": str(cfg.env.id), "seed": seed, "preset": preset,
           "eval_episodes": int(cfg.eval.episodes), "overrides": list(overrides),
           "evals": [[p.step, round(p.value, 3), round(p.wall_time - start, 1)] for p in points]}
    return {**row, "set": list(sets)} if sets else row


def check_sets(preset: str, sets: Sequence[str]) -> None:
    """Refuse (ConfigError, one line) overrides that do not make a valid variant of the preset."""
    from omegaconf import OmegaConf

    from her_rl.config.checks import check
    from her_rl.config.compose import compose

    try:
        cfg = compose([f"experiment={preset}", *sets])
    except Exception as exc:  # noqa: BLE001  (Hydra raises its own types for a malformed override)
        from her_rl.errors import ConfigError

        raise ConfigError(" ".join(str(exc).split())) from None
    check(OmegaConf.to_container(cfg, resolve=True))


def play(env_id: str, act: Callable[[Any, Any], Any], episodes: int, seed: int) -> Iterator[tuple[Any, bool]]:
    """Play ``episodes`` fresh episodes of ``env_id`` (seeds ``seed``, ``seed + 1``, ...) to their
    end with ``act(env, obs) -> action``; yield each one's first observation and whether its last
    step said ``is_success``."""
    import gymnasium as gym

    from her_rl.envs.families import ensure_registered

    ensure_registered(env_id)
    env = gym.make(env_id)
    try:
        for i in range(episodes):
            first, _ = env.reset(seed=seed + i)
            obs, done, info = first, False, {}
            while not done:
                obs, _, terminated, truncated, info = env.step(act(env, obs))
                done = terminated or truncated
            yield first, bool(info.get("is_success"))
    finally:
        env.close()


def still_success(env_id: str, episodes: int, seed: int = 10_000) -> float:
    """Success of an arm that never moves (zero actions to the time limit), over ``episodes`` fresh
    episodes: the level a curve starts from, where the object already lies within reach of the goal."""
    import numpy as np

    def still(env: Any, obs: Any) -> Any:
        return np.zeros(env.action_space.shape, env.action_space.dtype)

    return sum(hit for _, hit in play(env_id, still, episodes, seed)) / episodes


def success_by_goal_height(policy: Any, env_id: str, episodes: int, seed: int = 50_000,
                           above: float = 0.01) -> dict[str, tuple[int, float | None]]:
    """A policy's greedy success (``policy.predict``, deterministic) split by where the goal lies:
    ``"in the air"`` when it is more than ``above`` over the object's start height, else ``"on the
    table"`` (FetchPickAndPlace puts about half its goals in the air). name -> (episodes, success;
    None when no episode had such a goal)."""
    split: dict[str, list[bool]] = {"on the table": [], "in the air": []}
    greedy = lambda env, obs: policy.predict(obs, deterministic=True)[0]  # noqa: E731
    for first, hit in play(env_id, greedy, episodes, seed):
        high = first["desired_goal"][2] - first["achieved_goal"][2] > above
        split["in the air" if high else "on the table"].append(hit)
    return {k: (len(v), sum(v) / len(v) if v else None) for k, v in split.items()}


PANDA_PICK_AND_PLACE = {"gripper": slice(0, 3), "fingers": 6, "object": slice(7, 10)}
"""Where panda-gym's PickAndPlace observation holds the gripper's position, its fingers' width and the block's
position (panda-gym 3: the robot's 7 values, then the block's 12)."""


def carry_success(policy: Any, env_id: str, episodes: int, seed: int = 60_000, held: float = 0.03,
                  air: float = 0.05) -> tuple[int, int, int]:
    """Can a policy carry a block it did not have to grasp? Over fresh episodes of a panda-gym PickAndPlace
    env, those whose goal lies at least ``air`` above the block's start are played: a scripted grasp (fingers
    open over the block, down, closed, up) until the block is ``held`` above its start, then the policy's
    greedy actions (``policy.predict``) to the episode's end. Returns (episodes with a goal in the air, those
    the grasp handed over, successes after the hand-over)."""
    import gymnasium as gym
    import numpy as np

    from her_rl.envs.families import ensure_registered

    at = PANDA_PICK_AND_PLACE
    ensure_registered(env_id)
    env = gym.make(env_id)
    in_air = handed = carried = 0
    try:
        for i in range(episodes):
            obs, _ = env.reset(seed=seed + i)
            start = float(obs["achieved_goal"][2])
            if obs["desired_goal"][2] - start < air:
                continue
            in_air, ours, done, info, t = in_air + 1, False, False, {}, 0
            while not done:
                o = obs["observation"]
                gripper, fingers, block = o[at["gripper"]], float(o[at["fingers"]]), o[at["object"]]
                ours = ours or float(obs["achieved_goal"][2]) - start >= held
                if ours:
                    action = policy.predict(obs, deterministic=True)[0]
                else:
                    action, over = np.zeros(4, np.float32), np.linalg.norm(block[:2] - gripper[:2]) < 0.01
                    if t < 3 or (fingers > 0.039 and (not over or gripper[2] - block[2] > 0.01)):
                        target = block + np.array([0.0, 0.0, 0.0 if over else 0.05])
                        action[:3], action[3] = np.clip((target - gripper) * 10, -1, 1), 1.0  # open, over it, down
                    else:
                        action[2], action[3] = (1.0 if fingers < 0.045 else 0.0), -1.0  # close; once shut on it, up
                obs, _, terminated, truncated, info = env.step(action)
                done, t = terminated or truncated, t + 1
            handed += ours
            carried += ours and bool(info.get("is_success"))
    finally:
        env.close()
    return in_air, handed, carried


def lift_rates(episodes: dict[str, Any], window: int = 1000, rises: Sequence[float] = (0.03, 0.08)
               ) -> list[tuple[int, int, list[float]]]:
    """How often a run's training episodes raised the object: from the stored episodes of its replay
    (a checkpoint's ``agent.memory.episodes``), oldest first, over each ``window`` of episodes, the share
    whose object (the achieved goal's last coordinate, its height) rose at least each of ``rises`` above
    where it started, at any step. Hindsight can relabel a goal in the air only from such episodes.
    Rows: (first episode, end episode, [share per rise])."""
    import numpy as np

    data, size, pos = episodes["data"], int(episodes["size"]), int(episodes["pos"])
    goals, length = np.asarray(data["achieved_goal"]), np.asarray(data.get("length"))
    if goals.ndim != 3 or length.ndim != 1 or min(len(goals), len(length)) < size or not 0 <= pos <= size \
            or length[:size].min(initial=1) < 1 or length[:size].max(initial=0) >= goals.shape[1]:
        raise ValueError(f"a replay of {size} episodes whose achieved goals ({goals.shape}) or lengths "
                         f"({length.shape}) do not fit together: not one her-rl wrote")
    height = goals[:size, :, -1]
    length = length[:size]
    order = np.roll(np.arange(size), -pos) if size == int(episodes["capacity"]) else np.arange(size)
    valid = np.arange(height.shape[1])[None, :] <= length[:, None]
    rose = (np.where(valid, height, -np.inf).max(axis=1) - height[:, 0])[order]
    return [(start, min(start + window, size), [float(np.mean(rose[start:start + window] >= r)) for r in rises])
            for start in range(0, size, window)]


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def add_row(path: str | Path, row: dict[str, Any]) -> None:
    """Append ``row`` to the rows file (created when missing), atomically and under a lock."""
    from bench.jobs import write_report

    path = Path(path)
    with _locked(path):
        report = json.loads(path.read_text()) if path.exists() else {"rows": []}
        report["rows"].append(row)
        write_report(path, report)


# ---------------------------------------------------------------- reading the rows


def frontier_rows(rows: Sequence[dict[str, Any]], preset: str, min_seeds: int = 1) -> dict[str, list[dict[str, Any]]]:
    """series -> the rows of the preset's runs: per side, and per variant (``set`` overrides); the
    preset's own (ours, then the twin) first, then the variants as the rows name them. Rows of other
    presets, and series of fewer than ``min_seeds`` runs, are left out."""
    out: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        if r.get("preset") == preset:
            out.setdefault(" ".join([r["side"], *r.get("set", [])]), []).append(r)
    order = sorted(out, key=lambda series: (bool(out[series][0].get("set")), out[series][0]["side"] != "ours"))
    return {series: out[series] for series in order if len(out[series]) >= min_seeds}


def side_name(rows: Sequence[dict[str, Any]]) -> str:
    r = rows[0]
    if r["side"] == "ours":
        return " ".join([r["algo"], *r.get("set", [])])
    one_step = any(d.startswith("n_step") for d in r.get("settings", {}).get("differs", []))
    kind = "1-step twin" if one_step else "twin"
    return " ".join([f"SB3 {r['algo'].upper()} + HER ({kind})", *r.get("set", [])])


def at_steps(rows: Sequence[dict[str, Any]]) -> dict[int, list[float]]:
    points: dict[int, list[float]] = {}
    for r in rows:
        for step, success, _ in r["evals"]:
            points.setdefault(int(step), []).append(float(success))
    return dict(sorted(points.items()))


def to_level(row: dict[str, Any], level: float) -> int | None:
    hit = first_reaching([(s, w, v) for s, v, w in row["evals"]], level)
    return int(hit[0]) if hit else None


def step_table(rows: Sequence[dict[str, Any]], preset: str, every: int | None = None, min_seeds: int = 1) -> str:
    """Per evaluation point (``every``: only those at multiples of it, and the last), each series' median
    and IQM [95% bootstrap interval] over its seeds (series of at least ``min_seeds`` runs)."""
    sides = frontier_rows(rows, preset, min_seeds)
    points = {side: at_steps(rs) for side, rs in sides.items()}
    header = ["env steps"] + [h for side in sides for h in (f"{side_name(sides[side])} median", "IQM [95% CI]")]
    body = []
    steps = sorted({s for p in points.values() for s in p})
    for step in steps:
        if every and step % every and step != steps[-1]:
            continue
        cells: list[Any] = [f"{step:,}"]
        for side in sides:
            got = points[side].get(step)
            iv = interval(got) if got else None
            cells += [f"{iv.median:.2f} (n={iv.n})", iv.fmt("iqm")] if iv else ["-", "-"]
        body.append(cells)
    return markdown(header, "r" * len(header), body)


def level_table(rows: Sequence[dict[str, Any]], preset: str, levels: Sequence[float] = (0.5, 0.9)) -> str:
    """Per run: env steps to each success level (- when never reached), its last evaluation and wall."""
    body = []
    for side, rs in frontier_rows(rows, preset).items():
        for r in sorted(rs, key=lambda r: r["seed"]):
            last = r["evals"][-1] if r["evals"] else [0, None, None]
            body.append([side_name(rs), r["seed"], *(_steps(to_level(r, lv)) for lv in levels),
                         f"{last[1]:.2f} at {last[0]:,}", f"{last[2]:,.0f}"])
        medians = [statistics.median([v if (v := to_level(r, lv)) is not None else float("inf") for r in rs])
                   for lv in levels]
        body.append([f"**{side_name(rs)} median**", f"n={len(rs)}", *(_steps(m) for m in medians), "", ""])
    header = ["learner", "seed", *(f"env steps to {lv}" for lv in levels), "last evaluation", "wall s"]
    return markdown(header, "llrrrr", body)


def _steps(v: float | None) -> str:
    return "-" if v is None or v == float("inf") else f"{int(v):,}"


def plot(rows: Sequence[dict[str, Any]], preset: str, path: str | Path, still: float | None = None,
         min_seeds: int = 1) -> None:
    """Success against env steps: per series (of at least ``min_seeds`` runs) the median over seeds as a
    line, the interquartile range as a band; ``still``: the motionless arm's success as a dotted line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(5.6, 3.6))
    for side, rs in frontier_rows(rows, preset, min_seeds).items():
        points = at_steps(rs)
        steps = np.array(list(points))
        vals = [np.array(v) for v in points.values()]
        (line,) = ax.plot(steps, [np.median(v) for v in vals], marker="o", markersize=2.5,
                          label=f"{side_name(rs)} (n={len(rs)})")
        ax.fill_between(steps, [np.percentile(v, 25) for v in vals], [np.percentile(v, 75) for v in vals],
                        color=line.get_color(), alpha=0.25)
    if still is not None:
        ax.axhline(still, color="grey", linestyle=":", linewidth=1, label=f"arm kept still ({still:.2f})")
    ax.set_title(f"{env_id(preset)}: experiment={preset}", fontsize=9)
    ax.set_xlabel("env steps")
    ax.xaxis.set_major_formatter(lambda v, _: f"{v / 1000:g}k" if v else "0")
    ax.set_ylabel("greedy success (50 episodes)")
    ax.set_ylim(-0.03, 1.03)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")  # where it covers the fewest points
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
