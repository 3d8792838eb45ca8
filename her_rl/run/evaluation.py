"""Greedy evaluation, how its success is told (:func:`success_source`), and ``her-run load=PATH``: a
saved agent evaluated in its own env.

``load=`` rebuilds the saved run's agent and env from the checkpoint's config (only ``eval.*``,
``seed``, ``device``, ``threads`` and ``video.*`` may be given), evaluates greedily, and writes
``eval.json`` next to the checkpoint, or into the folder given explicitly. With ``video=true`` it
records greedy episodes into ``videos/`` there instead (:mod:`her_rl.run.video`).
"""

from __future__ import annotations

import copy
import json
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig

from her_rl.folder import checkpoint, rundir
from her_rl.config import video as video_keys
from her_rl.run import trackers, video
from her_rl.run.build import make_agent
from her_rl.run.policy import load as load_policy
from her_rl.config.checks import resolved, validate
from her_rl.envs import make_vec
from her_rl.envs.time_limits import episode_cap
from her_rl.errors import ConfigError, EnvError, OutputError
from her_rl.config.saved import check_saved, merge
from her_rl.rl.success import SUCCESS_KEYS, EpisodeSuccess, SuccessRule
from her_rl.folder.rundir import CHECKPOINT
from her_rl.config.schema import TOP
from her_rl.run.progress import warn

EVAL, VIDEOS = "eval.json", "videos"  # what load= writes into a run folder
build = make_agent  # an agent to train from a run's config, by the name scripts use


def success_rule_of(agent: Any, env_cfg: dict[str, Any] | None = None) -> SuccessRule:
    """How ``agent``'s env says success: a hindsight learner's probed rule (info key, else
    compute_reward at the goal), else the info keys alone (``env.success_key`` or is_success/success)."""
    spec = getattr(agent, "spec", None)
    if isinstance(getattr(spec, "success", None), SuccessRule):
        return spec.success
    return SuccessRule((env_cfg or {}).get("success_key"))


UNKNOWN_LIMIT_STEPS = 1_000_000
"""How long an evaluation waits on an env whose time limit make_vec does not know (her-rl's own
batched envs end their episodes themselves; every other env has a TimeLimit: env.max_episode_steps)."""


def evaluate(agent, envs, seed: int, success: SuccessRule | None = None,
             max_steps: int | None = None) -> dict[str, float]:
    """Greedy evaluation: one episode per copy of ``envs``; mean return, length, terminated rate
    (episodes that ended by reaching a terminal state, not by the time limit: MountainCar's flag
    rate) and, where the env can tell success (``success``, see :mod:`her_rl.rl.success`), the
    success rate at the episodes' last step and at any step (``success_rate``, ``any_success_rate``).
    Episodes still running after ``max_steps`` steps (None: the env's time limit, see
    :func:`her_rl.envs.time_limits.episode_cap`) are an EnvError, never a silent hang."""
    success = success if success is not None else success_rule_of(agent)
    max_steps = max_steps or episode_cap(envs) or UNKNOWN_LIMIT_STEPS
    obs, _ = envs.reset(seed=seed)
    n = envs.num_envs
    returns, lengths = np.zeros(n), np.zeros(n, dtype=np.int64)
    done, ended_terminal = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
    tracker = EpisodeSuccess(success, n)
    for _ in range(max_steps):
        obs, reward, terminated, truncated, info = envs.step(agent.act(obs, explore=False))
        live = ~done
        returns[live] += np.asarray(reward)[live]
        lengths[live] += 1
        tracker.step(info, obs, live)
        ended_terminal |= live & np.asarray(terminated, dtype=bool)
        done |= np.asarray(terminated) | np.asarray(truncated)
        if done.all():
            break
    else:
        raise EnvError(f"env {env_name(envs)}: {int((~done).sum())} of {n} evaluation episodes still running after "
                       f"{max_steps:,} steps, past its time limit (env.max_episode_steps)")
    return {"return": float(returns.mean()), "length": float(lengths.mean()), **tracker.rates(),
            "terminated_rate": float(ended_terminal.mean())}


