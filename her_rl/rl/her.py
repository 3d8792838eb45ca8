"""Hindsight Experience Replay (Andrychowicz et al. 2017): reading a goal env, its network inputs,
collecting its episodes, and the memory that relabels them.

* :func:`goal_env_spec` reads what a learner needs from a goal env (shapes, dtypes, action space,
  horizon, reward and termination rules) into a :class:`GoalEnvSpec`, never from a list of known envs;
  what makes an env a goal env (its keys, spaces and time limit) is :mod:`her_rl.envs.goal_env`'s.
  :func:`flat_observation` flattens its extra observation keys (a velocity, a step count) after
  ``observation`` into the one observation vector the networks read;
* :class:`GoalInputs` turns (observation, goal) batches into network inputs: exact +-1 for bits,
  else the HER paper's running mean/std normalisation, clipped; :func:`batch_tensors` makes a sampled
  batch network-ready tensors;
* :func:`collect_episodes` plays one lock-step batch of episodes in a vector env (a HER cycle's
  episodes, in parallel) in :class:`HindsightMemory`'s layout; :func:`action_space_for` refuses an
  action space a learner cannot act in; continuous learners act in [-1, 1]^A and the env's Box bounds
  are applied only when stepping (:func:`to_env_actions`, :func:`from_env_actions`);
* :class:`HindsightMemory` stores whole episodes (one item of a :class:`ReplayBuffer` is an episode) and
  relabels goals at sample time, vectorised over the batch: with probability ``k / (k + 1)`` a
  transition's goal is replaced by an achieved goal chosen by the strategy, and its reward and
  termination are recomputed with the env's ``compute_reward`` and ``compute_terminated``. Sampling at
  a ratio of k relabelled to 1 original is the same distribution as the paper's "store k extra copies
  per transition", without the k-fold memory. Any off-policy learner can draw from it. It is built
  from the env's :class:`GoalEnvSpec` and a :class:`HindsightSettings`, the learner's choices below
  (capacity, strategy, k, random_mix, n_step and gamma, prioritize), checked once when it is made.

Transitions are drawn uniformly over all stored steps, as in the paper and Stable-Baselines3: an
episode is picked with probability proportional to its length, so the steps of short (successful)
episodes are not over-sampled.

With ``n_step`` > 1 a transition carries an n-step return under its (relabelled) goal: the
rewards of up to n steps, each recomputed with ``compute_reward`` for that goal, summed with
discount gamma and cut at the episode's end or at the first step the env calls terminal; its
``next_obs`` is the observation after the last counted step and ``discount`` is gamma to the
power of the steps counted, so a learner's target is ``reward + discount * (1 - terminated) * V``.
The segment's actions come from the behaviour policy, so n > 1 trades bias for faster
propagation of reward along long episodes (no off-policy correction, as in Rainbow's n-step DQN).

Strategies (paper, section 4.5):
    future   an achieved goal from a later step of the same episode (t+1 ... end)
    final    the episode's last achieved goal
    episode  an achieved goal from any step of the same episode
    random   an achieved goal drawn uniformly from all stored steps
    none     no relabelling (plain experience replay: the baseline)
Beyond the paper:
    next         the goal achieved right after the step itself (index t+1): every relabelled
                 transition is a one-step success, the densest reward signal a goal env gives
    next_future  half of the relabelled goals as ``next``, half as ``future`` (the "Next-Future"
                 strategy of Ozgur, Zurbrugg and Kumar 2025, reported to need fewer samples than
                 ``future`` on most of the robot-arm tasks it was measured on)

``prioritize="energy"`` draws episodes in proportion to their trajectory energy, the work done on
the object their achieved goals track (Zhao and Tresp 2018, "Energy-Based Hindsight Experience
Prioritization"; :func:`trajectory_energy`), instead of uniformly over stored steps: episodes in
which the object moved are replayed, those in which it lay still are not. ``energy_share`` below 1
draws only that share of each batch so, the rest uniformly over stored steps (not in the paper: the
steps of episodes that never touched the object stay in the batches).

``random_mix`` draws that share of the relabelled goals as ``random`` does, whatever the strategy:
on bit-flip an episode of an untrained policy wanders a few bits from its start, so ``future`` goals
alone never show the network the distances (about n/2) its evaluation goals lie at.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Callable

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces

from her_rl.envs.goal_env import ARRAY_SPACES, GOAL_KEYS, episode_horizon, extra_keys, goal_carrier
from her_rl.errors import ConfigError
from her_rl.rl.memory import space_bytes
from her_rl.rl.normalize import RunningMeanStd
from her_rl.rl.replay import ReplayBuffer
from her_rl.rl.success import EpisodeSuccess, SuccessRule, reward_probe


# -- a goal env: its spec, network inputs, episodes and actions ----------------------------------
@dataclass
class GoalEnvSpec:
    obs_shape: tuple[int, ...]
    """``observation``'s shape; with :attr:`extra_keys`, ``(D,)``: observation and extra keys flattened."""
    goal_shape: tuple[int, ...]
    obs_dtype: np.dtype
    goal_dtype: np.dtype
    binary: bool
    """Observation and goals are bits (MultiBinary): scaled exactly to +-1 instead of normalised."""
    action_space: gym.Space
    horizon: int
    compute_reward: Callable
    compute_terminated: Callable | None
    """The env's rule for ending an episode at a goal; None: it never ends early (Fetch, push)."""
    reward_bounds: tuple[float, float] | None = None
    """The range of compute_reward (-1/0 for Fetch and bit-flip, 0/1 for the mazes), probed or declared
    (env.reward_range); None: not known (a dense reward), so TD targets are not bounded."""
    success: SuccessRule = SuccessRule()
    """How an episode's success is read (info key, else compute_reward at the goal)."""
    extra_keys: tuple[str, ...] = ()
    """The observation's keys beside GOAL_KEYS, flattened after ``observation`` (:func:`flat_observation`)."""


