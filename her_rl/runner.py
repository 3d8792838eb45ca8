"""The one training driver: config -> checks -> env + agent -> training loop -> logs, checkpoint.

``run(cfg)`` first checks everything without writing anything (values, the env's spaces, the run
folder, the checkpoint to resume), then locks the run folder, seeds everything, trains iteration
by iteration, evaluates greedily every ``eval.every_iterations``, stops at the budget or once
solved, checkpoints atomically (after the first iteration, then every ``checkpoint.every_s``),
guards against non-finite losses and weights, and writes ``results.json``. ``resume=true``
continues the run in the folder from its saved config and checkpoint. Algorithms only implement
the interface in ``her_rl/agent.py``.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from her_rl import checkpoint, rundir, video
from her_rl.agent import IterationResult
from her_rl.build import make_agent
from her_rl.config import resolved, validate
from her_rl.envs import make_vec
from her_rl.envs.custom import import_env_module, import_given
from her_rl.errors import ConfigError, NonFiniteError, OutputError
from her_rl.evaluation import eval_seed, evaluate, evaluate_checkpoint
from her_rl.guard import Guard
from her_rl.logger import RunLogger, final_metrics, hparams_of
from her_rl.progress import Progress, clear_line, count, job_label
from her_rl.registry import EnvSpaces
from her_rl import requeue
from her_rl.resume import describe, merge
from her_rl.rl.utils import set_seed
from her_rl.rundir import CHECKPOINT, CONFIG, RESULTS
from her_rl.schema import TOP

__all__ = ["compose", "main", "run", "plan_run", "evaluate", "evaluate_checkpoint", "OutputError", "NonFiniteError"]


def compose(overrides: list[str] | None = None) -> DictConfig:
    """The config ``her-run`` would see for these overrides (for scripts, notebooks and tests)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module

    rundir.register_resolvers()
    with initialize_config_module(config_module="her_rl.conf", version_base="1.3"):
        return hydra_compose(config_name="config", overrides=video.expand_overrides(list(overrides or [])))


def main(overrides: list[str], out_dir: str | Path | None = None) -> dict[str, Any]:
    """``her-run`` in Python: only the given overrides count as given (resume/load by folder)."""
    return run(compose(overrides), out_dir=out_dir, overrides=overrides)


def _given_overrides(overrides: list[str] | None) -> list[str] | None:
    if overrides is None:
        from hydra.core.hydra_config import HydraConfig

        if HydraConfig.initialized():
            return list(HydraConfig.get().overrides.task)
    return None if overrides is None else list(overrides)


def _out_dir(cfg: dict[str, Any], out_dir: str | Path | None) -> Path:
    if out_dir is None:
        from hydra.core.hydra_config import HydraConfig

        if HydraConfig.initialized():
            return Path(HydraConfig.get().runtime.output_dir)
        return rundir.default_dir(cfg["algo"]["name"], cfg["env"]["name"], cfg["seed"])
    return Path(out_dir)


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return st.st_mtime_ns, st.st_size


def _check_writable(out: Path) -> None:
    """Refuse up front a run folder that could not be created or written (a file in the way, no
    permission), instead of failing after the run was set up."""
    target = out if out.exists() else next(p for p in out.absolute().parents if p.exists())
    if not target.is_dir():
        raise ConfigError(f"cannot use run folder {out}: {target} is not a folder")
    if not os.access(target, os.W_OK | os.X_OK):
        raise ConfigError(f"cannot use run folder {out}: no permission to write in {target}")


@dataclass
class Plan:
    """A checked training run: what to run, where, and from which checkpoint."""

    config: dict[str, Any]
    out: Path
    spaces: EnvSpaces
    overrides: list[str] | None
    saved: dict[str, Any] | None = None
    changes: dict[str, list] = field(default_factory=dict)
    ckpt_stamp: tuple[int, int] | None = None
    lock: rundir.RunLock | None = None

    @property
    def cfg(self) -> DictConfig:
        return OmegaConf.create(self.config)


