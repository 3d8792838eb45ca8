"""Greedy evaluation, as training runs it at every evaluation point, and how its success is told
(:func:`success_source`). A saved run is evaluated with the same :func:`evaluate` by ``her-run
load=PATH`` (:mod:`her_rl.saved.evaluate`) and ``her_rl.evaluate``.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from her_rl.envs.time_limits import episode_cap
from her_rl.errors import EnvError
from her_rl.rl.success import EpisodeSuccess, SUCCESS_KEYS, SuccessRule
from her_rl.run.progress import warn


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