def flat_size(space: gym.Space) -> int:
    """Numbers one observation of ``space`` flattens to (a Discrete: its integer value)."""
    return 1 if isinstance(space, spaces.Discrete) else int(np.prod(space.shape))


def flat_observation(obs: dict[str, Any], keys: tuple[str, ...], dtype=np.float32) -> np.ndarray:
    """A batch's observation vector ``[B, D]`` in ``dtype``: ``observation`` flattened, then each of ``keys``.
    No keys: ``obs["observation"]`` itself, as it is (an env without extra keys pays nothing)."""
    if not keys:
        return obs["observation"]
    parts = [np.asarray(obs["observation"]), *(np.asarray(obs[k]) for k in keys)]
    B = len(parts[0])
    return np.concatenate([p.reshape(B, -1) for p in parts], axis=1).astype(dtype, copy=False)


def goal_env_spec(envs: gym.vector.VectorEnv, env_cfg: dict[str, Any], algo: str) -> GoalEnvSpec:
    """What a hindsight learner needs from ``envs``; a ConfigError names what is missing."""
    name = f"'{env_cfg.get('name')}' ({env_cfg.get('id')})"
    space = envs.single_observation_space
    env = goal_carrier(envs)
    if (not isinstance(space, spaces.Dict) or not set(GOAL_KEYS) <= set(space.spaces)
            or not all(isinstance(space[k], ARRAY_SPACES) for k in GOAL_KEYS) or not hasattr(env, "compute_reward")):
        raise ConfigError(f"algo '{algo}' needs a goal-conditioned env (Dict observation whose observation, "
                          f"achieved_goal and desired_goal are arrays, and compute_reward); {name} has none")
    horizon = episode_horizon(envs, env_cfg)
    if horizon is None:
        raise ConfigError(f"algo '{algo}' needs episodes of bounded length; {name} has no time limit "
                          f"(set env.kwargs.max_episode_steps)")
    extra = extra_keys(space, f"env {name}")
    obs, goal = space["observation"], space["desired_goal"]
    binary = all(isinstance(space[k], spaces.MultiBinary) for k in (*GOAL_KEYS, *extra))
    obs_shape = (flat_size(obs) + sum(flat_size(space[k]) for k in extra),) if extra else tuple(obs.shape)
    probe = probe_rewards(envs, env, goal, env_cfg)
    return GoalEnvSpec(
        obs_shape=obs_shape, goal_shape=tuple(goal.shape),
        obs_dtype=np.dtype(np.int8 if binary else np.float32), goal_dtype=np.dtype(np.int8 if binary else np.float32),
        binary=binary, action_space=envs.single_action_space, horizon=horizon,
        compute_reward=env.compute_reward, compute_terminated=getattr(env, "compute_terminated", None),
        reward_bounds=probe.bounds,
        success=SuccessRule(env_cfg.get("success_key"), probe.goal_reward, env.compute_reward),
        extra_keys=extra,
    )


