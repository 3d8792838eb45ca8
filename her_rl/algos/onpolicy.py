"""The on-policy learner base: what REINFORCE, PPO and RND-PPO share.

A learner is a dataclass of its hyperparameters: the fields are the constructor's keywords, so the
config keys the registry accepts are read from them, and ``RULES`` (config key -> rule) says what
each may be. :class:`OnPolicyLearner` declares the keys every policy-gradient learner has and builds
what they all act and learn with:

    envs       ``num_envs`` copies in one NEXT_STEP-autoreset vector env, collected from by a
               :class:`~her_rl.algos.rollout.RolloutCollector`;
    inputs     flat observations (goal envs: observation and desired goal), whitened with running
               statistics when ``normalize_obs`` (updated while collecting only, never in ``act``);
    networks   an actor (``hidden`` layers of ``activation``; Gaussian actions start at
               ``log_std_init``) and, where the learner has one, a critic with ``VALUE_HEADS`` outputs,
               both initialised from ``seed`` alone;
    steps      gradient steps clipped to a norm of ``max_grad_norm``; an entropy bonus ``ent_coef``;
    resume     a checkpoint holds the episodes in progress (``CONTINUES_EPISODES``: the env's state
               too, see :mod:`her_rl.envs.state`), so a resumed run ends as one that never stopped.

A learner names itself (``NAME``, its registry name), adds its keys as fields and their rules, and
writes ``build`` (optimisers, anything else it trains) and ``train_iteration``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Sequence

import numpy as np
import torch
import torch.nn as nn

from her_rl.agent import IterationResult
from her_rl.algos.rollout import ObsProcessor, Policy, Rollout, RolloutCollector, check_spaces
from her_rl.envs import make_vec
from her_rl.registry import RUNTIME_ARGS
from her_rl.rl.success import SuccessRule
from her_rl.rl.losses import EntropyLoss
from her_rl.rl.nets import mlp
from her_rl.rules import (ACTIVATION, BOOL, GRAD_NORM, HIDDEN, MAX_ENVS, NON_NEGATIVE, POSITIVE, Rule, check_values,
                          integer, real)

PG_RULES: dict[str, Rule] = {  # every on-policy learner's keys
    "num_envs": integer(1, MAX_ENVS), "lr": POSITIVE, "ent_coef": NON_NEGATIVE, "max_grad_norm": GRAD_NORM,
    "hidden": HIDDEN, "activation": ACTIVATION, "normalize_obs": BOOL, "obs_clip": POSITIVE,
    "log_std_init": real(),
}


@dataclass(eq=False)
class OnPolicyLearner:
    """An on-policy learner: ``act``, ``train_iteration``, ``state_dict`` (see the module's docstring)."""

    NAME: ClassVar[str] = "onpolicy"
    RULES: ClassVar[dict[str, Rule]] = PG_RULES
    VALUE_HEADS: ClassVar[int] = 1
    """Critic outputs, one per return the learner estimates."""
    CONTINUES_EPISODES: ClassVar[bool] = True
    """Whether episodes run on from one iteration into the next, so that checkpoints save them
    (a learner whose iterations start with seeded resets has nothing to save)."""

    env: dict[str, Any]
    seed: int = 0
    device: str = "cpu"
    inference: bool = False
    num_envs: int = 8
    """Parallel envs (one gymnasium sync vector env)."""
    lr: float = 1e-3
    """Adam learning rate of actor and critic."""
    ent_coef: float = 0.0
    """Entropy bonus coefficient."""
    max_grad_norm: float | None = 0.5
    """Max gradient norm (null: no clipping)."""
    hidden: Sequence[int] = (64, 64)
    """Hidden layers of the policy and of the critic, two separate MLPs of this shape."""
    activation: str = "tanh"
    """Hidden-layer activation."""
    normalize_obs: bool = False
    """Running mean/std whitening of observations (frozen in act / evaluation)."""
    obs_clip: float = 10.0
    """Whitened observations are clipped to [-obs_clip, obs_clip]."""
    log_std_init: float = 0.0
    """Continuous actions: initial log std (actions live in a [-1, 1] box)."""

    @classmethod
    def check_config(cls, values: dict[str, Any]) -> None:
        """Raise a one-line ConfigError unless ``values`` (config keys) meet the rules; keys
        without a rule are left to the registry's key check."""
        check_values(cls.RULES, values)

    def __post_init__(self) -> None:
        self.check_config(self.hyperparameters())
        self.device = torch.device(self.device)
        self.envs, self.obs_proc, self.policy, critic = make_actor_critic(
            self.NAME, self.env, self.num_envs, self.seed, self.normalize_obs, self.obs_clip, self.hidden,
            self.activation, self.log_std_init, value_heads=self.VALUE_HEADS if self.has_critic() else None,
            inference=self.inference)
        self.policy = self.policy.to(self.device)
        self.critic = None if critic is None else critic.to(self.device)
        self.entropy_loss = EntropyLoss()
        self.gen = torch.Generator(device=self.device).manual_seed(int(self.seed))
        self.collector = None if self.inference else RolloutCollector(
            self.envs, self.obs_proc, self.policy, self.seed, self.device)
        if self.collector is not None:
            self.collector.success = SuccessRule(self.env.get("success_key"))
        self.global_step = 0
        self.iteration = 0
        self.build()

    def hyperparameters(self) -> dict[str, Any]:
        """The config keys and their values: every field but the runner's own arguments."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in RUNTIME_ARGS}

    # -- what a learner writes -----------------------------------------------------------------
    def has_critic(self) -> bool:
        return True

    def build(self) -> None:
        """Optimisers and anything else the learner trains (the networks exist by now)."""
        raise NotImplementedError

    def train_iteration(self, max_env_steps: int | None = None) -> IterationResult:
        """One rollout and its updates; a rollout is kept whole (``max_env_steps`` does not cut it),
        so a budget is met within one rollout."""
        raise NotImplementedError

    # -- acting and learning -------------------------------------------------------------------
    def sample(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(actions, log_probs)`` from the policy, drawn with the learner's own generator."""
        return self.policy.sample(obs, self.gen)

    @torch.no_grad()
    def act(self, obs, explore: bool = False) -> np.ndarray:
        x = obs_for_act(self.obs_proc, obs, self.device)
        a = self.sample(x)[0] if explore else self.policy.greedy(x)
        return self.policy.to_env(a)

    def step(self, optimizer: torch.optim.Optimizer, loss: torch.Tensor, clip: bool = True) -> None:
        """Backward ``loss``, clip the optimiser's gradients to a norm of ``max_grad_norm``, step."""
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if clip and self.max_grad_norm:
            nn.utils.clip_grad_norm_([p for group in optimizer.param_groups for p in group["params"]],
                                     self.max_grad_norm)
        optimizer.step()

    def finish(self, ro: Rollout, metrics: dict[str, float]) -> IterationResult:
        """Count the rollout's env steps and report it with the iteration's metrics."""
        self.global_step += ro.env_steps
        self.iteration += 1
        return IterationResult(env_steps=ro.env_steps, metrics=metrics, episode_returns=ro.episode_returns,
                               episode_lengths=ro.episode_lengths, episode_successes=ro.episode_successes,
                               episode_any_successes=ro.episode_any_successes)

    # -- checkpoints ---------------------------------------------------------------------------
    def state_dict(self) -> dict:
        """Networks, optimiser, observation statistics, counters, the sampling RNG and (when
        ``CONTINUES_EPISODES``) the training episodes in progress."""
        state = {"policy": self.policy.state_dict(), "optimizer": self.optimizer.state_dict(),
                 "obs_rms": self.obs_proc.state_dict(), "gen": self.gen.get_state(),
                 "global_step": self.global_step, "iteration": self.iteration}
        if self.critic is not None:
            state["critic"] = self.critic.state_dict()
        if self.collector is not None and self.CONTINUES_EPISODES:
            state["collector"] = self.collector.state_dict()
        return state

    def load_state_dict(self, state: dict) -> None:
        self.policy.load_state_dict(state["policy"])
        if self.critic is not None:
            self.critic.load_state_dict(state["critic"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.obs_proc.load_state_dict(state["obs_rms"])
        self.gen.set_state(state["gen"])
        self.global_step, self.iteration = int(state["global_step"]), int(state["iteration"])
        if self.collector is not None and self.CONTINUES_EPISODES:
            self._load_episodes(state.get("collector"))

    def _load_episodes(self, saved: dict | None) -> None:
        """Continue the saved training episodes, or say in one line why they restart."""
        if saved is None:
            why = "the checkpoint holds no training episodes (written by an earlier version)"
        elif self.collector.load_state_dict(saved):
            return
        else:
            why = f"the state of env '{self.env['id']}' cannot be saved"
        print(f"her-run: warning: {why}: the resumed training episodes restart, so this run will not end "
              "exactly as one that never stopped", file=sys.stderr, flush=True)


def iteration_seed(seed: int, iteration: int) -> int:
    """The reset seed of iteration ``iteration`` of a run seeded ``seed`` (a resumed run replays it)."""
    return int(np.random.SeedSequence([int(seed), int(iteration)]).generate_state(1)[0])


def make_actor_critic(algo: str, env: dict, num_envs: int, seed: int, normalize_obs: bool, obs_clip: float,
                      hidden, activation: str, log_std_init: float, value_heads: int | None, inference: bool = False):
    """The training envs, observation processor, policy and (if ``value_heads``) critic of an on-policy
    algorithm. Networks are initialised from ``seed`` alone, whatever the global torch RNG holds.
    ``inference``: one env copy is built only to read the spaces, then closed; no envs are returned."""
    envs = make_vec(env, 1 if inference else int(num_envs), seed)
    check_spaces(algo, envs.single_observation_space, envs.single_action_space)
    obs_proc = ObsProcessor(envs.single_observation_space, normalize_obs, obs_clip)
    action_space = envs.single_action_space
    if inference:
        envs.close()
        envs = None
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        policy = Policy(obs_proc.dim, action_space, hidden, activation, True, log_std_init)
        critic = (mlp(obs_proc.dim, value_heads, hidden, activation, ortho_init=True, out_gain=1.0)
                  if value_heads else None)
    return envs, obs_proc, policy, critic


def obs_for_act(obs_proc: ObsProcessor, obs, device) -> torch.Tensor:
    """Raw vector-env observations -> policy input for ``act`` (stats are never updated here)."""
    return torch.from_numpy(obs_proc.normalize(obs_proc.flat(obs), update=False)).to(device)


def explained_variance(pred: torch.Tensor, target: torch.Tensor) -> float:
    """``1 - Var(target - pred) / Var(target)`` (nan when the target is constant)."""
    var = target.var()
    return float("nan") if var == 0 else float(1 - (target - pred).var() / var)
