"""The one training driver: config -> registry -> env + agent -> training loop -> logs, checkpoint.

``run(cfg)`` seeds everything, builds the agent through the registry, trains it iteration by
iteration, evaluates greedily every ``eval.every_iterations``, stops at the budget or once solved,
checkpoints atomically, resumes from the last checkpoint with ``resume=true``, and writes
``results.json``. Algorithms only implement the interface in ``her_rl/agent.py``.
"""

from __future__ import annotations

import json
import signal
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from her_rl import checkpoint
from her_rl.agent import IterationResult
from her_rl.config import validate
from her_rl.envs import make_vec
from her_rl.logger import RunLogger
from her_rl.registry import ConfigError, build_agent, env_info
from her_rl.rl.utils import set_seed

CHECKPOINT = "checkpoint.pt"
RESULTS = "results.json"


def compose(overrides: list[str] | None = None) -> DictConfig:
    """The config ``her-run`` would see for these overrides (for scripts, notebooks and tests)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module

    with initialize_config_module(config_module="her_rl.conf", version_base="1.3"):
        return hydra_compose(config_name="config", overrides=list(overrides or []))


def _output_dir(cfg: DictConfig, out_dir: str | Path | None) -> Path:
    if out_dir is None:
        from hydra.core.hydra_config import HydraConfig

        if HydraConfig.initialized():
            out_dir = HydraConfig.get().runtime.output_dir
        else:
            stamp = datetime.now().strftime("%Y-%m-%d_%H-%M-%S-%f")
            out_dir = Path("outputs") / f"{cfg.algo.name}-{cfg.env.name}" / stamp
    path = Path(out_dir)
    path.mkdir(parents=True, exist_ok=True)
    return path


def _device(name: str) -> str:
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device=cuda but no CUDA device is available; use device=cpu or device=auto")
    return name


def _build(cfg: DictConfig, device: str):
    env_cfg = OmegaConf.to_container(cfg.env, resolve=True)
    algo_cfg = OmegaConf.to_container(cfg.algo, resolve=True)
    return build_agent(algo_cfg, env=env_cfg, seed=int(cfg.seed), device=device), env_cfg


def evaluate(agent, envs, seed: int, max_steps: int = 1_000_000) -> dict[str, float]:
    """Greedy evaluation: one episode per copy of ``envs``; mean return, length, success rate (the
    ``is_success`` of each episode's last step) and
    terminated rate (episodes that ended by reaching a terminal state, not by the time limit:
    MountainCar's flag rate)."""
    obs, _ = envs.reset(seed=seed)
    n = envs.num_envs
    returns, lengths = np.zeros(n), np.zeros(n, dtype=np.int64)
    success, done = np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
    ended_terminal = np.zeros(n, dtype=bool)
    for _ in range(max_steps):
        obs, reward, terminated, truncated, info = envs.step(agent.act(obs, explore=False))
        live = ~done
        returns[live] += np.asarray(reward)[live]
        lengths[live] += 1
        if "is_success" in info:  # success of the episode's last step (Fetch's convention; bit-flip ends on success)
            success = np.where(live, np.asarray(info["is_success"], dtype=bool), success)
        ended_terminal |= live & np.asarray(terminated, dtype=bool)
        done |= np.asarray(terminated) | np.asarray(truncated)
        if done.all():
            break
    return {"return": float(returns.mean()), "length": float(lengths.mean()), "success_rate": float(success.mean()),
            "terminated_rate": float(ended_terminal.mean())}


def _eval_seed(seed: int, iteration: int) -> int:
    return int(np.random.SeedSequence([seed, iteration, 7]).generate_state(1)[0])


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


def run(cfg: DictConfig, out_dir: str | Path | None = None) -> dict[str, Any]:
    """Train (or, with ``load=PATH``, evaluate) as configured; returns the results dict."""
    validate(cfg)
    torch.set_num_threads(int(cfg.threads))
    device = _device(cfg.device)
    if cfg.load:
        return evaluate_checkpoint(cfg, out_dir, device)
    out = _output_dir(cfg, out_dir)
    ckpt_path = out / CHECKPOINT
    if ckpt_path.exists() and not cfg.resume:
        raise ConfigError(f"{out} already holds a checkpoint; pass resume=true to continue that run, or use a new directory")

    set_seed(int(cfg.seed))
    agent, env_cfg = _build(cfg, device)
    goal_env = env_info(cfg.env.name).goal_env
    config_dict = OmegaConf.to_container(cfg, resolve=True)
    checkpoint.write_atomic_text(out / "config.yaml", OmegaConf.to_yaml(OmegaConf.create(config_dict)))

    state: dict[str, Any] = {"env_steps": 0, "iteration": 0, "wall_time_s": 0.0, "episodes": 0,
                             "eval": None, "solved": False, "solved_at_env_steps": None}
    if cfg.resume and ckpt_path.exists():
        saved = checkpoint.load(ckpt_path)
        _check_same_run(saved["config"], config_dict)
        agent.load_state_dict(saved["agent"])
        state.update(saved["runner"])
        checkpoint.set_rng_state(saved["rng"])
        print(f"resumed from {ckpt_path} at env step {state['env_steps']:,}")

    budget, wall_budget = int(cfg.budget.env_steps), cfg.budget.wall_time_s
    eval_envs = make_vec(env_cfg, int(cfg.eval.episodes), seed=int(cfg.seed))
    logger = RunLogger(out, budget, start_step=state["env_steps"] + 1 if state["env_steps"] else 0,
                       progress=bool(cfg.progress), desc=f"{cfg.algo.name}/{cfg.env.name}")

    def save_checkpoint() -> None:
        agent_state = agent.state_dict()
        if not cfg.checkpoint.save_replay:
            agent_state.pop("memory", None)
        checkpoint.save({"agent": agent_state, "runner": dict(state), "rng": checkpoint.rng_state(),
                         "config": config_dict}, ckpt_path)

    interrupted: list[int] = []
    restore_signals = _stop_at_iteration_end_on_signal(interrupted)
    start = time.perf_counter() - state["wall_time_s"]
    last_ckpt = time.perf_counter()
    evaluated_at = state["iteration"] if state["eval"] is not None else -1
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
            charts = _log_iteration(logger, result, step, step / max(state["wall_time_s"], 1e-9))
            postfix = {"SPS": charts["charts/SPS"]}
            if state["iteration"] % cfg.eval.every_iterations == 0:
                state["eval"] = evaluate(agent, eval_envs, _eval_seed(cfg.seed, state["iteration"]))
                evaluated_at = state["iteration"]
                logger.scalars({f"eval/{k}": v for k, v in state["eval"].items()}, step)
                if _is_solved(cfg, goal_env, state["eval"]) and state["solved_at_env_steps"] is None:
                    state["solved_at_env_steps"] = step
                    state["solved"] = bool(cfg.eval.stop_when_solved)
                postfix["eval_success" if goal_env else "eval_return"] = (
                    state["eval"]["success_rate"] if goal_env else state["eval"]["return"])
            elif goal_env and "charts/success_rate" in charts:
                postfix["success"] = charts["charts/success_rate"]
            logger.advance(result.env_steps, **postfix)
            state["wall_time_s"] = time.perf_counter() - start
            if time.perf_counter() - last_ckpt >= cfg.checkpoint.every_s:
                save_checkpoint()
                last_ckpt = time.perf_counter()
        if evaluated_at != state["iteration"] and not interrupted:
            state["eval"] = evaluate(agent, eval_envs, _eval_seed(cfg.seed, state["iteration"]))
            logger.scalars({f"eval/{k}": v for k, v in state["eval"].items()}, state["env_steps"])
            if _is_solved(cfg, goal_env, state["eval"]) and state["solved_at_env_steps"] is None:
                state["solved_at_env_steps"] = state["env_steps"]
        state["wall_time_s"] = time.perf_counter() - start
        save_checkpoint()
    finally:
        logger.close()
        restore_signals()
    if interrupted:
        print(f"stopped by signal {interrupted[0]} at env step {state['env_steps']:,} (checkpoint saved); "
              f"continue with the same overrides plus: resume=true hydra.run.dir={out}")
        raise SystemExit(128 + interrupted[0])

    results = _results(cfg, state, goal_env, ckpt_path)
    checkpoint.write_atomic_text(out / RESULTS, json.dumps(results, indent=2) + "\n")
    print(_summary(results, out))
    return results


def _check_same_run(saved: dict[str, Any], current: dict[str, Any]) -> None:
    """Resuming with a different algorithm, env or seed would silently mix two experiments."""
    def pick(cfg: dict[str, Any], key: str) -> Any:
        return cfg.get(key, {}).get("name") if key in ("algo", "env") else cfg.get(key)

    for key in ("algo", "env", "n", "size", "seed"):
        if pick(saved, key) != pick(current, key):
            raise ConfigError(f"cannot resume: the checkpoint was trained with {key}={pick(saved, key)!r}, "
                              f"this run asks for {key}={pick(current, key)!r}")


def _stop_at_iteration_end_on_signal(received: list[int]):
    """Ctrl-C / SIGTERM (e.g. a cluster pre-empting the job) end the run cleanly after the current
    iteration, with a checkpoint consistent with its counters; a second Ctrl-C aborts at once."""
    def handler(signum, frame):
        if received and signum == signal.SIGINT:
            raise KeyboardInterrupt
        received.append(signum)

    previous = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            previous[sig] = signal.signal(sig, handler)
        except ValueError:  # not the main thread (some launchers): keep default behaviour
            pass

    def restore() -> None:
        for sig, old in previous.items():
            signal.signal(sig, old)

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
    env_kwargs = OmegaConf.to_container(cfg.env, resolve=False).get("kwargs") or {}
    for key in ("n", "size"):  # the top-level sizes this env actually uses
        if f"${{{key}}}" in env_kwargs.values():
            results[key] = int(cfg[key])
    return results


def _summary(results: dict[str, Any], out: Path) -> str:
    score = (f"eval success {results['eval_success_rate']:.2f}" if "eval_success_rate" in results
             else f"eval return {results['eval_return']:.1f}")
    status = "solved" if results["solved"] else "not solved"
    return (f"{results['algo']} on {results['env']} (seed {results['seed']}): {status}, {score} after "
            f"{results['env_steps']:,} env steps, {results['wall_time_s']:.1f} s -> {out / RESULTS}")


def evaluate_checkpoint(cfg: DictConfig, out_dir: str | Path | None, device: str) -> dict[str, Any]:
    """``her-run load=PATH``: rebuild the saved run's agent, load its weights, evaluate greedily."""
    saved = checkpoint.load(cfg.load)
    run_cfg = OmegaConf.create(saved["config"])
    run_cfg.eval.episodes = cfg.eval.episodes
    agent, env_cfg = _build(run_cfg, device)
    agent_state = saved["agent"]
    agent_state.pop("memory", None)
    agent.load_state_dict(agent_state)
    envs = make_vec(env_cfg, int(cfg.eval.episodes), seed=int(cfg.seed))
    result = evaluate(agent, envs, _eval_seed(int(cfg.seed), 2**31))
    report = {"checkpoint": str(cfg.load), "algo": run_cfg.algo.name, "env": run_cfg.env.name,
              "episodes": int(cfg.eval.episodes), **{f"eval_{k}": v for k, v in result.items()}}
    out = _output_dir(cfg, out_dir)
    checkpoint.write_atomic_text(out / "eval.json", json.dumps(report, indent=2) + "\n")
    print(json.dumps(report))
    return report
