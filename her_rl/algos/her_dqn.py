"""DQN with Hindsight Experience Replay on any goal-conditioned env with discrete actions.

Reads top to bottom: a Q-network Q(s, g) -> one value per action, a HindsightMemory that
relabels goals at sample time (her_rl/rl/her.py), and the HER paper's training cycle
(her_rl/algos/offpolicy.py): collect ``episodes_per_cycle`` episodes in one batched env, run
``updates_per_cycle`` gradient steps, then Polyak-average the target network (decay ``polyak``).
Everything env-specific (shapes, dtypes, horizon, reward and termination rules) is read from the
env, so bit-flip, push, drag and any registered gymnasium goal env with discrete actions work.

Departures from the paper's bit-flip setup (Andrychowicz et al. 2017), all configurable:
    * one process with a batched env instead of 8 MPI workers; the 16 episodes of a cycle
      are played in parallel in one numpy call;
    * two hidden layers of 256 (paper: one); double DQN targets by default (``double_dqn``); Huber loss;
    * optional n-step returns under the relabelled goal (``n_step``, see her_rl/rl/her.py) and a
      number of updates per cycle that follows the env steps collected (``updates_per_step``);
    * a transition is terminal only where the env's own ``compute_terminated`` says so (bit-flip
      ends on success, push and drag do not), so truncation is always bootstrapped;
    * bits enter the network as +-1 instead of running-mean normalisation (the statistics of
      uniform random bits are known: mean 1/2, std 1/2); other inputs use the paper's running
      mean/std (``normalize``, ``norm_clip``);
    * opt-in for bit-flip past 50 bits: ``network=elementwise``, one small Q-network shared by every
      bit (``ElementwiseQ`` in her_rl/rl/nets.py), and ``random_mix``, a share of relabelled goals
      drawn from any stored step (far goals; measured, it did not help an MLP at n=64).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from gymnasium import spaces

from her_rl.agent import IterationResult
from her_rl.algos.offpolicy import (PRECISIONS, GoalInputs, clip_to_return_range, collect_episodes, cycle_result,
                                    cycle_envs, hindsight_memory, polyak_update, update_precision, updates_for_cycle)
from her_rl.registry import ConfigError
from her_rl.rl.her import STRATEGIES
from her_rl.rl.nets import ElementwiseQ, mlp

NETWORKS = ("mlp", "elementwise")


class HerDQN:
    """HER-DQN agent: ``act``, ``remember``, ``hindsight``, ``learn``, ``train_iteration``."""

    def __init__(
        self,
        env: dict[str, Any],
        seed: int = 0,
        device: str = "cpu",
        inference: bool = False,
        strategy: str = "future",
        k: int = 4,
        random_mix: float = 0.0,
        hidden: Sequence[int] = (256,),
        network: str = "mlp",
        lr: float = 1e-3,
        gamma: float = 0.98,
        batch_size: int = 128,
        buffer_size: int = 1_000_000,
        episodes_per_cycle: int = 16,
        updates_per_cycle: int = 40,
        updates_per_step: float | None = None,
        n_step: int = 1,
        polyak: float = 0.95,
        double_dqn: bool = True,
        epsilon: float = 0.2,
        clip_target: bool = True,
        grad_clip: float | None = None,
        normalize: str | bool = "auto",
        norm_clip: float = 5.0,
        precision: str = "float32",
    ):
        if strategy not in STRATEGIES:
            raise ConfigError(f"unknown HER strategy '{strategy}'; valid choices: {', '.join(STRATEGIES)}")
        for key, value in {"lr": lr, "batch_size": batch_size, "buffer_size": buffer_size,
                           "episodes_per_cycle": episodes_per_cycle, "n_step": n_step,
                           "updates_per_step": 1 if updates_per_step is None else updates_per_step}.items():
            if not value > 0:
                raise ConfigError(f"algo.{key} must be > 0, got {value}")
        if batch_size > buffer_size:
            raise ConfigError(f"algo.batch_size ({batch_size}) is larger than algo.buffer_size ({buffer_size})")
        if precision not in PRECISIONS:
            raise ConfigError(f"algo.precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
        if network not in NETWORKS:
            raise ConfigError(f"algo.network must be one of {', '.join(NETWORKS)}, got {network!r}")
        if not 0.0 <= epsilon <= 1.0 or not 0.0 <= polyak <= 1.0 or not 0.0 < gamma <= 1.0:
            raise ConfigError("algo.epsilon and algo.polyak must lie in [0, 1], algo.gamma in (0, 1]")

        self.device = torch.device(device)
        self.gamma, self.batch_size, self.epsilon = gamma, batch_size, epsilon
        self.updates_per_cycle, self.updates_per_step = updates_per_cycle, updates_per_step
        self.polyak, self.double_dqn = polyak, double_dqn
        self.clip_target, self.grad_clip, self.precision = clip_target, grad_clip, precision

        self.envs, self.spec = cycle_envs(env, episodes_per_cycle, seed, "her_dqn", inference)
        if not isinstance(self.spec.action_space, spaces.Discrete):
            raise ConfigError(f"her_dqn acts in Discrete action spaces only; '{env.get('name')}' ({env.get('id')}) "
                              f"has {self.spec.action_space}")
        self.horizon = self.spec.horizon
        self.n_actions = int(self.spec.action_space.n)
        self.inputs = GoalInputs(self.spec, normalize, norm_clip, self.device)

        self.rng = np.random.default_rng(seed)
        self.memory = None if inference else hindsight_memory(self.spec, buffer_size, strategy, k, seed, n_step=n_step,
                                                              gamma=gamma, random_mix=random_mix)
        self.q = self._q_network(network, hidden, env).to(self.device)
        self.q_target = self._q_network(network, hidden, env).to(self.device)
        self.q_target.load_state_dict(self.q.state_dict())
        self.q_target.requires_grad_(False)
        self.optimizer = torch.optim.Adam(self.q.parameters(), lr=lr, fused=self.device.type == "cpu")
        self.updates = 0

    def _q_network(self, network: str, hidden: Sequence[int], env: dict[str, Any]) -> torch.nn.Module:
        if network == "mlp":
            return mlp(self.inputs.dim, self.n_actions, hidden, activation="relu")
        if not self.inputs.obs_dim == self.inputs.goal_dim == self.n_actions:
            raise ConfigError(f"algo.network=elementwise needs one action per observation and goal element "
                              f"(bit-flip); '{env.get('name')}' has {self.inputs.obs_dim} observation and "
                              f"{self.inputs.goal_dim} goal elements and {self.n_actions} actions")
        return ElementwiseQ(self.n_actions, hidden)

    # -- acting ------------------------------------------------------------------------------
    @torch.no_grad()
    def act(self, observation: dict[str, np.ndarray], goal: np.ndarray | None = None, explore: bool = False) -> np.ndarray:
        """Greedy actions for a batch of goal-env observations; epsilon-greedy when ``explore``."""
        goal = observation["desired_goal"] if goal is None else goal
        actions = self.q(self.inputs(observation["observation"], goal)).argmax(1).cpu().numpy()
        if explore and self.epsilon > 0:
            random = self.rng.random(len(actions)) < self.epsilon
            actions[random] = self.rng.integers(0, self.n_actions, size=int(random.sum()))
        return actions

    # -- memory ------------------------------------------------------------------------------
    def remember(self, episodes: dict[str, np.ndarray]) -> None:
        """Store a batch of episodes (see ``HindsightMemory.remember`` for the keys)."""
        self.memory.remember_episodes(episodes)

    def hindsight(self, episode_index: int) -> dict[str, np.ndarray]:
        """The relabelled transitions HER derives from one stored episode (for inspection)."""
        return self.memory.hindsight(episode_index)

    def collect(self) -> dict[str, np.ndarray]:
        """Play one batch of lock-step episodes with exploration (see ``collect_episodes``)."""
        return collect_episodes(self.envs, self.spec, lambda obs, goal: self.act(obs, goal, explore=True),
                                seed=int(self.rng.integers(2**31)))

    # -- learning ----------------------------------------------------------------------------
    def learn(self) -> dict[str, float]:
        """One gradient step on a relabelled batch: (double) DQN target over the memory's (n-step)
        return and discount, Huber loss."""
        b = self.memory.sample(self.batch_size, self.rng)
        x = self.inputs(b["obs"], b["goal"])
        x_next = self.inputs(b["next_obs"], b["goal"])
        action = torch.as_tensor(b["action"], device=self.device)
        reward = torch.as_tensor(b["reward"], device=self.device)
        not_done = 1.0 - torch.as_tensor(b["terminated"], dtype=torch.float32, device=self.device)
        discount = torch.as_tensor(b["discount"], device=self.device)  # gamma ** steps of the n-step return
        with update_precision(self.precision, self.device):
            with torch.no_grad():  # Q(s') outside the graph: backward costs as much as the forward passes
                q_next_target = self.q_target(x_next).float()
                if self.double_dqn:
                    q_next = q_next_target.gather(1, self.q(x_next).argmax(1, keepdim=True)).squeeze(1)
                else:
                    q_next = q_next_target.max(1).values
            q = self.q(x).float().gather(1, action.unsqueeze(1)).squeeze(1)
        target = reward + discount * not_done * q_next
        if self.clip_target:  # goal-env rewards lie in [-1, 0], so returns lie in [-1/(1-gamma), 0]
            target = clip_to_return_range(target, self.gamma)
        loss = F.smooth_l1_loss(q, target)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.grad_clip:
            torch.nn.utils.clip_grad_norm_(self.q.parameters(), self.grad_clip)
        self.optimizer.step()
        self.updates += 1
        return {"losses/td_loss": loss.item(), "losses/q_values": q.mean().item()}

    def train_iteration(self) -> IterationResult:
        """One HER cycle: a batch of episodes, ``updates_per_cycle`` updates, a target-network step."""
        episodes = self.collect()
        self.remember(episodes)
        self.inputs.update(episodes)
        steps = int(episodes["length"].sum())
        losses = [self.learn() for _ in range(updates_for_cycle(self.updates_per_cycle, self.updates_per_step, steps))]
        polyak_update(self.q, self.q_target, self.polyak)
        return cycle_result(episodes, losses, {"charts/epsilon": self.epsilon})

    # -- checkpointing -----------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {
            "q": self.q.state_dict(),
            "q_target": self.q_target.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "memory": self.memory.state_dict(),
            "inputs": self.inputs.state_dict(),
            "rng": self.rng.bit_generator.state,
            "updates": self.updates,
        }

    def load_state_dict(self, state: dict) -> None:
        self.q.load_state_dict(state["q"])
        self.q_target.load_state_dict(state["q_target"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.inputs.load_state_dict(state["inputs"])
        if "memory" in state and self.memory is not None:
            self.memory.load_state_dict(state["memory"])
        self.rng.bit_generator.state = state["rng"]
        self.updates = int(state["updates"])