def env_name(envs) -> str:
    spec = getattr(envs, "spec", None)
    return str(getattr(spec, "id", None) or "")


def eval_seed(seed: int, point: int, stream: int = 7) -> int:
    """The seed of one evaluation: a run's ``seed`` and the ``point`` it evaluates at (the runner: its
    iteration; the benchmarks' SB3 peers: an env step); ``stream`` keeps other users' seeds apart."""
    return int(np.random.SeedSequence([seed, point, stream]).generate_state(1)[0])


def evaluate_checkpoint(cfg: DictConfig, out_dir: str | Path | None = None,
                        overrides: list[str] | None = None) -> dict[str, Any]:
    """``her-run load=PATH``: rebuild the saved run's agent and env, load its weights, evaluate
    greedily with the saved evaluation settings (``eval.*``, ``seed``, ``device`` and ``threads``
    may be given); ``eval.json`` goes next to the checkpoint, or into ``out_dir`` if given.
    With ``video.enabled`` (``video=true``) the episodes are recorded instead: see :func:`record_videos`."""
    current = resolved(cfg)
    TOP["load"].check("load", current.get("load"))
    if current.get("resume") not in (False, None):
        raise ConfigError(f"load= and resume={str(current['resume']).lower()} contradict each other: load= evaluates "
                          "a saved run, resume= trains it further; give one of them")
    path = Path(current["load"])
    if path.is_dir():
        path = path / CHECKPOINT
    saved = checkpoint.load(path)
    check_saved(saved, path)
    config, _ = merge(saved["config"], current, overrides, verb="evaluate", extra_safe=("seed",))
    config["video"] = video_keys.options(current, overrides)  # this command's, not the saved run's
    validate(config)
    out = Path(out_dir) if out_dir is not None else path.parent
    lock = output_folder(out, VIDEOS if config["video"]["enabled"] else EVAL, given=out_dir is not None)
    try:
        if config["video"]["enabled"]:
            return record_videos(path, config, out, lock)
        report = _evaluate_saved(path, saved, config)
        try:
            with _writing(out, lock):
                checkpoint.write_atomic_text(out / EVAL, json.dumps(report, indent=2) + "\n")
        except OSError as exc:
            raise OutputError(f"could not write {out / EVAL} ({exc.strerror or exc}); the report: "
                              f"{json.dumps(report)}") from None
        print(json.dumps(report))
        return report
    finally:
        if lock is not None:
            lock.release()


def output_folder(out: Path, name: str, given: bool) -> rundir.RunLock | None:
    """Check, before any work, the folder ``load=`` writes ``name`` into: a her-rl run folder (or a new
    or empty one), writable, not held by a live run (its lock is taken and returned, None for a
    folder yet to be made), with no folder, link or other file where ``name`` goes."""
    hint = "" if given else f" (hydra.run.dir=NEW_FOLDER writes {name} there instead)"
    try:
        rundir.check_folder(out)
        lock = rundir.RunLock.probe(out) if out.is_dir() else None
    except ConfigError as exc:
        raise ConfigError(f"load= cannot write {name}: {exc}{hint}") from None
    target = out / name
    wrong = target.is_symlink() or (target.exists() and not (target.is_dir() if name == VIDEOS else target.is_file()))
    if wrong:
        if lock is not None:
            lock.release()
        kind = "a folder" if name == VIDEOS else "a regular file"
        raise ConfigError(f"load= cannot write {name}: {target} is not {kind}; move it away{hint}")
    return lock


@contextmanager
def _writing(out: Path, lock: rundir.RunLock | None):
    """Hold ``out`` while load= writes there, yielding its lock: the one probed, else the folder made
    with a lock file (which marks it as her-rl's; both removed again if the write fails)."""
    if lock is not None:
        yield lock
        return
    made = not out.exists()
    lock = rundir.RunLock.acquire(out)
    try:
        lock.mark_owner()
        yield lock
    except BaseException:
        if made and lock.lost() is None:  # by path: only while the path still leads to the folder made
            (out / rundir.LOCK).unlink(missing_ok=True)
            rundir.remove_if_empty(out, stop_at=out.parent)
        raise
    finally:
        lock.release()


