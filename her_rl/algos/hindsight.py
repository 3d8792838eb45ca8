"""The hindsight learner base: what HER-DQN, HER-DDPG, HER-SAC and HER-TD3 share.

A learner is a dataclass of its hyperparameters (the shared base, her_rl/algos/base.py, says how its
keys and checkpoint state are declared). :class:`HindsightLearner` declares the keys every hindsight
learner has and runs the HER paper's cycle (Andrychowicz et al. 2017):

    collect  ``episodes_per_cycle`` lock-step episodes in one batched env, exploring;
    store    them in a HindsightMemory (her_rl/rl/her.py: goals relabelled at sample time by
             ``strategy`` and ``k``, a ``random_mix`` share of far goals, ``n_step`` returns under the
             relabelled goal; its HindsightSettings are made once from these keys) and fold them into
             the input statistics (GoalInputs, also her_rl/rl/her.py);
    update   ``updates_per_cycle`` gradient steps (or ``updates_per_step`` per env step collected) on
             batches of ``batch_size``; forward passes run in ``precision``, gradients are clipped to
             a norm of ``grad_clip``;
    targets  one Polyak step (decay ``polyak``) of every target network the learner declares (or, with
             ``tau``, a soft step of tau after every gradient step).

A learner adds its own keys as fields, names itself (``NAME``, its registry name), its targets
(``TARGETS``: online -> target attribute) and what a checkpoint holds (``STATE``, ending in the base's
entries), and writes
``build`` (networks, optimisers), ``policy`` (actions from network inputs: indices, or [-1, 1]^A
for a ``CONTINUOUS`` learner, rescaled to the env's box only when stepping) and ``update`` (one
gradient step on a batch of tensors, returning its metrics).

The pieces of an update the off-policy learners share are this module's functions: :func:`frozen`
(modules that take no gradient during an actor's step), :func:`td_target` (the bootstrapped target),
:func:`polyak_update` (the target networks' step) and :func:`clip_to_return_range` (targets clamped to
the returns a sparse reward allows).
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, fields
from typing import Any, Callable, ClassVar, Iterator, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from her_rl.agent import IterationResult
from her_rl.algos.base import Learner
from her_rl.algos.cycle import cycle_envs, cycle_episodes, cycle_result, updates_for_cycle
from her_rl.errors import ConfigError
from her_rl.rl.her import (PRIORITIES, STRATEGIES, GoalInputs, HindsightMemory, HindsightSettings, action_space_for,
                            batch_tensors, collect_episodes, episode_bytes, to_env_actions)
from her_rl.rules import (BOOL, COUNT, GRAD_NORM, HIDDEN, MAX_ENVS, POSITIVE, UNIT, UNIT_OPEN_CLOSED, choice,
                          integer, optional, setting)
from her_rl.envs.probe import EnvSpaces

PRECISIONS = ("float32", "bfloat16")


@contextmanager
def frozen(*modules: torch.nn.Module) -> Iterator[None]:
    """The modules' weights take no gradient inside: an actor's step needs dQ/da, not the critics' weights."""
    for module in modules:
        module.requires_grad_(False)
    try:
        yield
    finally:
        for module in modules:
            module.requires_grad_(True)


def td_target(reward: torch.Tensor, discount: torch.Tensor, not_done: torch.Tensor,
              q_next: torch.Tensor) -> torch.Tensor:
    """``reward + discount * not_done * q_next``: the one-step (``discount`` = gamma) or n-step (gamma^m)
    bootstrapped target; ``not_done`` is 0 where the env terminated, so truncation is bootstrapped."""
    return reward + discount * not_done * q_next


@torch.no_grad()
def polyak_update(net: torch.nn.Module, target: torch.nn.Module, decay: float) -> None:
    """target <- decay * target + (1 - decay) * net (the HER paper's target update, decay 0.95)."""
    for p, p_target in zip(net.parameters(), target.parameters()):
        p_target.mul_(decay).add_(p, alpha=1.0 - decay)


def clip_to_return_range(target: torch.Tensor, gamma: float,
                         reward_range: tuple[float, float] | None = (-1.0, 0.0)) -> torch.Tensor:
    """Clamp to the range of discounted returns of rewards in ``reward_range`` (a -1/0 goal reward:
    [-1/(1-gamma), 0], the HER paper's bound; 0/1: [0, 1/(1-gamma)]); None: an unknown range, no clamp."""
    if reward_range is None:
        return target
    low, high = reward_range
    horizon = 1.0 / (1.0 - gamma) if gamma < 1.0 else float("inf")  # undiscounted: only the sign is bounded
    lowest = 0.0 if low >= 0 else low * horizon
    highest = 0.0 if high <= 0 else high * horizon
    return target.clamp(lowest, highest)


