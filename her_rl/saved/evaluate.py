"""``her-run load=PATH``: a saved agent evaluated in its own env.

``load=`` rebuilds the saved run's agent and env from the checkpoint's config (only ``eval.*``,
``seed``, ``device``, ``threads`` and ``video.*`` may be given), evaluates greedily as training does
(:func:`her_rl.run.evaluation.evaluate`), and writes ``eval.json`` next to the checkpoint, or into the
folder given explicitly. With ``video=true`` it records greedy episodes into ``videos/`` there instead
(:mod:`her_rl.saved.video`).
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from her_rl.config.checks import TOP, options, resolved, validate
from her_rl.config.saved import check_saved, merge
from her_rl.envs import make_vec
from her_rl.errors import ConfigError, OutputError
from her_rl.folder import checkpoint, rundir
from her_rl.folder.atomic import write_atomic_text
from her_rl.folder.rundir import CHECKPOINT
from her_rl.run import trackers
from her_rl.run.evaluation import eval_seed, evaluate, success_rule_of
from her_rl.run.plan import Evaluation
from her_rl.run.runner import make_agent
from her_rl.saved import video
from her_rl.saved.policy import load as load_policy

EVAL, VIDEOS = "eval.json", "videos"  # what load= writes into a run folder


def evaluate_checkpoint(checked: Evaluation) -> dict[str, Any]:
    """``her-run load=PATH``, as the gate let it through: rebuild the saved run's agent and env, load its
    weights, evaluate greedily with the saved evaluation settings (``eval.*``, ``seed``, ``device`` and
    ``threads`` may be given); ``eval.json`` goes next to the checkpoint, or into ``checked.out`` if given.
    With ``video.enabled`` (``video=true``) the episodes are recorded instead: see :func:`record_videos`."""
    overrides = checked.overrides
    current = resolved(checked.config)
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
    config["video"] = options(current, overrides)  # this command's, not the saved run's
    validate(config)
    out = checked.out if checked.out is not None else path.parent
    lock = output_folder(out, VIDEOS if config["video"]["enabled"] else EVAL, given=checked.out is not None)
    try:
        if config["video"]["enabled"]:
            return record_videos(path, config, out, lock)
        report = _evaluate_saved(path, saved, config)
        try:
            with _writing(out, lock):
                write_atomic_text(out / EVAL, json.dumps(report, indent=2) + "\n")
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
    (:func:`her_rl.saved.policy.load`), episode ``i`` from ``reset(seed=seed + i)``, written to
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


__all__ = ["EVAL", "VIDEOS", "evaluate_checkpoint", "output_folder", "record_videos"]
