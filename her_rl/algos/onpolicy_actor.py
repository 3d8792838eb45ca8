"""What an on-policy learner (REINFORCE, PPO, RND-PPO) reads and acts with.

* :func:`check_spaces` rejects, in one ConfigError line, spaces an on-policy learner cannot read or act in.
* :class:`ObsProcessor` turns what a vector env returns into a flat float32 batch ``[N, D]``
  (goal envs: ``observation``, the extra keys beside the goal keys (her_rl.rl.her's
  :func:`~her_rl.rl.her.flat_observation`) and ``desired_goal`` concatenated; Discrete observations one-hot)
  and optionally whitens it with running statistics (updated only while collecting, never in
  ``act``).
* :class:`ActorNet` is the actor for a ``Discrete`` or ``Box`` action space, built from the shared
  ``mlp`` and action classes.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn
from gymnasium import spaces

from her_rl.errors import ConfigError
from her_rl.envs.goal_env import extra_keys
from her_rl.rl.her import flat_observation, flat_size
from her_rl.rl.nets import ContinuousAction, DiscreteAction, mlp
from her_rl.rl.normalize import RunningMeanStd


def check_spaces(algo: str, obs_space: spaces.Space, act_space: spaces.Space) -> None:
    """Raise a ConfigError unless ``algo`` can observe ``obs_space`` and act in ``act_space``."""
    vector = isinstance(act_space, spaces.Box) and len(act_space.shape) == 1
    if not (isinstance(act_space, spaces.Discrete) or vector):
        raise ConfigError(
            f"algo '{algo}' acts in Discrete or 1-D Box (continuous) action spaces; this env's action "
            f"space is {act_space}. Use an env with one of those, or wrap it to flatten its actions."
        )
    if isinstance(obs_space, spaces.Dict):
        if not {"observation", "desired_goal"} <= set(obs_space.spaces):
            raise ConfigError(
                f"algo '{algo}' reads Dict observations only from goal envs (keys observation and "
                f"desired_goal); got keys {sorted(obs_space.spaces)}"
            )
        extra_keys(obs_space, f"algo '{algo}'")  # one line for a key it cannot flatten, before anything is built
    elif not isinstance(obs_space, (spaces.Box, spaces.Discrete, spaces.MultiBinary)):
        raise ConfigError(f"algo '{algo}' cannot read observations of space {obs_space}")


class ObsProcessor:
    """Raw vector-env observations -> float32 ``[N, D]``, optionally whitened and clipped."""

    def __init__(self, obs_space: spaces.Space, normalize: bool = False, clip: float = 10.0):
        self.space = obs_space
        self.extra_keys = extra_keys(obs_space) if isinstance(obs_space, spaces.Dict) else ()
        if isinstance(obs_space, spaces.Dict):
            self.dim = int(np.prod(obs_space["observation"].shape) + np.prod(obs_space["desired_goal"].shape)
                           + sum(flat_size(obs_space[k]) for k in self.extra_keys))
        elif isinstance(obs_space, spaces.Discrete):
            self.dim = int(obs_space.n)
        else:
            self.dim = int(np.prod(obs_space.shape))
        self.rms = RunningMeanStd((self.dim,)) if normalize else None
        self.clip = clip

    def flat(self, obs) -> np.ndarray:
        """Flatten a batch of raw observations (no whitening)."""
        if isinstance(self.space, spaces.Dict):
            o, g = np.asarray(flat_observation(obs, self.extra_keys)), np.asarray(obs["desired_goal"])
            return np.concatenate([o.reshape(len(o), -1), g.reshape(len(g), -1)], axis=1).astype(np.float32)
        if isinstance(self.space, spaces.Discrete):
            idx = np.asarray(obs, dtype=np.int64).reshape(-1) - int(self.space.start)
            return np.eye(self.dim, dtype=np.float32)[idx]
        obs = np.asarray(obs, dtype=np.float32)
        return obs.reshape(len(obs), -1)

    def normalize(self, flat: np.ndarray, update: bool = False) -> np.ndarray:
        """Whiten a flat batch; ``update=True`` (collection only) first merges it into the stats."""
        if self.rms is None:
            return flat
        if update:
            self.rms.update(flat)
        return self.rms.normalize(flat, clip=self.clip)

    def state_dict(self) -> dict:
        return {} if self.rms is None else self.rms.state_dict()

    def load_state_dict(self, state: dict) -> None:
        if self.rms is not None and state:
            self.rms.load_state_dict(state)


class ActorNet(nn.Module):
    """Actor network: categorical over a Discrete space, diagonal Gaussian over a Box space.

    Gaussian actions live in a unit box: the env receives ``center + scale * a`` clipped to the
    bounds (finite bounds) while the unclipped ``a`` is stored, so log-probs stay exact.
    """

    def __init__(self, obs_dim: int, act_space: spaces.Space, hidden=(64, 64), activation: str = "tanh",
                 ortho_init: bool = True, log_std_init: float = 0.0):
        super().__init__()
        self.discrete = isinstance(act_space, spaces.Discrete)
        if self.discrete:
            self.start = int(act_space.start)
            self.net = mlp(obs_dim, int(act_space.n), hidden, activation, ortho_init, out_gain=0.01)
        else:
            act_dim = int(act_space.shape[0])
            self.net = mlp(obs_dim, act_dim, hidden, activation, ortho_init, out_gain=0.01)
            self.log_std = nn.Parameter(torch.full((act_dim,), float(log_std_init)))
            low, high = act_space.low.astype(np.float64), act_space.high.astype(np.float64)
            finite = np.isfinite(low) & np.isfinite(high)
            self.low, self.high = low, high
            self.center = np.where(finite, (high + low) / 2, 0.0)
            self.scale = np.where(finite, (high - low) / 2, 1.0)

    def dist(self, obs: torch.Tensor):
        out = self.net(obs)
        if self.discrete:
            return DiscreteAction(logits=out, greedy=True)  # greedy: no sampling here
        return ContinuousAction(out, self.log_std.exp().expand_as(out))

    def sample(self, obs: torch.Tensor, generator: torch.Generator | None = None):
        """``(actions, log_probs)`` drawn from the policy with the algorithm's own generator."""
        if self.discrete:
            a = DiscreteAction(logits=self.net(obs), generator=generator)
            return a.idx, a.log_prob
        d = self.dist(obs)
        u = d.mean + d.std * torch.randn(d.mean.shape, generator=generator, device=d.mean.device)
        return u, d.log_prob(u)

    def evaluate(self, obs: torch.Tensor, actions: torch.Tensor):
        """``(log_probs, entropy)`` of stored actions under the current parameters."""
        d = self.dist(obs)
        if self.discrete:
            return d.log_prob_of(actions), d.entropy
        return d.log_prob(actions), d.entropy()

    def greedy(self, obs: torch.Tensor) -> torch.Tensor:
        return self.dist(obs).mode()

    def to_env(self, actions: torch.Tensor) -> np.ndarray:
        """Stored actions -> what the vector env's ``step`` expects."""
        a = actions.detach().cpu().numpy()
        if self.discrete:
            return a.astype(np.int64) + self.start
        return np.clip(self.center + self.scale * a, self.low, self.high).astype(np.float32)