def plan_run(cfg: DictConfig | dict[str, Any], out_dir: str | Path | None = None,
             overrides: list[str] | None = None) -> Plan:
    """Every check of a training run, before anything is built or written (it only reads)."""
    current = resolved(cfg)
    TOP["resume"].check("resume", current.get("resume"))
    video.refuse_without_load(current, overrides)
    import_given(overrides)  # env.id=module:Env-v0 given by the user: import the module that registers it
    out = _out_dir(current, out_dir)
    _check_writable(out)
    lock = rundir.RunLock.probe(out) if out.is_dir() else None  # an existing folder: refuse at once if live
    try:
        ckpt = out / CHECKPOINT
        stamp = _stamp(ckpt)
        mode = current["resume"]
        if stamp is not None and mode is False and not requeue.requeued(out):  # a requeued job resumes
            raise ConfigError(f"{out} already holds a checkpoint; pass resume=true to continue that run "
                              "(resume=auto: continue if there is one), or use a new folder")
        if stamp is None and mode is True:
            what = "does not exist" if not out.is_dir() else (
                "holds no checkpoint (the run stopped before its first one; resume=auto starts it afresh)"
                if (out / CONFIG).exists() else "holds no checkpoint")
            raise ConfigError(f"resume=true: run folder {out} {what}")
        saved, changes, config = None, {}, current
        if stamp is not None:
            saved = checkpoint.load(ckpt)
            import_env_module(saved["config"]["env"]["id"])  # the user resumes their own run: its env's module
            config, changes = merge(saved["config"], current, overrides)
        spaces = validate(cfg if saved is None else config)  # the unresolved cfg names interpolation sources
        return Plan(config, out, spaces, overrides, saved, changes, stamp, lock)
    except BaseException:
        if lock is not None:
            lock.release()
        raise


def _eval_due(eval_cfg, iteration: int, step: int, steps_this_iteration: int) -> bool:
    """Every ``every_env_steps`` env steps (the first iteration that crosses a multiple) when set,
    else every ``every_iterations`` iterations."""
    every = eval_cfg.get("every_env_steps")
    if every:
        return step // every > (step - steps_this_iteration) // every
    return iteration % eval_cfg.every_iterations == 0


def _is_solved(cfg: DictConfig, goal_env: bool, result: dict[str, float]) -> bool:
    if goal_env:
        return result["success_rate"] >= cfg.eval.success_threshold
    threshold = cfg.eval.return_threshold
    return threshold is not None and result["return"] >= threshold


def _log_iteration(logger: RunLogger, result: IterationResult, step: int, sps: float) -> dict[str, float]:
    charts = dict(result.metrics)
    charts["charts/SPS"] = sps
    if result.episode_returns:
        charts["charts/episodic_return"] = float(np.mean(result.episode_returns))
        charts["charts/episodic_length"] = float(np.mean(result.episode_lengths))
    if result.episode_successes:
        charts["charts/success_rate"] = float(np.mean(result.episode_successes))
    logger.scalars(charts, step)
    return charts


def _warn(message: str) -> None:
    clear_line()  # a warning starts on a clean line, not after the progress bar
    print(f"her-run: warning: {message}", file=sys.stderr, flush=True)


def run(cfg: DictConfig, out_dir: str | Path | None = None, overrides: list[str] | None = None) -> dict[str, Any]:
    """Train (or, with ``load=PATH``, evaluate) as configured; returns the results dict.

    ``overrides``: the keys given on the command line; with ``resume`` the run folder's saved
    config is the base and only these are compared with it. None (a config built in Python, not
    through Hydra): the whole config is compared. ``her_rl.runner.main`` passes them for you.
    """
    overrides = _given_overrides(overrides)
    if resolved(cfg).get("load"):
        return evaluate_checkpoint(cfg, out_dir, overrides)
    plan = plan_run(cfg, out_dir, overrides)
    try:
        return _train(plan)
    finally:
        if plan.lock is not None:
            plan.lock.release()


