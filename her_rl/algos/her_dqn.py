"""DQN with Hindsight Experience Replay on any goal-conditioned env with discrete actions.

Reads top to bottom: a Q-network Q(s, g) -> one value per action, trained on the HER paper's cycle
(her_rl/algos/hindsight.py): collect ``episodes_per_cycle`` episodes in one batched env, run
``updates_per_cycle`` gradient steps on goals the HindsightMemory relabels at sample time
(her_rl/rl/her.py), then Polyak-average the target network (decay ``polyak``). Everything
env-specific (shapes, dtypes, horizon, reward and termination rules) is read from the env, so
bit-flip, push, drag and any registered gymnasium goal env with discrete actions work.

    target:  y = r + gamma^m (1 - terminated) Q'(s_m, g, argmax_a Q(s_m, g, a)), clipped to [-1/(1-gamma), 0]
             (m = 1 unless ``n_step``; plain max over Q' without ``double_dqn``); Huber loss on Q(s, g, a) - y
    explore: epsilon-greedy

Departures from the paper's bit-flip setup (Andrychowicz et al. 2017), all configurable:
    * one process with a batched env instead of 8 MPI workers; the 16 episodes of a cycle
      are played in parallel in one numpy call;
    * two hidden layers of 256 (paper: one); double DQN targets by default (``double_dqn``); Huber loss;
    * a transition is terminal only where the env's own ``compute_terminated`` says so (bit-flip
      ends on success, push and drag do not), so truncation is always bootstrapped;
    * bits enter the network as +-1 instead of running-mean normalisation (the statistics of
      uniform random bits are known: mean 1/2, std 1/2); other inputs use the paper's running
      mean/std (``normalize``, ``norm_clip``);
    * for bit-flip past 30 bits: ``network=elementwise``, one small Q-network shared by every
      bit (``ElementwiseQ`` in her_rl/rl/nets.py), past 128 ``network=elementwise_dueling``
      (``ElementwiseDuelingQ``: each bit's advantage from its own element), and ``random_mix``, a share of relabelled goals
      drawn from any stored step (far goals; measured, it did not help an MLP at n=64).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F

from her_rl.algos.hindsight import HindsightLearner
from her_rl.errors import ConfigError
from her_rl.rl.nets import ElementwiseDuelingQ, ElementwiseQ, mlp
from her_rl.rules import BOOL, POSITIVE, UNIT, choice, setting

NETWORKS = ("mlp", "elementwise", "elementwise_dueling")


@dataclass(eq=False)
class HerDQN(HindsightLearner):
    """HER-DQN agent: the base's ``act``, ``remember``, ``hindsight``, ``learn``, ``train_iteration``."""

    NAME = "her_dqn"
    TARGETS = {"q": "q_target"}
    STATE = ("q", "q_target", "optimizer", *HindsightLearner.STATE)

    hidden: Sequence[int] = setting((256, 256),
                                    doc="Q-network hidden layers (paper: one layer of 256; two needed fewer env steps "
                                        "at n=30); with network=elementwise, the widths of the shared per-element "
                                        "layers.")
    network: str = setting("mlp", choice(*NETWORKS),
                           "mlp | elementwise: one small network shared by every element, fed (observation bit, goal "
                           "bit) plus the mean over all elements after each layer (ElementwiseQ); for envs where "
                           "action i acts on element i of observation and goal (bit-flip), refused elsewhere; "
                           "elementwise_dueling: the same elements, each action's advantage from its own element "
                           "alone plus a value of all of them (ElementwiseDuelingQ), which keeps the right flip ahead "
                           "at starts hundreds of bits from the goal.")
    lr: float = setting(1e-3, POSITIVE, "Adam learning rate.")
    batch_size: int = 128
    polyak: float = setting(0.5, doc="Target decay after each cycle (paper: 0.95; 0.5 needed ~3x fewer steps at n=30).")
    double_dqn: bool = setting(True, BOOL, "Double-DQN targets.")
    epsilon: float = setting(0.2, UNIT, "Epsilon-greedy exploration while collecting.")

    def build(self) -> None:
        self.n_actions = int(self.action_space.n)
        self.q = self._q_network().to(self.device)
        self.q_target = self._q_network().to(self.device)
        self.optimizer = self.adam(self.q.parameters(), self.lr)

    def _q_network(self) -> torch.nn.Module:
        if self.network == "mlp":
            return mlp(self.inputs.dim, self.n_actions, self.hidden, activation="relu")
        if not self.inputs.obs_dim == self.inputs.goal_dim == self.n_actions:
            raise ConfigError(f"algo.network={self.network} needs one action per observation and goal element "
                              f"(bit-flip); '{self.env.get('name')}' has {self.inputs.obs_dim} observation and "
                              f"{self.inputs.goal_dim} goal elements and {self.n_actions} actions")
        shared = ElementwiseQ if self.network == "elementwise" else ElementwiseDuelingQ
        return shared(self.n_actions, self.hidden)

    def policy(self, x: torch.Tensor, explore: bool) -> np.ndarray:
        """Greedy action indices; epsilon-greedy when ``explore``."""
        actions = self.q(x).argmax(1).cpu().numpy()
        if explore and self.epsilon > 0:
            random = self.np_generator.random(len(actions)) < self.epsilon
            actions[random] = self.np_generator.integers(0, self.n_actions, size=int(random.sum()))
        return actions

    def update(self, t: dict[str, torch.Tensor]) -> dict[str, float]:
        """(Double) DQN target over the memory's (n-step) return and discount, Huber loss."""
        with self.autocast():
            with torch.no_grad():  # Q(s') outside the graph: backward costs as much as the forward passes
                q_next_target = self.q_target(t["x_next"]).float()
                if self.double_dqn:
                    q_next = q_next_target.gather(1, self.q(t["x_next"]).argmax(1, keepdim=True)).squeeze(1)
                else:
                    q_next = q_next_target.max(1).values
            q = self.q(t["x"]).float().gather(1, t["action"].unsqueeze(1)).squeeze(1)
        target = self.td_target(t, q_next)
        loss = F.smooth_l1_loss(q, target)
        self.step(self.optimizer, loss)
        return {"losses/td_loss": loss.item(), "losses/q_values": q.mean().item()}

    def cycle_metrics(self) -> dict[str, float]:
        return {"charts/epsilon": self.epsilon}