def probe_rewards(envs: gym.vector.VectorEnv, carrier: Any, goal_space: gym.Space, env_cfg: dict[str, Any]):
    """What compute_reward gives at and away from the goal, from a reset of ``envs`` (every learner
    reseeds its envs before collecting) and goals drawn from a copy of the goal space."""
    obs, _ = envs.reset(seed=0)
    space = copy.deepcopy(goal_space)
    space.seed(0)
    achieved = np.asarray(obs["achieved_goal"])
    drawn = np.stack([space.sample() for _ in range(len(achieved))]).astype(achieved.dtype)
    return reward_probe(carrier.compute_reward, achieved, np.asarray(obs["desired_goal"]), drawn,
                        env_cfg.get("reward_range"))


class GoalInputs:
    """Network inputs from (observation, goal): bits as +-1, anything else normalised with running
    statistics as in the HER paper: clip raw values to +-200, whiten with eps 0.01, clip to +-``clip``.
    Statistics change only in :meth:`update` (after each collected batch), never while sampling.
    The observation is the flattened one (extra keys included, :func:`flat_observation`)."""

    def __init__(self, spec: GoalEnvSpec, normalize: str | bool = "auto", clip: float = 5.0, device="cpu"):
        if normalize not in ("auto", True, False):
            raise ConfigError(f"algo.normalize must be auto, true or false, got {normalize!r}")
        self.running = (not spec.binary) if normalize == "auto" else bool(normalize)
        self.binary, self.clip, self.device = spec.binary, float(clip), torch.device(device)
        self.extra_keys = spec.extra_keys
        self.obs_dim, self.goal_dim = int(np.prod(spec.obs_shape)), int(np.prod(spec.goal_shape))
        self.obs_rms = RunningMeanStd((self.obs_dim,))
        self.goal_rms = RunningMeanStd((self.goal_dim,))
        self._refresh()

    @property
    def dim(self) -> int:
        return self.obs_dim + self.goal_dim

    def _refresh(self) -> None:
        """Cache mean and 1/std as one tensor over the concatenated input."""
        mean = np.concatenate([self.obs_rms.mean, self.goal_rms.mean])
        std = np.maximum(np.sqrt(np.concatenate([self.obs_rms.var, self.goal_rms.var])), 0.01)
        self._mean = torch.as_tensor(mean, dtype=torch.float32, device=self.device)
        self._inv_std = torch.as_tensor(1.0 / std, dtype=torch.float32, device=self.device)

    def update(self, episodes: dict[str, np.ndarray]) -> None:
        """Fold the valid steps of a batch of collected episodes into the statistics."""
        if not self.running:
            return
        T1 = episodes["obs"].shape[1]
        valid = np.arange(T1)[None, :] <= episodes["length"][:, None]
        self.obs_rms.update(np.clip(episodes["obs"][valid].reshape(-1, self.obs_dim), -200, 200))
        goals = np.concatenate([episodes["achieved_goal"][valid].reshape(-1, self.goal_dim),
                                episodes["desired_goal"].reshape(-1, self.goal_dim)])
        self.goal_rms.update(np.clip(goals, -200, 200))
        self._refresh()

    def __call__(self, obs: np.ndarray, goal: np.ndarray) -> torch.Tensor:
        x = np.concatenate([obs.reshape(len(obs), -1), goal.reshape(len(goal), -1)], axis=1)
        x = torch.as_tensor(x, dtype=torch.float32, device=self.device)
        if self.running:
            return ((x.clamp(-200.0, 200.0) - self._mean) * self._inv_std).clamp(-self.clip, self.clip)
        return x * 2.0 - 1.0 if self.binary else x

    def of(self, observation: dict[str, np.ndarray], goal: np.ndarray) -> torch.Tensor:
        """Inputs for a batch of goal-env observations (a dict, extra keys included) and goals."""
        return self(flat_observation(observation, self.extra_keys), goal)

    def state_dict(self) -> dict:
        return {"obs": self.obs_rms.state_dict(), "goal": self.goal_rms.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.obs_rms.load_state_dict(state["obs"])
        self.goal_rms.load_state_dict(state["goal"])
        self._refresh()


def collect_episodes(envs: gym.vector.VectorEnv, spec: GoalEnvSpec, act: Callable, seed: int,
                     max_env_steps: int | None = None) -> dict[str, np.ndarray]:
    """Play one episode in every copy of ``envs``, all starting together (lock-step).

    ``act(obs_dict)`` returns a batch of actions, each for the goal its copy's observation carries.
    A copy's episode ends at its first terminated or truncated step; later steps of that copy are
    played but not stored (``length`` marks them off). With ``max_env_steps`` (the budget left) the
    episodes still running are cut after the lock-step that reaches it (stored as they are,
    truncated). Returns HindsightMemory's episode layout plus ``ended`` (the episodes that ended,
    not cut), ``success`` and ``any_success`` (see :mod:`her_rl.rl.success`; all False when success
    cannot be told) and ``returns`` (undiscounted).
    """
    B, T = envs.num_envs, spec.horizon
    obs, _ = envs.reset(seed=seed)
    ep_obs = np.zeros((B, T + 1, *spec.obs_shape), dtype=spec.obs_dtype)
    ep_ag = np.zeros((B, T + 1, *spec.goal_shape), dtype=spec.goal_dtype)
    ep_act = np.zeros((B, T, *spec.action_space.shape), dtype=spec.action_space.dtype)
    ep_obs[:, 0], ep_ag[:, 0] = flat_observation(obs, spec.extra_keys), obs["achieved_goal"]
    goal = obs["desired_goal"].copy()
    length = np.full(B, T, dtype=np.int64)
    returns, tracker = np.zeros(B), EpisodeSuccess(spec.success, B)
    active, ended = np.ones(B, dtype=bool), np.zeros(B, dtype=bool)
    steps = 0
    for t in range(T):
        action = act(obs)  # a copy whose episode ended acts on its next one's goal: not stored
        obs, reward, terminated, truncated, info = envs.step(action)
        ep_act[:, t] = action
        ep_obs[:, t + 1], ep_ag[:, t + 1] = flat_observation(obs, spec.extra_keys), obs["achieved_goal"]
        returns[active] += np.asarray(reward)[active]
        tracker.step(info, obs, active)
        steps += int(active.sum())
        done_now = active & (np.asarray(terminated) | np.asarray(truncated))
        ended |= done_now
        cut = active & ~done_now if max_env_steps is not None and steps >= max_env_steps else np.zeros(B, bool)
        length[done_now | cut] = t + 1
        active &= ~(done_now | cut)
        if not active.any():
            break
    return {"obs": ep_obs, "achieved_goal": ep_ag, "desired_goal": goal, "action": ep_act, "length": length,
            "ended": ended, "success": tracker.last, "any_success": tracker.any, "success_told": tracker.told,
            "returns": returns}


def episode_bytes(copies: int, horizon: int, observation_space: spaces.Dict, action_space: gym.Space) -> int:
    """Bytes of the arrays :func:`collect_episodes` allocates for ``copies`` episodes of up to ``horizon``
    steps, from the spaces alone: observations and achieved goals as stored (bits int8, else float32),
    actions as the env takes them."""
    parts = observation_space.spaces
    itemsize = 1 if all(isinstance(part, spaces.MultiBinary) for part in parts.values()) else 4
    per_step = sum(space_bytes(part, itemsize) for key, part in parts.items() if key != "desired_goal")
    return int(copies) * ((horizon + 1) * per_step + horizon * space_bytes(action_space))


def action_space_for(spec: GoalEnvSpec, env_cfg: dict[str, Any], algo: str, continuous: bool) -> gym.Space:
    """The env's action space if the learner can act in it (Discrete, or a bounded Box for a continuous
    learner whose policy ends in tanh); anything else is a one-line ConfigError."""
    space, name = spec.action_space, f"'{env_cfg.get('name')}' ({env_cfg.get('id')})"
    if not continuous:
        if not isinstance(space, spaces.Discrete):
            raise ConfigError(f"{algo} acts in Discrete action spaces only; {name} has {space}")
        return space
    if not isinstance(space, spaces.Box):
        raise ConfigError(f"{algo} acts in Box (continuous) action spaces only; {name} has {space}")
    if not (np.isfinite(space.low).all() and np.isfinite(space.high).all()):
        raise ConfigError(f"{algo} needs finite action bounds (its policy ends in tanh); {name} has {space}")
    return space


def to_env_actions(a: np.ndarray, space: spaces.Box) -> np.ndarray:
    """Policy actions in [-1, 1] -> the env's [low, high] (affine)."""
    return (space.low + (a + 1.0) * 0.5 * (space.high - space.low)).astype(space.dtype)


def from_env_actions(a: np.ndarray, space: spaces.Box) -> np.ndarray:
    """The env's [low, high] -> [-1, 1]: the inverse of :func:`to_env_actions` (stored -> policy scale)."""
    return ((a - space.low) / (space.high - space.low) * 2.0 - 1.0).astype(np.float32)


def batch_tensors(b: dict[str, np.ndarray], inputs: GoalInputs, space: gym.Space,
                  device: torch.device) -> dict[str, torch.Tensor]:
    """A sampled batch as tensors: normalised inputs ``x``, ``x_next``; ``action`` (indices, or a Box's
    actions back in [-1, 1]); ``reward``, ``not_done`` and ``discount`` (gamma ** steps of an n-step return)."""
    def as_t(v):
        return torch.as_tensor(v, dtype=torch.float32, device=device)

    if isinstance(space, spaces.Box):
        action = as_t(from_env_actions(b["action"], space).reshape(len(b["reward"]), -1))
    else:
        action = torch.as_tensor(b["action"], device=device)
    out = {"x": inputs(b["obs"], b["goal"]), "x_next": inputs(b["next_obs"], b["goal"]), "action": action,
           "reward": as_t(b["reward"]), "not_done": 1.0 - as_t(b["terminated"])}
    if "discount" in b:
        out["discount"] = as_t(b["discount"])
    return out


# -- the relabelling memory ----------------------------------------------------------------------
STRATEGIES = ("future", "final", "episode", "random", "next", "next_future", "none")
PRIORITIES = ("none", "energy")

GRAVITY, MASS = 9.81, 1.0  # the energy of a unit mass under Earth's gravity (Zhao and Tresp 2018)


def trajectory_energy(achieved_goal: np.ndarray, length: np.ndarray, clip_energy: float,
                      dt: float = 0.04) -> np.ndarray:
    """The trajectory energy of a batch of episodes (Zhao and Tresp 2018), from the achieved goals
    [B, T+1, G] read as the object's position (the first three values; z the third): after step t the
    object's energy is E_t = m g (z_t - z_0) + m |p_t - p_(t-1)|^2 / (2 dt^2); a step's transition energy
    is E_1 for the first and E_t - E_(t-1) after, clipped to [0, clip_energy]; the trajectory energy is
    their sum over the episode's ``length`` steps. [B] float64."""
    pos = np.asarray(achieved_goal, dtype=np.float64).reshape(*np.shape(achieved_goal)[:2], -1)[..., :3]
    steps = pos.shape[1] - 1
    height = pos[:, 1:, 2] - pos[:, :1, 2] if pos.shape[-1] >= 3 else np.zeros((len(pos), steps))
    speed2 = (np.diff(pos, axis=1) ** 2).sum(-1) / dt ** 2
    energy = MASS * GRAVITY * height + 0.5 * MASS * speed2  # [B, T]: after each step
    transition = np.clip(np.concatenate([energy[:, :1], np.diff(energy, axis=1)], axis=1), 0.0, clip_energy)
    counted = np.arange(steps)[None] < np.asarray(length)[:, None]
    return (transition * counted).sum(1)


@dataclass(frozen=True)
class HindsightSettings:
    """What a learner chooses about its :class:`HindsightMemory`, checked once: the hindsight learner's
    keys of the same names (her_rl/algos/hindsight.py says what each does); the env decides the rest."""

    buffer_size: int = 1_000_000
    """Transitions held: ``buffer_size // horizon`` whole episodes (at least one)."""
    strategy: str = "future"
    k: int = 4
    random_mix: float = 0.0
    n_step: int = 1
    gamma: float | None = None
    """Discount of the n-step return; None: batches carry no ``discount`` (and n_step must be 1)."""
    prioritize: str = "none"
    clip_energy: float = 0.5
    energy_dt: float = 0.04
    energy_share: float = 1.0
    """With prioritize=energy: the share of each batch drawn by energy; the rest uniformly over steps."""

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise ValueError(f"unknown HER strategy '{self.strategy}'; valid choices: {', '.join(STRATEGIES)}")
        if isinstance(self.k, bool) or int(self.k) != self.k or self.k < 0:
            raise ValueError(f"HER k must be an integer >= 0, got {self.k!r}")
        if isinstance(self.n_step, bool) or int(self.n_step) != self.n_step or self.n_step < 1:
            raise ValueError(f"n_step must be an integer >= 1, got {self.n_step!r}")
        if self.n_step > 1 and self.gamma is None:
            raise ValueError("n_step > 1 needs gamma (the n-step return is discounted)")
        if not 0.0 <= self.random_mix <= 1.0:
            raise ValueError(f"random_mix must lie in [0, 1], got {self.random_mix!r}")
        if self.prioritize not in PRIORITIES:
            raise ValueError(f"unknown prioritisation '{self.prioritize}'; valid choices: {', '.join(PRIORITIES)}")
        if not 0.0 <= self.energy_share <= 1.0:
            raise ValueError(f"energy_share must lie in [0, 1], got {self.energy_share!r}")
        # k and n_step size index arrays: 4.0 is kept as 4 (a frozen dataclass is set through object)
        object.__setattr__(self, "k", int(self.k))
        object.__setattr__(self, "n_step", int(self.n_step))

    @property
    def relabel_prob(self) -> float:
        """The chance a sampled transition's goal is relabelled: k/(k+1), 0 for strategy none."""
        return 0.0 if self.strategy == "none" else self.k / (self.k + 1.0)


class HindsightMemory:
    """Episode-indexed replay memory with hindsight goal relabelling at sample time.

    Episodes have at most ``spec.horizon`` steps; ``obs`` and ``achieved_goal`` hold ``horizon + 1``
    entries per episode (index t is before action t). ``length`` is the number of real steps,
    so episodes that ended early (on success) are stored without padding steps being sampled.

    Shapes and dtypes come from the env's spec (:func:`goal_env_spec`: bits as int8,
    positions as float32, actions as the env takes them, discrete ones as int64 scalars). A transition
    is terminal when the env's own rule says so: ``compute_terminated(next_achieved_goal, goal, None)``
    (the gymnasium-robotics GoalEnv API; bit-flip ends on success, push and Fetch never end early);
    ``None`` means the env never terminates. ``settings`` says how much it holds and how it relabels.
    """

    def __init__(self, spec: GoalEnvSpec, settings: HindsightSettings = HindsightSettings(), seed: int | None = None):
        self.settings, self.horizon = settings, int(spec.horizon)
        self.compute_reward, self.compute_terminated = spec.compute_reward, spec.compute_terminated
        T, actions = self.horizon, spec.action_space
        self.episodes = ReplayBuffer(
            max(1, settings.buffer_size // T),
            {
                "obs": ((T + 1, *spec.obs_shape), spec.obs_dtype),
                "achieved_goal": ((T + 1, *spec.goal_shape), spec.goal_dtype),
                "desired_goal": (spec.goal_shape, spec.goal_dtype),
                "action": ((T, *actions.shape), actions.dtype),
                "length": ((), np.int64),
                **({"energy": ((), np.float64)} if settings.prioritize == "energy" else {}),
            },
        )
        self.rng = np.random.default_rng(seed)
        self._cum_length: np.ndarray | None = None  # cumulative lengths of stored episodes (cached)
        self._cum_energy: np.ndarray | None = None  # cumulative energies (prioritize=energy; cached)

    # -- storing ---------------------------------------------------------------------------
    def remember(self, obs, achieved_goal, desired_goal, action, length) -> None:
        """Store a batch of B episodes: obs [B, T+1, ...], achieved_goal [B, T+1, ...], desired_goal
        [B, ...], action [B, T, ...], length [B] (steps actually taken; later entries are ignored)."""
        length = np.asarray(length)
        if length.min(initial=1) < 1 or length.max(initial=1) > self.horizon:
            raise ValueError(f"episode lengths must lie in [1, {self.horizon}]")
        extra, settings = {}, self.settings
        if settings.prioritize == "energy":
            extra["energy"] = trajectory_energy(np.asarray(achieved_goal), length, settings.clip_energy,
                                                settings.energy_dt)
        self.episodes.add(obs=obs, achieved_goal=achieved_goal, desired_goal=desired_goal, action=action, length=length,
                          **extra)
        self._cum_length = self._cum_energy = None

    EPISODE_KEYS = ("obs", "achieved_goal", "desired_goal", "action", "length")

    def remember_episodes(self, episodes: dict[str, np.ndarray]) -> None:
        """Store what :func:`collect_episodes` returned (its other keys, such as
        success and returns, are reports, not memory)."""
        self.remember(**{key: episodes[key] for key in self.EPISODE_KEYS})

    def __len__(self) -> int:
        """Number of stored transitions."""
        return int(self._cumulative()[-1]) if len(self.episodes) else 0

    def _cumulative(self) -> np.ndarray:
        if self._cum_length is None:
            self._cum_length = np.cumsum(self.episodes.data["length"][: len(self.episodes)])
        return self._cum_length

    def sample_steps(self, batch_size: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """(episode, step) pairs drawn uniformly over all stored transitions."""
        cum = self._cumulative()
        u = rng.integers(0, cum[-1], size=batch_size)
        ep = np.searchsorted(cum, u, side="right")
        return ep, u - (cum[ep] - self.episodes.data["length"][ep])

    def draw(self, batch_size: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """The (episode, step) pairs of a batch: uniform over stored steps, or with ``prioritize=energy``
        an episode drawn in proportion to its trajectory energy and a step uniform within it (uniform
        over steps while no stored episode has energy); with ``energy_share`` below 1, the first
        ``round(energy_share * batch_size)`` pairs so and the rest uniformly over steps."""
        if self.settings.prioritize != "energy":
            return self.sample_steps(batch_size, rng)
        if self._cum_energy is None:
            self._cum_energy = np.cumsum(self.episodes.data["energy"][: len(self.episodes)])
        cum = self._cum_energy
        if not cum[-1] > 0:
            return self.sample_steps(batch_size, rng)
        by_energy = round(self.settings.energy_share * batch_size)
        ep = np.minimum(np.searchsorted(cum, rng.random(by_energy) * cum[-1], side="right"), len(cum) - 1)
        t = (rng.random(by_energy) * self.episodes.data["length"][ep]).astype(np.int64)
        if by_energy == batch_size:  # the paper's draw, alone: runs from before energy_share keep their numbers
            return ep, t
        uniform_ep, uniform_t = self.sample_steps(batch_size - by_energy, rng)
        return np.concatenate([ep, uniform_ep]), np.concatenate([t, uniform_t])

    # -- relabelling -----------------------------------------------------------------------
    def goal_indices(self, ep: np.ndarray, t: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """For transitions (episode ep, step t), the (episode, index) of the achieved goal the
        strategy picks. Index i refers to ``achieved_goal[:, i]``, the goal achieved after i steps.
        With ``random_mix`` a share of them is drawn from any stored step instead."""
        g_ep, g_idx = self._strategy_indices(ep, t, rng)
        mix = self.settings.random_mix
        if mix > 0 and self.settings.strategy not in ("random", "none"):
            # goals from other episodes lie at distances this episode never travelled (bit-flip: ~n/2)
            mixed = rng.random(len(ep)) < mix
            g_ep = g_ep.copy()  # future/final/episode return the caller's ep itself; g_idx is always new
            other, other_t = self.sample_steps(int(mixed.sum()), rng)
            g_ep[mixed], g_idx[mixed] = other, other_t + 1
        return g_ep, g_idx

    def _strategy_indices(self, ep: np.ndarray, t: np.ndarray, rng: np.random.Generator):
        L, strategy = self.episodes.data["length"][ep], self.settings.strategy
        u = rng.random(len(ep))
        if strategy == "future":  # uniform over t+1 .. L: achieved at or after this transition's outcome
            return ep, t + 1 + (u * (L - t)).astype(np.int64)
        if strategy == "final":
            return ep, L
        if strategy == "episode":  # uniform over 1 .. L
            return ep, 1 + (u * L).astype(np.int64)
        if strategy == "random":  # uniform over every goal achieved by a stored step
            other, other_t = self.sample_steps(len(ep), rng)
            return other, other_t + 1
        if strategy == "next":  # the goal the step itself achieved: a one-step success
            return ep, t + 1
        if strategy == "next_future":  # half next, half future (Ozgur et al. 2025)
            future = t + 1 + (u * (L - t)).astype(np.int64)
            return ep, np.where(rng.random(len(ep)) < 0.5, t + 1, future)
        return ep, t + 1  # "none": unused

    def _transitions(self, ep, t, goal) -> dict[str, np.ndarray]:
        d = self.episodes.data
        B, m, gamma = len(ep), self.settings.n_step, self.settings.gamma
        L = d["length"][ep]
        idx = t[:, None] + 1 + np.arange(m)  # [B, m]: the goal achieved after step t + i
        valid = idx <= L[:, None]  # i = 0 is always valid (t < L)
        ag = d["achieved_goal"][ep[:, None], np.minimum(idx, L[:, None])]
        goals = np.broadcast_to(goal[:, None], (B, m, *goal.shape[1:]))  # a view: no copy when m == 1
        flat_ag, flat_goal = ag.reshape(B * m, *ag.shape[2:]), goals.reshape(B * m, *goals.shape[2:])
        reward = np.asarray(self.compute_reward(flat_ag, flat_goal, None), dtype=np.float32).reshape(B, m)
        if self.compute_terminated is None:
            term = np.zeros((B, m), dtype=bool)
        else:  # Fetch-style envs return a scalar False: broadcast it
            term = np.broadcast_to(np.asarray(self.compute_terminated(flat_ag, flat_goal, None), dtype=bool),
                                   (B * m,)).reshape(B, m) & valid
        ended_before = (np.cumsum(term, axis=1) - term) > 0
        counted = valid & ~ended_before  # steps inside the episode, up to and including a terminal one
        steps = counted.sum(axis=1)
        out = {
            "obs": d["obs"][ep, t],
            "goal": goal,
            "action": d["action"][ep, t],
            "reward": reward[:, 0] if m == 1 else (reward * counted * gamma ** np.arange(m)).sum(1).astype(np.float32),
            "next_obs": d["obs"][ep, t + steps],
            "terminated": (term & counted).any(axis=1),
        }
        if gamma is not None:
            out["discount"] = (gamma ** steps).astype(np.float32)
        return out

    def sample(self, batch_size: int, rng: np.random.Generator | None = None) -> dict[str, np.ndarray]:
        """A batch of transitions drawn uniformly, each relabelled with probability k/(k+1): keys obs,
        goal, action, reward, next_obs, terminated (reward and terminated always match the goal), and
        ``discount`` (gamma ** steps in the n-step return) when the memory knows gamma."""
        if len(self.episodes) == 0:
            raise RuntimeError("cannot sample from an empty memory")
        rng = self.rng if rng is None else rng
        ep, t = self.draw(batch_size, rng)
        goal = self.episodes.data["desired_goal"][ep]  # fancy indexing: already a copy
        relabel = rng.random(batch_size) < self.settings.relabel_prob
        if relabel.any():
            g_ep, g_idx = self.goal_indices(ep[relabel], t[relabel], rng)
            goal[relabel] = self.episodes.data["achieved_goal"][g_ep, g_idx]
        return self._transitions(ep, t, goal)

    def hindsight(self, episode_index: int, rng: np.random.Generator | None = None) -> dict[str, np.ndarray]:
        """The paper's explicit form for one stored episode: each of its transitions with its original
        goal followed by k relabelled copies (goals from the strategy). For inspection and tests;
        training samples the same distribution lazily through :meth:`sample`."""
        rng = self.rng if rng is None else rng
        L = int(self.episodes.data["length"][episode_index])
        k = 0 if self.settings.strategy == "none" else self.settings.k
        t = np.repeat(np.arange(L), k + 1)
        ep = np.full(len(t), episode_index, dtype=np.int64)
        goal = self.episodes.data["desired_goal"][ep]
        relabel = np.tile(np.arange(k + 1) > 0, L)
        if relabel.any():
            g_ep, g_idx = self.goal_indices(ep[relabel], t[relabel], rng)
            goal[relabel] = self.episodes.data["achieved_goal"][g_ep, g_idx]
        out = self._transitions(ep, t, goal)
        out["t"] = t
        return out

    # -- checkpointing ---------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {"episodes": self.episodes.state_dict(), "rng": self.rng.bit_generator.state}

    def load_state_dict(self, state: dict) -> None:
        self.episodes.load_state_dict(state["episodes"])
        self.rng.bit_generator.state = state["rng"]
        self._cum_length = self._cum_energy = None