def _take_folder(plan: Plan) -> None:
    """Lock the run folder (creating it), after every check passed."""
    ckpt = plan.out / CHECKPOINT
    if plan.lock is None:
        try:
            plan.lock = rundir.RunLock.acquire(plan.out)
        except OSError as exc:
            raise ConfigError(f"cannot write in run folder {plan.out}: {exc.strerror or exc}") from None
        if _stamp(ckpt) != plan.ckpt_stamp:  # another run wrote there between our checks and the lock
            raise ConfigError(f"run folder {plan.out} changed while this run was starting (another run wrote a "
                              "checkpoint there); check it, then pass resume=true or pick another folder")
    plan.lock.mark_owner()
    for name in (CHECKPOINT, CONFIG, RESULTS):  # temp files of writes a killed run left behind
        checkpoint.remove_stale_temps(plan.out / name)


def _train(plan: Plan) -> dict[str, Any]:
    cfg, out, config = plan.cfg, plan.out, plan.config
    ckpt_path = out / CHECKPOINT
    torch.set_num_threads(int(cfg.threads))
    set_seed(int(cfg.seed))
    agent = make_agent(config, cfg.device, state=plan.saved["agent"] if plan.saved else None, source=ckpt_path)
    state: dict[str, Any] = {"env_steps": 0, "iteration": 0, "wall_time_s": 0.0, "episodes": 0,
                             "eval": None, "solved": False, "solved_at_env_steps": None}
    if plan.saved is not None:
        state.update(plan.saved["runner"])
        checkpoint.set_rng_state(plan.saved["rng"])
    _take_folder(plan)  # every check passed: from here on the folder is ours and may be written

    try:
        checkpoint.write_atomic_text(out / CONFIG, OmegaConf.to_yaml(cfg))
        rundir.record(out, "resume" if plan.saved else "start", env_steps=state["env_steps"],
                      overrides=plan.overrides, changed=plan.changes)
    except OSError as exc:
        raise ConfigError(f"cannot write in run folder {out}: {exc.strerror or exc}") from None
    if plan.saved is not None:
        requeue.clear(out)
        print(f"resumed from {ckpt_path} at env step {state['env_steps']:,}"
              + (f"; changed: {describe(plan.changes)}" if plan.changes else ""))
    elif cfg.resume == "auto":
        print(f"resume=auto: no checkpoint in {out}; starting a new run")

    goal_env = plan.spaces.goal_env
    budget, wall_budget = int(cfg.budget.env_steps), cfg.budget.wall_time_s
    eval_envs = make_vec(config["env"], int(cfg.eval.episodes), seed=int(cfg.seed))
    guard_cfg = config.get("guard") or {}
    guard = Guard(agent, keep_last_good=guard_cfg.get("nonfinite", "stop") == "skip")
    max_skips, skips_in_row = int(guard_cfg.get("max_skips", 10)), 0
    saved_at: list[int | None] = [state["env_steps"] if plan.saved is not None else None]
    save_failing = [False]

    def save_checkpoint(final: bool = False) -> bool:
        agent_state = agent.state_dict()
        if not cfg.checkpoint.save_replay:
            agent_state.pop("memory", None)
        try:
            checkpoint.save({"agent": agent_state, "runner": dict(state), "rng": checkpoint.rng_state(),
                             "config": config}, ckpt_path)
        except OSError as exc:
            if final or not save_failing[0]:  # once per failure streak, and always at the end
                kept = (f"the previous checkpoint (env step {saved_at[0]:,}) is kept" if saved_at[0] is not None
                        else "no checkpoint has been written yet")
                _warn(f"could not write checkpoint {ckpt_path} ({exc.strerror or exc}); {kept}")
            save_failing[0] = True
            return False
        saved_at[0], save_failing[0] = state["env_steps"], False
        return True

    def kept_checkpoint() -> str:
        if saved_at[0] is None:
            return "no checkpoint had been written yet"
        return f"the last good checkpoint {ckpt_path} (env step {saved_at[0]:,}) is kept"

    logger = RunLogger(out, start_step=state["env_steps"] + 1 if state["env_steps"] else 0)
    label, parallel = job_label(cfg.algo.name, cfg.env.name)
    progress = Progress(budget, wall_budget, step=state["env_steps"], elapsed=state["wall_time_s"], label=label,
                        enabled=bool(cfg.progress), plain=parallel)
    ended = "stopped"  # how the progress display ends: set below when the run ends normally
    logger.config(OmegaConf.to_yaml(cfg))
    interrupted: list[int] = []
    restore_signals = _stop_at_iteration_end_on_signal(interrupted)
    start = time.perf_counter() - state["wall_time_s"]
    # a fresh run checkpoints after its first iteration, so an early kill loses little
    last_ckpt = time.perf_counter() if plan.saved is not None else -float("inf")
    evaluated_at = state["iteration"] if state["eval"] is not None else -1
    saved_final = True
    try:
        while state["env_steps"] < budget and not state["solved"] and not interrupted:
            if wall_budget is not None and time.perf_counter() - start >= wall_budget:
                break
            result = agent.train_iteration()
            state["env_steps"] += result.env_steps
            state["iteration"] += 1
            state["episodes"] += len(result.episode_returns)
            state["wall_time_s"] = time.perf_counter() - start
            step = state["env_steps"]
            bad = guard.find_nonfinite(result.metrics)
            if bad is not None:
                where = f"non-finite {bad} in iteration {state['iteration']} (env step {step:,})"
                if not guard.keep_last_good:
                    raise NonFiniteError(f"{where}; training stopped without saving it, {kept_checkpoint()}")
                guard.restore_good()
                skips_in_row += 1
                if skips_in_row >= max_skips:
                    raise NonFiniteError(f"{where}, {skips_in_row} iterations in a row (guard.max_skips); training "
                                         f"stopped, {kept_checkpoint()}")
                _warn(f"{where}; update skipped, networks restored to the last good iteration")
                progress.update(step, state["wall_time_s"])
                continue
            skips_in_row = 0
            guard.remember_good()
            charts = _log_iteration(logger, result, step, step / max(state["wall_time_s"], 1e-9))
            shown = {"train": charts.get("charts/success_rate" if goal_env else "charts/episodic_return")}
            if _eval_due(cfg.eval, state["iteration"], step, result.env_steps):
                state["eval"] = evaluate(agent, eval_envs, eval_seed(cfg.seed, state["iteration"]))
                evaluated_at = state["iteration"]
                logger.scalars({f"eval/{k}": v for k, v in state["eval"].items()}, step)
                if _is_solved(cfg, goal_env, state["eval"]) and state["solved_at_env_steps"] is None:
                    state["solved_at_env_steps"] = step
                    state["solved"] = bool(cfg.eval.stop_when_solved)
                shown["eval"] = state["eval"]["success_rate" if goal_env else "return"]
            state["wall_time_s"] = time.perf_counter() - start
            progress.update(step, state["wall_time_s"], **shown)
            if time.perf_counter() - last_ckpt >= cfg.checkpoint.every_s:
                save_checkpoint()
                last_ckpt = time.perf_counter()
        if evaluated_at != state["iteration"] and not interrupted:
            state["eval"] = evaluate(agent, eval_envs, eval_seed(cfg.seed, state["iteration"]))
            logger.scalars({f"eval/{k}": v for k, v in state["eval"].items()}, state["env_steps"])
            if _is_solved(cfg, goal_env, state["eval"]) and state["solved_at_env_steps"] is None:
                state["solved_at_env_steps"] = state["env_steps"]
        state["wall_time_s"] = time.perf_counter() - start
        if state["eval"] is not None:
            progress.update(state["env_steps"], state["wall_time_s"],
                            eval=state["eval"]["success_rate" if goal_env else "return"])
        ended = ("stopped" if interrupted else "solved" if state["solved"]  # why the loop ended
                 else "done" if state["env_steps"] >= budget else "time up")
        if not interrupted:
            logger.hparams(hparams_of(config, plan.overrides), final_metrics(_results(cfg, state, goal_env, ckpt_path)))
        saved_final = save_checkpoint(final=True)
    finally:
        progress.close(ended)
        logger.close()
        restore_signals()
        eval_envs.close()
    if interrupted and interrupted[0] == requeue.preemption_signal() and saved_final:
        print(f"preempted at env step {state['env_steps']:,} (checkpoint saved); handing over to submitit "
              "to requeue the job, which resumes here", flush=True)
        requeue.hand_over(out, interrupted[0], state["env_steps"])
    if interrupted:
        what = "checkpoint saved" if saved_final else "checkpoint NOT saved"
        print(f"stopped by signal {interrupted[0]} at env step {state['env_steps']:,} ({what}); "
              f"continue with: her-run resume=true hydra.run.dir={out}", flush=True)
        raise SystemExit(128 + interrupted[0])

    results = _results(cfg, state, goal_env, ckpt_path)
    try:
        checkpoint.write_atomic_text(out / RESULTS, json.dumps(results, indent=2) + "\n")
    except OSError as exc:
        raise OutputError(f"could not write {out / RESULTS} ({exc.strerror or exc}); the run's numbers: "
                          f"{json.dumps(results)}") from None
    print(_summary(results, out))
    return results


