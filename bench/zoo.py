"""Stable-Baselines3 peers for the like-for-like benchmark (:mod:`bench.likeforlike`), in two
kinds:

* ``zoo``: SB3 at RL-Zoo's own hyperparameters for the Fetch tasks (:data:`ZOO`): SAC + HER on
  FetchReach (``normalize: True``: VecNormalize of observations and rewards), TQC + HER
  (sb3-contrib) on FetchPush, FetchPickAndPlace and FetchSlide.
* ``twin``: the SB3 algorithm that matches one of our learners (her_sac -> SAC, her_ddpg -> DDPG,
  her_td3 -> TD3, each with HerReplayBuffer; her_crossq -> SAC, since SB3 has no CrossQ for
  dict observations: the same net, batch, gamma, updates per env step and HER settings), given the values of our composed config
  (:func:`twin_settings`): network, batch, gamma, learning rate, buffer, HER k and strategy, the
  updates per env step and the target networks' decay per cycle.

Our learners collect ``episodes_per_cycle`` lock-step episodes, then run their updates, then move
the targets once by Polyak decay ``polyak``. The twin trains every ``episodes_per_cycle`` episodes
(``train_freq``) for as many gradient steps; SAC moves its targets once per cycle (``tau = 1 -
polyak``, ``target_update_interval`` = the cycle's gradient steps), while DDPG and TD3 move theirs
with every (TD3: every ``policy_delay``-th) gradient step, so their tau is the one that decays the
targets by ``polyak`` per cycle. Inputs are normalised on both sides (ours: running mean/std of
each input, clipped; the twin: VecNormalize of observations, clipped alike, rewards as they are).

Evaluation (:func:`bench.peers.success_last_step`): one lock-step batch of greedy episodes on
fresh seeds every time (the seed is drawn from the run's seed and the evaluation's env step, as ours draws it from
its seed and iteration), success is ``is_success`` at each episode's last step; observations pass
through the training env's VecNormalize statistics when there is one.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Mapping

import numpy as np

from bench import peers
from her_rl.run.evaluation import eval_seed

CONTRIB = 'sb3-contrib is not installed (a benchmark extra: pip install -e ".[bench]")'
# RL-Zoo's settings (rl_zoo3 2.x hyperparams: sac.yml FetchReach, tqc.yml FetchPush and the Fetch tasks
# that share its block); learning_starts 1000 on the TQC tasks too, one gradient step per env step.
_TQC = {"algo": "tqc", "net_arch": [512, 512, 512], "n_critics": 2, "batch_size": 2048, "gamma": 0.95,
        "learning_rate": 1e-3, "tau": 0.05, "buffer_size": 1_000_000, "learning_starts": 1000, "n_sampled_goal": 4,
        "strategy": "future", "normalize": False}
ZOO: dict[str, dict[str, Any]] = {
    "FetchReach-v4": {"algo": "sac", "net_arch": [64, 64], "batch_size": 256, "gamma": 0.95, "learning_rate": 1e-3,
                      "tau": 0.005, "buffer_size": 1_000_000, "learning_starts": 1000, "n_sampled_goal": 4,
                      "strategy": "future", "normalize": True},
    "FetchPush-v4": _TQC, "FetchPickAndPlace-v4": _TQC, "FetchSlide-v4": _TQC,
}
TWINS = {"her_sac": "sac", "her_crossq": "sac", "her_ddpg": "ddpg", "her_td3": "td3"}
STRATEGIES = ("future", "final", "episode")  # the hindsight strategies SB3's HerReplayBuffer has


def robotics_missing(env_id: str) -> str | None:
    """None unless ``env_id`` is a Fetch task the installed extras cannot run (both sides need them):
    then the line :func:`her_rl.envs.families.ensure_registered` gives."""
    from her_rl.envs.families import ensure_registered
    from her_rl.errors import ConfigError

    try:
        ensure_registered(env_id)
    except ConfigError as exc:
        return str(exc)
    return None


def missing(kind: str = "twin", env_id: str = "") -> str | None:
    """None when the peer's packages import, else the line that says how to install them."""
    if why := peers.missing():
        return why
    if kind == "zoo" and ZOO.get(env_id, {}).get("algo") == "tqc":
        try:
            import sb3_contrib  # noqa: F401
        except ImportError:
            return CONTRIB
    return None


def cycle_updates(algo: Mapping[str, Any], horizon: int) -> int:
    """Our gradient steps per cycle (``updates_per_step`` wins, as in her_rl.algos.hindsight)."""
    from her_rl.algos.cycle import cycle_episodes, updates_for_cycle

    steps = cycle_episodes(algo.get("episodes_per_cycle"), horizon) * horizon
    return updates_for_cycle(int(algo["updates_per_cycle"]), algo.get("updates_per_step"), steps, horizon)