def _evaluate_saved(path: Path, saved: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    """The greedy evaluation of a saved agent: the eval.json report."""
    torch.set_num_threads(int(config["threads"]))
    agent = make_agent(config, config["device"], inference=True, state=saved["agent"], source=path,
                       checked=True)  # validate() checked it
    episodes, seed = int(config["eval"]["episodes"]), int(config["seed"])
    envs = make_vec(config["env"], episodes, seed=seed)
    try:
        result = evaluate(agent, envs, eval_seed(seed, 2**31), success_rule_of(agent, config["env"]))
    finally:
        envs.close()
    report = {"checkpoint": str(path), "algo": config["algo"]["name"], "env": config["env"]["name"],
              "env_id": config["env"]["id"], "episodes": episodes, "seed": seed,
              **{f"eval_{k}": v for k, v in result.items()}}
    return report


def record_videos(path: Path, config: dict[str, Any], out: Path, lock: rundir.RunLock | None = None) -> dict[str, Any]:
    """``her-run load=PATH video=true``: ``video.episodes`` greedy episodes of the run's policy
    (:func:`her_rl.run.policy.load`), episode ``i`` from ``reset(seed=seed + i)``, written to
    ``out/videos/episode-<i>.<video.format>`` (``lock``: ``out``'s, as :func:`output_folder` took it);
    prints one path a line (relative to the working directory when below it). ``out`` or ``videos/``
    deleted, moved or replaced by a link meanwhile is an OutputError (exit 5), nothing written there."""
    options = config["video"]
    torch.set_num_threads(int(config["threads"]))
    video.offscreen()  # before loading: making the policy's env imports MuJoCo for Fetch runs
    policy = load_policy(path, device=str(config["device"]))
    folder = out / VIDEOS
    try:
        with _writing(out, lock) as held:  # out and videos/ are held by identity while episodes are recorded
            paths = video.record(policy, folder, episodes=int(options["episodes"]), seed=int(config["seed"]),
                                 fps=options["fps"], fmt=str(options["format"]), lock=held)
    except OSError as exc:
        raise OutputError(f"could not write the videos into {folder} ({exc.strerror or exc})") from None
    for file in paths:
        print(video.shown(file))
    if out == path.parent:  # the run's own folder: its trackers (logger=[...,wandb,mlflow]) get the videos too
        trackers.send_videos(out, config, paths, lock)
    return {"checkpoint": str(path), "videos": [str(p) for p in paths]}


def success_source(envs: Any, rule: SuccessRule, env_cfg: dict[str, Any], goal_env: bool) -> bool:
    """Whether success can be told in ``envs`` (one reset and one random step show what the step
    info carries); a goal env judged by compute_reward, or not at all, gets one warning line."""
    envs.reset(seed=0)
    space = copy.deepcopy(envs.action_space)
    space.seed(0)
    _, _, _, _, info = envs.step(space.sample())
    keys = (rule.key,) if rule.key else SUCCESS_KEYS
    if any(key in info for key in keys):
        return True
    name = env_cfg.get("id")
    if rule.key:
        shown = ", ".join(sorted(k for k in info if not k.startswith("_"))) or "none"
        warn(f"env {name}: env.success_key={rule.key!r} is not in its step info (its keys: {shown})"
             + ("; success is read from compute_reward at each episode's last step" if rule.goal_reward is not None
                else "; no success rate is reported"))
    elif goal_env and rule.goal_reward is not None:
        warn(f"env {name} reports neither info['is_success'] nor info['success']: success is read from "
             f"compute_reward at each episode's last step (env.success_key names another key)")
    elif goal_env:
        warn(f"env {name} reports no success in its info and its compute_reward has no single value at the "
             f"goal: no success rate is reported, runs are judged by return (env.success_key names the key)")
        return False
    else:
        return False
    return rule.goal_reward is not None