@dataclass(eq=False)
class HindsightLearner(Learner):
    """A hindsight learner: ``act``, ``remember``, ``hindsight``, ``collect``, ``learn``,
    ``train_iteration``, ``state_dict`` (see the module's docstring for what a learner adds)."""

    NAME: ClassVar[str] = "hindsight"
    CONTINUOUS: ClassVar[bool] = False
    TARGETS: ClassVar[dict[str, str]] = {}
    STATE: ClassVar[tuple[str, ...]] = ("inputs", "np_generator", "memory", "updates")  # a learner's come first
    SAVED_AS = {"np_generator": "rng"}
    OPTIONAL = ("memory",)  # a run with checkpoint.save_replay=false saves none
    CLIP_KEY = "grad_clip"

    strategy: str = setting("future", choice(*STRATEGIES),
                            "Which achieved goals relabel a transition (the strategies of her_rl/rl/her.py); none: no "
                            "relabelling.")
    k: int = setting(4, integer(0), "Relabelled goals per real one (relabel probability k/(k+1)).")
    random_mix: float = setting(0.0, UNIT,
                                "Share of the relabelled goals drawn as `random` draws them (from any stored step), "
                                "whatever the strategy: goals at distances the episode itself never travelled.")
    prioritize: str = setting("none", choice(*PRIORITIES),
                              "Which stored episodes a batch draws from: none, uniformly over steps; energy, in "
                              "proportion to the trajectory energy of the object the achieved goals track (Zhao and "
                              "Tresp 2018; her_rl/rl/her.py).")
    clip_energy: float = setting(0.5, POSITIVE,
                                 "With prioritize=energy: the clip of each step's energy gain (the paper's 0.5 on "
                                 "Fetch).")
    energy_dt: float = setting(0.04, POSITIVE,
                               "With prioritize=energy: seconds between two env steps, for the object's speed (Fetch: "
                               "0.04).")
    energy_share: float = setting(1.0, UNIT,
                                  "With prioritize=energy: the share of each batch drawn by energy (1: the paper's "
                                  "whole batch); the rest uniformly over stored steps, so episodes that never moved the "
                                  "object are still replayed.")
    hidden: Sequence[int] = setting((256, 256, 256), HIDDEN,
                                    "Hidden layers (ReLU) of the actor and of every critic; the actor ends in tanh or "
                                    "a squashed Gaussian.")
    gamma: float = setting(0.98, UNIT_OPEN_CLOSED, "Discount.")
    batch_size: int = setting(256, COUNT, "Transitions per gradient step.")
    buffer_size: int = setting(1_000_000, COUNT, "Replay capacity in transitions.")
    episodes_per_cycle: int | None = setting(None, optional(integer(1, MAX_ENVS)),
                                             "Episodes per cycle, played in parallel in one batched env; null: from "
                                             "the episode length, the HER paper's 16 episodes (8 workers x 2) up to "
                                             "50 steps, else as many as make about 800 env steps (a 300-step env: 3).")
    updates_per_cycle: int = setting(40, COUNT,
                                     "Gradient steps per cycle of up to 16 x 50 env steps; a cycle of longer episodes "
                                     "gets as many per 800 env steps it collected, so a 300-step env has the "
                                     "update-to-data ratio of a 50-step one.")
    updates_per_step: float | None = setting(None, optional(POSITIVE),
                                             "When set, gradient steps per env step collected (SB3's SAC does 1.0); "
                                             "replaces updates_per_cycle.")
    n_step: int = setting(1, integer(1, 1000),
                          "N-step returns under the relabelled goal: rewards recomputed with compute_reward for up to "
                          "n steps, cut at the episode's end or its first terminal step; the target is that return "
                          "plus gamma^steps times the bootstrap (no off-policy correction); 1: the one-step target.")
    polyak: float = setting(0.95, UNIT, "Decay of every target network after each cycle (not a per-step tau).")
    tau: float | None = setting(None, optional(UNIT_OPEN_CLOSED),
                                "When set, every target network moves by tau towards its online network after each "
                                "gradient step (SB3's soft update, 0.005), so the targets keep pace however many "
                                "updates a cycle has; replaces polyak.")
    clip_target: bool = setting(True, BOOL, "Clip Q targets to [-1/(1-gamma), 0], the range a -1/0 reward allows.")
    grad_clip: float | None = setting(None, GRAD_NORM,
                                      "Max gradient norm of each optimiser's step (null: no clipping).")
    normalize: str | bool = setting("auto", choice("auto", True, False),
                                    "Inputs whitened with running mean/std of the stored observations and goals (the "
                                    "paper's: raw values clipped to +-200, std floored at 0.01); auto: on unless "
                                    "observation and goals are bits, which enter as exact +-1.")
    norm_clip: float = setting(5.0, POSITIVE, "Whitened inputs are clipped to [-norm_clip, norm_clip].")
    precision: str = setting("float32", choice(*PRECISIONS),
                             "bfloat16: the update's matrix products run through torch.autocast (parameters, Adam "
                             "state and loss stay float32); faster only on CPUs with AMX / AVX512-BF16, slower "
                             "elsewhere.")

    @classmethod
    def check_config(cls, values: dict[str, Any]) -> None:
        super().check_config(values)
        batch, buffer = values.get("batch_size"), values.get("buffer_size")
        if batch is not None and buffer is not None and batch > buffer:
            raise ConfigError(f"algo.batch_size={batch} is not allowed: it is larger than algo.buffer_size ({buffer})")

    def __post_init__(self) -> None:
        super().__post_init__()
        self.envs, self.spec = cycle_envs(self.env, self.episodes_per_cycle, self.seed, self.NAME, self.inference)
        self.cycle_episodes = cycle_episodes(self.episodes_per_cycle, self.spec.horizon)
        self.action_space = action_space_for(self.spec, self.env, self.NAME, self.CONTINUOUS)
        self.act_dim = int(np.prod(self.action_space.shape)) if self.CONTINUOUS else None
        self.horizon = self.spec.horizon
        self.inputs = GoalInputs(self.spec, self.normalize, self.norm_clip, self.device)
        self.np_generator = np.random.default_rng(self.seed)  # replay batches, exploration, reset seeds
        # the memory's settings are this learner's keys of the same names (buffer_size, strategy, k, ...)
        settings = HindsightSettings(**{f.name: getattr(self, f.name) for f in fields(HindsightSettings)})
        self.memory = None if self.inference else HindsightMemory(self.spec, settings, self.seed)
        self.updates = 0
        self.build()
        for net, target in self.TARGETS.items():
            getattr(self, target).load_state_dict(getattr(self, net).state_dict())
            getattr(self, target).requires_grad_(False)

    def collection(self, env_spaces: EnvSpaces) -> tuple[int, int, int, str] | None:
        """A cycle's lock-step episodes: one per copy, each up to the env's horizon."""
        horizon = env_spaces.horizon
        if horizon is None or not env_spaces.goal_env:
            return None  # goal_env_spec refuses the env with its own line
        copies = cycle_episodes(self.episodes_per_cycle, horizon)
        return (copies, horizon + 1, episode_bytes(copies, horizon, env_spaces.observation_space,
                                                   env_spaces.action_space), "algo.episodes_per_cycle")

    # -- what a learner writes -----------------------------------------------------------------
    def build(self) -> None:
        """Networks (each declared target built like its online network) and optimisers."""
        raise NotImplementedError

    def policy(self, x: torch.Tensor, explore: bool) -> np.ndarray:
        """Actions for a batch of network inputs: greedy, or exploring while collecting."""
        raise NotImplementedError

    def update(self, t: dict[str, torch.Tensor]) -> dict[str, float]:
        """One gradient step on a batch of tensors (see :meth:`tensors`); returns its metrics."""
        raise NotImplementedError

    def cycle_metrics(self) -> dict[str, float]:
        """Scalars reported once per cycle beside the updates' means."""
        return {}

    # -- acting and memory ---------------------------------------------------------------------
    @torch.no_grad()
    def act(self, obs: dict[str, np.ndarray], explore: bool = False) -> np.ndarray:
        """Env actions for a batch of goal-env observations, each towards its own ``desired_goal``."""
        a = self.policy(self.inputs.of(obs, obs["desired_goal"]), explore)  # extra observation keys included
        if not self.CONTINUOUS:
            return a
        return to_env_actions(a, self.action_space).reshape(len(a), *self.action_space.shape)

    def collect(self, max_env_steps: int | None = None) -> dict[str, np.ndarray]:
        """Play one batch of lock-step episodes with exploration (see ``collect_episodes``), cut
        at the lock-step that reaches ``max_env_steps``."""
        return collect_episodes(self.envs, self.spec, lambda obs: self.act(obs, explore=True),
                                seed=int(self.np_generator.integers(2**31)), max_env_steps=max_env_steps)

    def remember(self, episodes: dict[str, np.ndarray]) -> None:
        """Store a batch of episodes (see ``HindsightMemory.remember`` for the keys)."""
        self.memory.remember_episodes(episodes)

    def hindsight(self, episode_index: int) -> dict[str, np.ndarray]:
        """The relabelled transitions HER derives from one stored episode (for inspection)."""
        return self.memory.hindsight(episode_index)

    # -- learning ------------------------------------------------------------------------------
    def tensors(self, b: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
        """A sampled batch as network-ready tensors (see ``her_rl.rl.her.batch_tensors``)."""
        return batch_tensors(b, self.inputs, self.action_space, self.device)

    def learn(self) -> dict[str, float]:
        """One gradient step on a relabelled batch from the memory."""
        metrics = self.update(self.tensors(self.memory.sample(self.batch_size, self.np_generator)))
        self.updates += 1
        if self.tau:
            self.move_targets(1.0 - self.tau)
        return metrics

    def move_targets(self, decay: float) -> None:
        """One Polyak step of every declared target network: target <- decay target + (1 - decay) online."""
        for net, target in self.TARGETS.items():
            polyak_update(getattr(self, net), getattr(self, target), decay)

    def train_iteration(self, max_env_steps: int | None = None) -> IterationResult:
        """One HER cycle: a batch of episodes (cut where ``max_env_steps``, the budget left, is
        reached), its updates, a Polyak step of the targets."""
        episodes = self.collect(max_env_steps)
        self.remember(episodes)
        self.inputs.update(episodes)
        steps = int(episodes["length"].sum())
        n_updates = updates_for_cycle(self.updates_per_cycle, self.updates_per_step, steps, self.horizon)
        losses = [self.learn() for _ in range(n_updates)]
        if not self.tau:  # the HER paper's one step per cycle
            self.move_targets(self.polyak)
        return cycle_result(episodes, losses, self.cycle_metrics())

    def bounded(self, target: torch.Tensor) -> torch.Tensor:
        """``target`` clamped to the returns the env's reward range allows (``clip_target``; the range
        probed through compute_reward or declared as env.reward_range; unknown: no clamp)."""
        return clip_to_return_range(target, self.gamma, self.spec.reward_bounds) if self.clip_target else target

    def td_target(self, t: dict[str, torch.Tensor], q_next: torch.Tensor,
                  entropy: torch.Tensor | None = None) -> torch.Tensor:
        """The batch's bootstrapped target r + gamma^m (1 - terminated) q_next, :meth:`bounded`. With
        ``entropy`` (alpha log pi(a' | s')) only q_next is bounded and the entropy subtracted after: the
        soft value may rightly leave the return range (HER-REDQ, HER-CrossQ)."""
        if entropy is None:
            return self.bounded(td_target(t["reward"], t["discount"], t["not_done"], q_next))
        return td_target(t["reward"], t["discount"], t["not_done"], self.bounded(q_next) - entropy)

    def twin_critics(self, make: Callable[[], torch.nn.Module], lr: float, targets: bool = True) -> None:
        """Critics ``q1``, ``q2`` from ``make``, their target copies (``targets``) and one Adam optimiser over
        both at learning rate ``lr``: HER-TD3's, HER-SAC's and HER-CrossQ's."""
        self.q1, self.q2 = make().to(self.device), make().to(self.device)
        if targets:
            self.q1_target, self.q2_target = make().to(self.device), make().to(self.device)
        self.critic_optimizer = self.adam([*self.q1.parameters(), *self.q2.parameters()], lr)

    def fit_twin_critics(self, t: dict[str, torch.Tensor], y: torch.Tensor) -> dict[str, float]:
        """One Adam step of both critics on mean (Q1 - y)^2 + mean (Q2 - y)^2: HER-SAC's and HER-TD3's."""
        with self.autocast():
            q1, q2 = self.q1(t["x"], t["action"]).float(), self.q2(t["x"], t["action"]).float()
        qf_loss = F.mse_loss(q1, y) + F.mse_loss(q2, y)
        self.step(self.critic_optimizer, qf_loss)
        return {"losses/qf_loss": qf_loss.item() / 2.0, "losses/q_values": q1.mean().item()}

    def autocast(self) -> torch.autocast:
        """Context for an update's forward (and so backward) passes. ``bfloat16`` runs the matrix products
        through ``torch.autocast``: faster on CPUs with AMX / AVX512-BF16, slower on others. Parameters,
        Adam's state and the loss stay float32."""
        return torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.precision == "bfloat16")

    def adam(self, params, lr: float) -> torch.optim.Adam:
        return torch.optim.Adam(params, lr=lr, fused=self.device.type == "cpu")