def twin_settings(algo: Mapping[str, Any], horizon: int, one_step: bool = False) -> dict[str, Any]:
    """The SB3 twin's settings from our composed ``algo`` config; ValueError for a value SB3 cannot
    take alike (different actor and critic learning rates, a strategy SB3 lacks, n-step returns).
    ``one_step``: the nearest twin of an n-step learner instead of the error. SB3's HerReplayBuffer
    has no n-step returns, so the twin learns from 1-step returns, and its settings say so
    under ``differs``, as they say when ours runs its matrix products in bfloat16 (SB3's in float32)."""
    name = str(algo["name"])
    differs = []
    if one_step and int(algo.get("n_step", 1)) != 1:
        differs.append(f"n_step: ours {int(algo['n_step'])}, the twin 1 (SB3's HerReplayBuffer has no n-step returns)")
        algo = {**algo, "n_step": 1}
    if name not in TWINS:
        raise ValueError(f"{name} has no SB3 twin (one of {', '.join(TWINS)})")
    if str(algo.get("precision", "float32")) != "float32":  # SB3 updates in float32 only
        differs.append(f"precision: ours {algo['precision']} matrix products, the twin float32")
    soft = TWINS[name] == "sac"  # her_sac, and her_crossq: SAC is its nearest SB3 learner with HER
    lrs = {float(algo["actor_lr"]), float(algo["critic_lr"])} | ({float(algo["alpha_lr"])} if soft else set())
    if len(lrs) > 1:
        raise ValueError(f"{name}: SB3 takes one learning rate; ours has {sorted(lrs)}")
    if algo["strategy"] not in STRATEGIES or float(algo.get("random_mix") or 0) or int(algo.get("n_step", 1)) != 1:
        raise ValueError(f"{name}: SB3's HerReplayBuffer has strategies {STRATEGIES}, no random_mix and no n_step")
    from her_rl.algos.cycle import cycle_episodes

    updates, polyak = cycle_updates(algo, horizon), float(algo["polyak"])
    episodes = cycle_episodes(algo.get("episodes_per_cycle"), horizon)
    s = {"algo": TWINS[name], "net_arch": list(algo["hidden"]), "batch_size": int(algo["batch_size"]),
         "gamma": float(algo["gamma"]), "learning_rate": lrs.pop(), "buffer_size": int(algo["buffer_size"]),
         "n_sampled_goal": int(algo["k"]), "strategy": str(algo["strategy"]), "learning_starts": 0,
         "train_freq_episodes": episodes, "gradient_steps": updates,
         "updates_per_env_step": updates / (episodes * horizon),
         "normalize": algo["normalize"] is not False, "norm_clip": float(algo["norm_clip"]),
         "target_decay_per_cycle": polyak}
    if soft:  # one target step per train() call: exactly her_sac (her_crossq has no targets to move)
        s.update(tau=1 - polyak, target_update_interval=updates, alpha_init=float(algo["alpha_init"]),
                 autotune=bool(algo["autotune"]), target_entropy=algo["target_entropy"])
    else:
        delay = int(algo.get("policy_delay", 1)) if name == "her_td3" else 1
        s.update(tau=1 - polyak ** (delay / updates), action_noise=float(algo["noise_eps"]))
        if name == "her_td3":
            s.update(policy_delay=delay, target_policy_noise=float(algo["target_noise"]),
                     target_noise_clip=float(algo["noise_clip"]))
    if differs:
        s["differs"] = differs
    return s


def zoo_settings(env_id: str) -> dict[str, Any]:
    if env_id not in ZOO:
        raise ValueError(f"RL-Zoo has no HER settings here for {env_id} (one of {', '.join(ZOO)})")
    return dict(ZOO[env_id])