def _stop_at_iteration_end_on_signal(received: list[int]):
    """Ctrl-C, SIGTERM (a cluster pre-empting the job), SIGHUP (the terminal closed) and, under
    submitit, its preemption signal end the run cleanly after the current iteration, with a
    checkpoint consistent with its counters; a second Ctrl-C aborts at once."""
    def handler(signum, frame):
        if received and signum == signal.SIGINT:
            raise KeyboardInterrupt
        received.append(signum)

    previous = {}
    for sig in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)):
        if sig is None:
            continue
        try:
            previous[sig] = signal.signal(sig, handler)
        except ValueError:  # not the main thread (some launchers): keep default behaviour
            pass

    restore_preemption = requeue.catch(received)  # under submitit: its preemption signal too

    def restore() -> None:
        for sig, old in previous.items():
            signal.signal(sig, old)
        restore_preemption()

    return restore


def _results(cfg: DictConfig, state: dict[str, Any], goal_env: bool, ckpt_path: Path) -> dict[str, Any]:
    ev = state["eval"] or {}
    results: dict[str, Any] = {
        "algo": cfg.algo.name, "env": cfg.env.name, "env_id": cfg.env.id, "seed": int(cfg.seed),
        "env_steps": state["env_steps"], "iterations": state["iteration"], "episodes": state["episodes"],
        "wall_time_s": round(state["wall_time_s"], 3),
        "sps": round(state["env_steps"] / max(state["wall_time_s"], 1e-9), 1),
        "solved": state["solved_at_env_steps"] is not None,
        "solved_at_env_steps": state["solved_at_env_steps"],
        "eval_return": ev.get("return"), "eval_terminated_rate": ev.get("terminated_rate"),
        "eval_episodes": int(cfg.eval.episodes),
        "checkpoint": str(ckpt_path),
    }
    if goal_env:
        results["eval_success_rate"] = ev.get("success_rate")
    env_kwargs = cfg.env.get("kwargs") or {}
    for key in ("n", "size"):  # the sizes this env uses (bit-flip's n, deep sea's size)
        if key in env_kwargs:
            results[key] = int(env_kwargs[key])
    return results


def _summary(results: dict[str, Any], out: Path) -> str:
    """The run's last line, short enough for 100 columns: the folder names algo, env and seed (its
    results.json has the rest), given relative to the current folder when it lies below it."""
    score = (f"eval success {results['eval_success_rate']:.2f}" if "eval_success_rate" in results
             else f"eval return {results['eval_return']:.1f}")
    status = "solved" if results["solved"] else "not solved"
    where = os.path.relpath(out)
    return f"{status}: {score} at {count(results['env_steps'])} steps -> {out if where.startswith('..') else where}"


