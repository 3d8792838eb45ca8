"""The on-policy learner base: what REINFORCE, PPO and RND-PPO share.

A learner is a dataclass of its hyperparameters (the shared base, her_rl/algos/base.py, says how its
keys and checkpoint state are declared). :class:`OnPolicyLearner` declares the keys every
policy-gradient learner has and builds what they all act and learn with:

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

A learner names itself (``NAME``, its registry name), adds its keys as fields (``setting``: default,
rule, meaning) and its checkpoint entries to ``STATE``, and writes ``build`` (optimisers, anything else it trains) and
``train_iteration``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import ClassVar, Sequence

import numpy as np
import torch

from her_rl.agent import IterationResult
from her_rl.algos.base import Learner
from her_rl.algos.onpolicy_actor import ActorNet, ObsProcessor, check_spaces
from her_rl.algos.rollout import Rollout, RolloutCollector, rollout_bytes
from her_rl.envs.probe import EnvSpaces
from her_rl.envs import make_vec
from her_rl.errors import printable
from her_rl.rl.success import SuccessRule
from her_rl.rl.losses import EntropyLoss
from her_rl.rl.nets import ACTIVATIONS, mlp
from her_rl.rules import BOOL, GRAD_NORM, HIDDEN, MAX_ENVS, NON_NEGATIVE, POSITIVE, choice, integer, real, setting


@dataclass(eq=False)
class OnPolicyLearner(Learner):
    """An on-policy learner: ``act``, ``train_iteration``, ``state_dict`` (see the module's docstring)."""

    NAME: ClassVar[str] = "onpolicy"
    VALUE_HEADS: ClassVar[int] = 1
    """Critic outputs, one per return the learner estimates."""
    STATE: ClassVar[tuple[str, ...]] = ("actor", "optimizer", "obs_proc", "generator", "global_step", "iteration",
                                        "critic", "collector")
    """The training episodes in progress (``collector``) are saved where they run on from one iteration
    into the next; a learner whose iterations start with seeded resets leaves them out."""
    SAVED_AS = {"actor": "policy", "obs_proc": "obs_rms", "generator": "gen"}
    OPTIONAL = ("collector",)  # earlier versions saved no episodes: they restart, with a warning
    CLIP_KEY = "max_grad_norm"

    num_envs: int = setting(8, integer(1, MAX_ENVS), "Parallel envs (one gymnasium sync vector env).")
    lr: float = setting(1e-3, POSITIVE, "Adam learning rate of actor and critic.")
    ent_coef: float = setting(0.0, NON_NEGATIVE, "Entropy bonus coefficient.")
    max_grad_norm: float | None = setting(0.5, GRAD_NORM, "Max gradient norm (null: no clipping).")
    hidden: Sequence[int] = setting((64, 64), HIDDEN,
                                    "Hidden layers of the policy and of the critic, two separate MLPs of this shape.")
    activation: str = setting("tanh", choice(*ACTIVATIONS), "Hidden-layer activation.")
    normalize_obs: bool = setting(False, BOOL,
                                  "Running mean/std whitening of observations (frozen in act / evaluation).")
    obs_clip: float = setting(10.0, POSITIVE, "Whitened observations are clipped to [-obs_clip, obs_clip].")
    log_std_init: float = setting(0.0, real(), "Continuous actions: initial log std (actions live in a [-1, 1] box).")

    def __post_init__(self) -> None:
        super().__post_init__()
        self.envs, self.obs_proc, actor, critic = make_actor_critic(
            self.NAME, self.env, self.num_envs, self.seed, self.normalize_obs, self.obs_clip, self.hidden,
            self.activation, self.log_std_init, value_heads=self.VALUE_HEADS if self.has_critic() else None,
            inference=self.inference)
        self.actor = actor.to(self.device)
        self.critic = None if critic is None else critic.to(self.device)
        self.entropy_loss = EntropyLoss()
        self.collector = None if self.inference else RolloutCollector(
            self.envs, self.obs_proc, self.actor, self.seed, self.device)
        if self.collector is not None:
            self.collector.success = SuccessRule(self.env.get("success_key"))
        self.global_step = 0
        self.iteration = 0
        self.build()

    def collection(self, env_spaces: EnvSpaces) -> tuple[int, int, int, str] | None:
        """A rollout of :meth:`rollout_steps` vector steps of ``num_envs`` copies."""
        check_spaces(self.NAME, env_spaces.observation_space, env_spaces.action_space)  # what ObsProcessor reads
        steps, key = self.rollout_steps(env_spaces.horizon)
        dim = ObsProcessor(env_spaces.observation_space).dim
        heads = self.VALUE_HEADS if self.has_critic() else 1  # without a critic: one head of zeros
        return (self.num_envs, steps + 1, rollout_bytes(self.num_envs, steps, dim, env_spaces.action_space, heads),
                f"algo.num_envs or algo.{key}" if key else "algo.num_envs")

    # -- what a learner writes -----------------------------------------------------------------
    def rollout_steps(self, horizon: int | None) -> tuple[int, str | None]:
        """The most vector steps one rollout holds (``horizon``: the env's episode cap, None: unknown),
        and the algo key that sets them (None: the env's cap does)."""
        raise NotImplementedError

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
        """``(actions, log_probs)`` from the actor, drawn with the learner's own generator."""
        return self.actor.sample(obs, self.generator)

    @torch.no_grad()
    def act(self, obs, explore: bool = False) -> np.ndarray:
        x = obs_for_act(self.obs_proc, obs, self.device)
        a = self.sample(x)[0] if explore else self.actor.greedy(x)
        return self.actor.to_env(a)

    def finish(self, ro: Rollout, metrics: dict[str, float]) -> IterationResult:
        """Count the rollout's env steps and report it with the iteration's metrics."""
        self.global_step += ro.env_steps
        self.iteration += 1
        return IterationResult(env_steps=ro.env_steps, metrics=metrics, episode_returns=ro.episode_returns,
                               episode_lengths=ro.episode_lengths, episode_successes=ro.episode_successes,
                               episode_any_successes=ro.episode_any_successes)

    # -- checkpoints ---------------------------------------------------------------------------
    def load_state_dict(self, state: dict) -> None:
        """The declared entries; training episodes that cannot continue are said in one line."""
        super().load_state_dict(state)
        if self.collector is None or "collector" not in self.STATE:
            return
        if "collector" not in state:
            why = "the checkpoint holds no training episodes (written by an earlier version)"
        elif state["collector"]["envs"] is None:  # the collector left its fresh episodes as they were
            why = f"the state of env '{self.env['id']}' cannot be saved"
        else:
            return
        print(printable(f"her-run: warning: {why}: the resumed training episodes restart, so this run will not end "
                        "exactly as one that never stopped"), file=sys.stderr, flush=True)


def iteration_seed(seed: int, iteration: int) -> int:
    """The reset seed of iteration ``iteration`` of a run seeded ``seed`` (a resumed run replays it)."""
    return int(np.random.SeedSequence([int(seed), int(iteration)]).generate_state(1)[0])


def make_actor_critic(algo: str, env: dict, num_envs: int, seed: int, normalize_obs: bool, obs_clip: float,
                      hidden, activation: str, log_std_init: float, value_heads: int | None, inference: bool = False):
    """The training envs, observation processor, actor and (if ``value_heads``) critic of an on-policy
    algorithm. Networks are initialised from ``seed`` alone, whatever the global torch RNG holds.
    ``inference``: one env copy is built only to read the spaces, then closed; no envs are returned."""
    envs = make_vec(env, 1 if inference else int(num_envs), seed, training=not inference)
    check_spaces(algo, envs.single_observation_space, envs.single_action_space)
    obs_proc = ObsProcessor(envs.single_observation_space, normalize_obs, obs_clip)
    action_space = envs.single_action_space
    if inference:
        envs.close()
        envs = None
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        actor = ActorNet(obs_proc.dim, action_space, hidden, activation, True, log_std_init)
        critic = (mlp(obs_proc.dim, value_heads, hidden, activation, ortho_init=True, out_gain=1.0)
                  if value_heads else None)
    return envs, obs_proc, actor, critic


def obs_for_act(obs_proc: ObsProcessor, obs, device) -> torch.Tensor:
    """Raw vector-env observations -> actor input for ``act`` (stats are never updated here)."""
    return torch.from_numpy(obs_proc.normalize(obs_proc.flat(obs), update=False)).to(device)


def explained_variance(pred: torch.Tensor, target: torch.Tensor) -> float:
    """``1 - Var(target - pred) / Var(target)`` (nan when the target is constant)."""
    var = target.var()
    return float("nan") if var == 0 else float(1 - (target - pred).var() / var)