def build(settings: Mapping[str, Any], env_id: str, kwargs: Mapping[str, Any], seed: int) -> Any:
    """The SB3 model these settings describe, on one copy of ``gymnasium.make(env_id, **kwargs)``
    (VecNormalize around it when ``normalize``; with ``start_in_gripper``, that share of its episodes
    starts with the block held, as our training copies do: :class:`her_rl.envs.fetch.StartInGripper`),
    on the CPU."""
    import gymnasium as gym
    from stable_baselines3 import DDPG, SAC, TD3, HerReplayBuffer
    from stable_baselines3.common.noise import NormalActionNoise
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

    import her_rl.envs  # noqa: F401  (registers her_rl/Push-v0 and friends)
    from her_rl.envs.families import ensure_registered
    from her_rl.envs.fetch import start_in_gripper

    ensure_registered(env_id)  # a Fetch task: gymnasium-robotics registers it
    s = settings
    held = float(s.get("start_in_gripper") or 0)

    def make() -> gym.Env:
        env = gym.make(env_id, **kwargs)
        return start_in_gripper(held)(env) if held else env

    env = DummyVecEnv([make])
    if s["normalize"] and "norm_clip" in s:  # a twin: observations only, clipped as ours are
        env = VecNormalize(env, norm_obs=True, norm_reward=False, clip_obs=s["norm_clip"], gamma=s["gamma"])
    elif s["normalize"]:  # RL-Zoo's `normalize: True`: VecNormalize's defaults, with the algorithm's gamma
        env = VecNormalize(env, gamma=s["gamma"])
    common = dict(replay_buffer_class=HerReplayBuffer, learning_rate=s["learning_rate"], buffer_size=s["buffer_size"],
                  replay_buffer_kwargs={"n_sampled_goal": s["n_sampled_goal"], "goal_selection_strategy": s["strategy"]},
                  learning_starts=s["learning_starts"], batch_size=s["batch_size"], tau=s["tau"], gamma=s["gamma"],
                  seed=seed, device="cpu", verbose=0)
    if "train_freq_episodes" in s:
        common.update(train_freq=(s["train_freq_episodes"], "episode"), gradient_steps=s["gradient_steps"])
    arch = list(s["net_arch"])
    if s["algo"] == "tqc":
        from sb3_contrib import TQC

        return TQC("MultiInputPolicy", env, policy_kwargs={"net_arch": arch, "n_critics": s["n_critics"]}, **common)
    if s["algo"] == "sac":
        extra = {}
        if "target_update_interval" in s:
            entropy = s["target_entropy"]
            extra = {"target_update_interval": s["target_update_interval"],
                     "ent_coef": f"auto_{s['alpha_init']}" if s["autotune"] else s["alpha_init"],
                     "target_entropy": "auto" if entropy is None else float(entropy)}
        return SAC("MultiInputPolicy", env, policy_kwargs={"net_arch": arch}, **extra, **common)
    act_dim = env.action_space.shape[0]
    noise = NormalActionNoise(np.zeros(act_dim), s["action_noise"] * np.ones(act_dim))
    arch_kw = {"net_arch": {"pi": arch, "qf": arch}}
    if s["algo"] == "ddpg":
        return DDPG("MultiInputPolicy", env, action_noise=noise, policy_kwargs=arch_kw, **common)
    return TD3("MultiInputPolicy", env, action_noise=noise, policy_kwargs=arch_kw, policy_delay=s["policy_delay"],
               target_policy_noise=s["target_policy_noise"], target_noise_clip=s["target_noise_clip"], **common)


EVAL_STREAM = 11  # the peers' evaluation seeds: her_rl.run.evaluation.eval_seed(seed, env step, EVAL_STREAM)


def train_peer(settings: Mapping[str, Any], env_id: str, kwargs: Mapping[str, Any], seed: int,
               protocol: peers.Protocol, episodes: int, horizon: int, name: str,
               eval_seed_at: Callable[[int], int] | None = None) -> tuple[peers.PeerRun, float]:
    """Build the peer, then train it to the protocol's budget with an evaluation of ``episodes``
    greedy episodes every ``protocol.every`` env steps, their envs reset with ``eval_seed_at(env
    steps)`` (default: ``eval_seed(seed, env steps, EVAL_STREAM)``); the clock starts once the model
    and its evaluation envs exist. Returns the run and the seconds building took."""
    import gymnasium as gym
    import torch

    torch.set_num_threads(1)
    built = time.perf_counter()
    model = build(settings, env_id, kwargs, seed)
    eval_envs = gym.make_vec(env_id, num_envs=episodes, vectorization_mode="sync", **kwargs)
    build_s = time.perf_counter() - built
    draw = eval_seed_at or (lambda step: eval_seed(seed, step, EVAL_STREAM))
    try:
        run = peers.train(model, lambda m, k: peers.success_last_step(
            m, eval_envs, draw(k * protocol.every), horizon), protocol, name)
    finally:
        eval_envs.close()
    return run, build_s


# SAC + HER as sac_her runs it (the settings build reads).
SAC_HER = {"algo": "sac", "net_arch": [256, 256, 256], "batch_size": 256, "gamma": 0.98, "learning_rate": 1e-3,
           "tau": 0.05, "buffer_size": 1_000_000, "learning_starts": peers.SB3_LEARNING_STARTS, "n_sampled_goal": 4,
           "strategy": "future", "normalize": False}


def sac_her(env_id: str, kwargs: dict[str, Any], seed: int, protocol: peers.Protocol, episodes: int,
            horizon: int = 50) -> peers.PeerRun:
    """SAC + HerReplayBuffer (``future``, 4 sampled goals) with net [256, 256, 256], batch 256,
    lr 1e-3, gamma 0.98, tau 0.05, buffer 1e6, SB3's defaults otherwise (one gradient step per env
    step, automatic entropy tuning), on ``gymnasium.make(env_id, **kwargs)``; evaluated on
    ``episodes`` copies with fixed seeds (:func:`bench.peers.success_last_step`)."""
    import gymnasium as gym
    import torch


    torch.set_num_threads(1)
    model = build(SAC_HER, env_id, kwargs, seed)
    eval_envs = gym.make_vec(env_id, num_envs=episodes, vectorization_mode="sync", **kwargs)
    try:
        return peers.train(model, lambda m, k: peers.success_last_step(m, eval_envs, 10_000 + seed, horizon), protocol,
                     f"{env_id} seed {seed}")
    finally:
        eval_envs.close()
