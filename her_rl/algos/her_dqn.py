"""DQN with Hindsight Experience Replay on goal-conditioned envs with discrete actions.

Reads top to bottom: a Q-network Q(s, g) -> one value per action, a HindsightMemory that
relabels goals at sample time (her_rl/rl/her.py), and the HER paper's training cycle:
collect ``episodes_per_cycle`` episodes in one batched env, run ``updates_per_cycle`` gradient
steps, then Polyak-average the target network (decay ``polyak``).

Departures from the paper's bit-flip setup (Andrychowicz et al. 2017), all configurable:
    * one process with a batched env instead of 8 MPI workers; the 16 episodes of a cycle
      are played in parallel in one numpy call;
    * two hidden layers of 256 (paper: one); double DQN targets by default (``double_dqn``); Huber loss;
    * an episode terminates on success, so a transition that reaches its (relabelled) goal
      is not bootstrapped; truncation after n steps is bootstrapped;
    * bits enter the network as +-1 instead of running-mean normalisation (the statistics of
      uniform random bits are known: mean 1/2, std 1/2).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from her_rl.agent import IterationResult
from her_rl.envs import make_vec
from her_rl.registry import ConfigError
from her_rl.rl.her import STRATEGIES, HindsightMemory
from her_rl.rl.nets import mlp


class HerDQN:
    """HER-DQN agent: ``act``, ``remember``, ``hindsight``, ``learn``, ``train_iteration``."""

    def __init__(
        self,
        env: dict[str, Any],
        seed: int = 0,
        device: str = "cpu",
        strategy: str = "future",
        k: int = 4,
        hidden: Sequence[int] = (256,),
        lr: float = 1e-3,
        gamma: float = 0.98,
        batch_size: int = 128,
        buffer_size: int = 1_000_000,
        episodes_per_cycle: int = 16,
        updates_per_cycle: int = 40,
        polyak: float = 0.95,
        double_dqn: bool = True,
        epsilon: float = 0.2,
        clip_target: bool = True,
        grad_clip: float | None = None,
    ):
        if strategy not in STRATEGIES:
            raise ConfigError(f"unknown HER strategy '{strategy}'; valid choices: {', '.join(STRATEGIES)}")
        for key, value in {"lr": lr, "batch_size": batch_size, "buffer_size": buffer_size,
                           "episodes_per_cycle": episodes_per_cycle}.items():
            if not value > 0:
                raise ConfigError(f"algo.{key} must be > 0, got {value}")
        if batch_size > buffer_size:
            raise ConfigError(f"algo.batch_size ({batch_size}) is larger than algo.buffer_size ({buffer_size})")
        if not 0.0 <= epsilon <= 1.0 or not 0.0 <= polyak <= 1.0 or not 0.0 < gamma <= 1.0:
            raise ConfigError("algo.epsilon and algo.polyak must lie in [0, 1], algo.gamma in (0, 1]")

        self.device = torch.device(device)
        self.gamma, self.batch_size, self.epsilon = gamma, batch_size, epsilon
        self.updates_per_cycle, self.polyak, self.double_dqn = updates_per_cycle, polyak, double_dqn
        self.clip_target, self.grad_clip = clip_target, grad_clip

        self.envs = make_vec(env, episodes_per_cycle, seed=seed)
        if hasattr(self.envs, "autoreset"):
            self.envs.autoreset = False  # lock-step episodes; steps after success are masked below
        obs_space = self.envs.single_observation_space
        if not hasattr(obs_space, "spaces") or "desired_goal" not in obs_space.spaces:
            raise ConfigError("her_dqn needs a goal env (dict observation with desired_goal)")
        if not hasattr(self.envs.single_action_space, "n"):
            raise ConfigError("her_dqn acts in discrete action spaces only")
        self.horizon = int(getattr(self.envs, "n", None) or env.get("max_episode_steps"))
        self.obs_dim = int(np.prod(obs_space["observation"].shape))
        self.goal_dim = int(np.prod(obs_space["desired_goal"].shape))
        self.n_actions = int(self.envs.single_action_space.n)

        self.rng = np.random.default_rng(seed)
        self.memory = HindsightMemory(
            capacity_episodes=max(1, buffer_size // self.horizon), horizon=self.horizon,
            obs_dim=self.obs_dim, goal_dim=self.goal_dim, compute_reward=self.envs.compute_reward,
            strategy=strategy, k=k, terminal_reward=0.0, obs_dtype=np.int8, goal_dtype=np.int8, seed=seed,
        )
        self.q = mlp(self.obs_dim + self.goal_dim, self.n_actions, hidden, activation="relu").to(self.device)
        self.q_target = mlp(self.obs_dim + self.goal_dim, self.n_actions, hidden, activation="relu").to(self.device)
        self.q_target.load_state_dict(self.q.state_dict())
        self.q_target.requires_grad_(False)
        self.optimizer = torch.optim.Adam(self.q.parameters(), lr=lr, fused=self.device.type == "cpu")
        self.updates = 0

    # -- acting ------------------------------------------------------------------------------
    def _inputs(self, obs: np.ndarray, goal: np.ndarray) -> torch.Tensor:
        x = np.concatenate([obs.reshape(len(obs), -1), goal.reshape(len(goal), -1)], axis=1)
        return torch.as_tensor(x, dtype=torch.float32, device=self.device) * 2.0 - 1.0

    @torch.no_grad()
    def act(self, observation: dict[str, np.ndarray], goal: np.ndarray | None = None, explore: bool = False) -> np.ndarray:
        """Greedy actions for a batch of goal-env observations; epsilon-greedy when ``explore``."""
        goal = observation["desired_goal"] if goal is None else goal
        actions = self.q(self._inputs(observation["observation"], goal)).argmax(1).cpu().numpy()
        if explore and self.epsilon > 0:
            random = self.rng.random(len(actions)) < self.epsilon
            actions[random] = self.rng.integers(0, self.n_actions, size=int(random.sum()))
        return actions

    # -- memory ------------------------------------------------------------------------------
    def remember(self, episodes: dict[str, np.ndarray]) -> None:
        """Store a batch of episodes (see ``HindsightMemory.remember`` for the keys)."""
        self.memory.remember(**episodes)

    def hindsight(self, episode_index: int) -> dict[str, np.ndarray]:
        """The relabelled transitions HER derives from one stored episode (for inspection)."""
        return self.memory.hindsight(episode_index)

    def collect(self) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """Play one batch of lock-step episodes with exploration; returns the episodes and successes."""
        B, T = self.envs.num_envs, self.horizon
        obs, _ = self.envs.reset(seed=int(self.rng.integers(2**31)))
        ep_obs = np.empty((B, T + 1, self.obs_dim), dtype=np.int8)
        ep_ag = np.empty((B, T + 1, self.goal_dim), dtype=np.int8)
        ep_act = np.zeros((B, T), dtype=np.int64)
        ep_obs[:, 0], ep_ag[:, 0] = obs["observation"], obs["achieved_goal"]
        goal = obs["desired_goal"].copy()
        length = np.full(B, T, dtype=np.int64)
        active = np.ones(B, dtype=bool)
        for t in range(T):
            action = self.act(obs, goal, explore=True)
            obs, _, terminated, _, _ = self.envs.step(action)
            ep_act[:, t] = action
            ep_obs[:, t + 1], ep_ag[:, t + 1] = obs["observation"], obs["achieved_goal"]
            done_now = active & terminated
            length[done_now] = t + 1
            active &= ~terminated
            if not active.any():
                break
        episodes = {"obs": ep_obs, "achieved_goal": ep_ag, "desired_goal": goal, "action": ep_act, "length": length}
        return episodes, ~active

    # -- learning ----------------------------------------------------------------------------
    def learn(self) -> dict[str, float]:
        """One gradient step on a relabelled batch: (double) DQN target, Huber loss."""
        b = self.memory.sample(self.batch_size, self.rng)
        x = self._inputs(b["obs"], b["goal"])
        x_next = self._inputs(b["next_obs"], b["goal"])
        action = torch.as_tensor(b["action"], device=self.device)
        reward = torch.as_tensor(b["reward"], device=self.device)
        not_done = 1.0 - torch.as_tensor(b["terminated"], dtype=torch.float32, device=self.device)
        with torch.no_grad():  # Q(s') outside the graph: backward costs as much as the forward passes
            q_next_target = self.q_target(x_next)
            if self.double_dqn:
                q_next = q_next_target.gather(1, self.q(x_next).argmax(1, keepdim=True)).squeeze(1)
            else:
                q_next = q_next_target.max(1).values
            target = reward + self.gamma * not_done * q_next
            if self.clip_target:  # rewards lie in [-1, 0], so returns lie in [-1/(1-gamma), 0]
                target = target.clamp(-1.0 / (1.0 - self.gamma), 0.0)
        q = self.q(x).gather(1, action.unsqueeze(1)).squeeze(1)
        loss = F.smooth_l1_loss(q, target)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.grad_clip:
            torch.nn.utils.clip_grad_norm_(self.q.parameters(), self.grad_clip)
        self.optimizer.step()
        self.updates += 1
        return {"losses/td_loss": loss.item(), "losses/q_values": q.mean().item()}

    @torch.no_grad()
    def _update_target(self) -> None:
        for p, p_target in zip(self.q.parameters(), self.q_target.parameters()):
            p_target.mul_(self.polyak).add_(p, alpha=1.0 - self.polyak)

    def train_iteration(self) -> IterationResult:
        """One HER cycle: a batch of episodes, ``updates_per_cycle`` updates, a target-network step."""
        episodes, success = self.collect()
        self.remember(episodes)
        losses = [self.learn() for _ in range(self.updates_per_cycle)]
        self._update_target()
        metrics = {key: float(np.mean([m[key] for m in losses])) for key in losses[0]} if losses else {}
        metrics["charts/epsilon"] = self.epsilon
        lengths = episodes["length"]
        return IterationResult(
            env_steps=int(lengths.sum()),
            metrics=metrics,
            episode_returns=(-(lengths - success)).astype(float).tolist(),  # -1 per step before the goal
            episode_lengths=lengths.tolist(),
            episode_successes=success.astype(float).tolist(),
        )

    # -- checkpointing -----------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {
            "q": self.q.state_dict(),
            "q_target": self.q_target.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "memory": self.memory.state_dict(),
            "rng": self.rng.bit_generator.state,
            "updates": self.updates,
        }

    def load_state_dict(self, state: dict) -> None:
        self.q.load_state_dict(state["q"])
        self.q_target.load_state_dict(state["q_target"])
        self.optimizer.load_state_dict(state["optimizer"])
        if "memory" in state:
            self.memory.load_state_dict(state["memory"])
        self.rng.bit_generator.state = state["rng"]
        self.updates = int(state["updates"])
