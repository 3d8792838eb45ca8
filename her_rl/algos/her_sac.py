"""SAC with Hindsight Experience Replay on any goal-conditioned env with a Box action space.

Reads top to bottom: a tanh-squashed Gaussian policy pi(a | s, g) over [-1, 1]^A (rescaled to the
env's bounds only when stepping), twin critics Q1, Q2 with Polyak-averaged target copies, a learnable
temperature alpha = exp(log_alpha) tuned towards a target entropy of -|A| (Haarnoja et al. 2018,
"SAC and applications"), on the cycle every hindsight learner shares (her_rl/algos/hindsight.py):

    critic:  y = r + gamma^m (1 - terminated) * (min(Q1', Q2')(s', g, a') - alpha * log pi(a' | s', g)),
             a' ~ pi(. | s', g), s' the state m steps on (m = 1 unless ``n_step``);
             loss = mean (Q1 - y)^2 + mean (Q2 - y)^2
    actor:   loss = mean (alpha * log pi(a | s, g) - min(Q1, Q2)(s, g, a)),  a ~ pi(. | s, g) (reparameterised)
    alpha:   loss = -mean log_alpha * (log pi(a | s, g) + target_entropy): alpha grows while the policy's
             entropy is below the target and shrinks while above.

Target networks move once per cycle, by Polyak averaging with decay ``polyak`` (as the other
hindsight learners do, one key with one meaning across them) rather than by ``tau`` after every
gradient step. Q-target clipping to [-1/(1-gamma), 0] is off by default: the entropy bonus makes soft
returns leave the plain return range. Greedy actions (evaluation) are the squashed mean.

``simultaneous``: the three gradients of an update all from the parameters as they were before it (the
actor climbs the critics before their step, alpha scales both losses before its own); the steps
follow. The critics' half (target and critic loss) and the actor's half then share nothing that
changes, so with ``critic_threads`` 2 they run side by side, one thread each, instead of the two critics;
with ``actor_half: process`` the actor's half runs in a forked copy of the process instead of a thread.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar, Sequence

import numpy as np
import torch
import torch.nn as nn

from her_rl.algos.hindsight import HindsightLearner
from her_rl.errors import ConfigError
from her_rl.rl.actions import ContinuousAction, NormalPolicyHead
from her_rl.rl.forked_half import ForkedHalf, can_fork
from her_rl.rl.nets import Critic, mlp
from her_rl.rl.side_by_side import SideBySide
from her_rl.rl.updates import frozen
from her_rl.rules import BOOL, CRITIC_THREADS, POSITIVE, Rule, choice, optional, real


class Actor(nn.Module):
    """ReLU MLP trunk, then a squashed Gaussian head with state-dependent std."""

    def __init__(self, in_dim: int, act_dim: int, hidden: Sequence[int]):
        super().__init__()
        self.trunk = nn.Sequential(mlp(in_dim, hidden[-1], hidden[:-1], activation="relu"), nn.ReLU())
        self.head = NormalPolicyHead(hidden[-1], act_dim, state_dependent_std=True, squash=True)

    def forward(self, x: torch.Tensor) -> ContinuousAction:
        h = self.trunk(x)
        with torch.autocast(x.device.type, enabled=False):  # the distribution's maths in float32 at any precision
            return self.head(h.float())


@dataclass(eq=False)
class HerSAC(HindsightLearner):
    """HER-SAC agent: the base's ``act``, ``remember``, ``learn``, ``train_iteration``, ``state_dict``."""

    NAME = "her_sac"
    CONTINUOUS = True
    SIMULTANEOUS = True  # learners that write their own update (CrossQ, REDQ) refuse simultaneous
    TARGETS = {"q1": "q1_target", "q2": "q2_target"}
    STATE = ("actor", "q1", "q2", "q1_target", "q2_target", "actor_optimizer", "critic_optimizer",
             "alpha_optimizer", "log_alpha", "generator", *HindsightLearner.STATE)
    RULES: ClassVar[dict[str, Rule]] = {
        **HindsightLearner.RULES, "actor_lr": POSITIVE, "critic_lr": POSITIVE, "alpha_lr": POSITIVE,
        "alpha_init": POSITIVE, "autotune": BOOL, "target_entropy": optional(real()), "critic_threads": CRITIC_THREADS,
        "simultaneous": BOOL, "actor_half": choice("thread", "process"),
    }

    actor_lr: float = 1e-3
    """Adam learning rate of the policy."""
    critic_lr: float = 1e-3
    """Adam learning rate of the critics."""
    alpha_lr: float = 1e-3
    """Adam learning rate of log(alpha)."""
    alpha_init: float = 1.0
    """Initial entropy temperature."""
    autotune: bool = True
    """Tune alpha towards target_entropy; false: alpha stays alpha_init."""
    target_entropy: float | None = None
    """Entropy the temperature aims at; null: -(action dimensions)."""
    clip_target: bool = False
    """Clip Q targets to [-1/(1-gamma), 0] (the entropy bonus leaves that range)."""
    critic_threads: int = 1
    """2: the twin critics' passes run side by side, a critic per CPU thread (same numbers; faster with a second
    core free; leave threads at 1 with it). With simultaneous, the critics' half and the actor's half do."""
    simultaneous: bool = False
    """All of an update's gradients from the parameters before it (the actor climbs the critics before their
    step), which lets critic_threads 2 run the critics' and the actor's halves side by side."""
    actor_half: str = "thread"
    """With simultaneous and critic_threads 2, where the actor's half runs: thread (a second thread of this
    process) or process (a forked copy of it sharing the weights, where the halves do not slow each other;
    Linux only). The same numbers either way."""

    @classmethod
    def check_config(cls, values: dict[str, Any]) -> None:
        super().check_config(values)
        if values.get("simultaneous", False) and not cls.SIMULTANEOUS:
            raise ConfigError(f"algo.simultaneous=true is not allowed for {cls.NAME}: it is her_sac's "
                              "(leave it false)")
        if values.get("actor_half", "thread") == "process":
            if not (values.get("simultaneous", False) and values.get("critic_threads", 1) == 2):
                raise ConfigError("algo.actor_half=process needs algo.simultaneous=true and algo.critic_threads=2")
            if not can_fork():
                raise ConfigError("algo.actor_half=process needs Linux (it forks a copy of the process); "
                                  "use algo.actor_half=thread")

    def build(self) -> None:
        self.target_entropy = -float(self.act_dim) if self.target_entropy is None else float(self.target_entropy)
        self.actor = Actor(self.inputs.dim, self.act_dim, self.hidden).to(self.device)
        self.build_critics()
        self.log_alpha = torch.tensor(math.log(self.alpha_init), device=self.device, requires_grad=self.autotune)
        self.actor_optimizer = self.adam(self.actor.parameters(), self.actor_lr)
        self.alpha_optimizer = torch.optim.Adam([self.log_alpha], lr=self.alpha_lr)

    def build_critics(self) -> None:
        """The twin critics, their targets and optimiser (HER-REDQ builds its ensemble here instead); with
        ``simultaneous``, the second thread goes to the actor's half instead of the second critic."""
        threads = 1 if self.simultaneous else self.critic_threads
        self.twin_critics(lambda: Critic(self.inputs.dim, self.act_dim, self.hidden), threads=threads)
        self.halves = SideBySide(self.critic_threads if self.simultaneous else 1)
        self.forked: ForkedHalf | None = None  # actor_half: process, forked at the second update
        self.forked_tensors: dict | None = None  # what it shares with this process (forked_actor_half)
        if self.actor_half == "process" and self.device.type != "cpu":
            raise ConfigError(f"algo.actor_half=process runs on the CPU only, not device={self.device.type}; "
                              "use algo.actor_half=thread")

    @property
    def alpha(self) -> float:
        return float(self.log_alpha.detach().exp())

    def policy(self, x: torch.Tensor, explore: bool) -> np.ndarray:
        """Actions in [-1, 1]^A: a sample from the policy, or its squashed mean (greedy)."""
        dist = self.actor(x)
        a = dist.sample(self.generator) if explore else dist.mode()  # the same draw as sample_with_log_prob's
        return a.cpu().numpy().reshape(-1, self.act_dim).astype(np.float32)

    @torch.no_grad()
    def soft_target(self, t: dict[str, torch.Tensor], noise: torch.Tensor | None = None) -> torch.Tensor:
        """y = r + gamma^m (1 - d) (min(Q1', Q2')(s', a') - alpha log pi(a' | s')), a' drawn from the policy
        (with ``noise``, from these standard normal draws)."""
        with self.autocast():
            a_next, logp_next = self.actor(t["x_next"]).sample_with_log_prob(self.generator, noise)
        q_next = torch.min(*self.critics_at(self.q1_target, self.q2_target, x=t["x_next"], a=a_next)).float()
        return self.td_target(t, q_next - self.log_alpha.exp() * logp_next)

    def temperature_loss(self, logp: torch.Tensor) -> torch.Tensor:
        """-mean log_alpha (log pi + target entropy): its gradient raises alpha when entropy < target."""
        return -(self.log_alpha * (logp.detach() + self.target_entropy)).mean()

    def update(self, t: dict[str, torch.Tensor]) -> dict[str, float]:
        """One critic, one actor and (``autotune``) one temperature step on a batch of tensors."""
        if self.simultaneous:
            return self.simultaneous_update(t)
        qf_loss, q1 = self.critic_step((self.q1, self.q2), self.critic_optimizer, t, self.soft_target(t))
        return {**self.critic_metrics(qf_loss, q1), **self.actor_step(t)}

    def simultaneous_update(self, t: dict[str, torch.Tensor]) -> dict[str, float]:
        """The critics' and the actor's gradients from the same parameters, :attr:`halves` (the critics'
        half here, the actor's on the second thread where there is one, or in the forked process with
        ``actor_half: process``), then the three steps. The two halves' draws are made first, in the order
        :meth:`update` makes them otherwise."""
        noise = [torch.randn((len(t["x"]), self.act_dim), generator=self.generator, device=self.device)
                 for _ in range(2)]

        def critics_half() -> tuple[torch.Tensor, torch.Tensor]:
            self.critic_optimizer.zero_grad(set_to_none=True)
            return self.critic_gradients((self.q1, self.q2), t, self.soft_target(t, noise[0]))

        def actors_half() -> tuple[dict[str, float], torch.Tensor]:
            return self.actor_gradients(t, noise[1])

        if self.actor_half == "process" and self.halves.threads == 2 and self.actor_optimizer.state:
            return self.forked_update(t, noise)  # from the second update on: the optimisers' state exists
        (qf_loss, q1), (actor_metrics, logp) = self.halves.map(lambda half: half(), [critics_half, actors_half])
        self.clip_and_step(self.critic_optimizer)
        self.clip_and_step(self.actor_optimizer)
        return {**self.critic_metrics(qf_loss, q1), **actor_metrics, **self.temperature_step(logp)}

    def forked_update(self, t: dict[str, torch.Tensor], noise: list[torch.Tensor]) -> dict[str, float]:
        """:meth:`simultaneous_update` with the actor's half in the forked child, which also takes the actor's
        and the temperature's steps once the target here has read them; the critics step here once the
        child has read them. Either side's error ends the child (the next update forks anew)."""
        shared = self.forked_actor_half(t["x"])
        shared["x"].copy_(t["x"])
        shared["noise"].copy_(noise[1])
        forked = self.forked
        forked.submit()
        try:
            self.critic_optimizer.zero_grad(set_to_none=True)
            y = self.soft_target(t, noise[0])
            forked.proceed()  # the actor and alpha are read: the child may step them
            qf_loss, q1 = self.critic_gradients((self.q1, self.q2), t, y)
            forked.result()  # the child's half has read the critics
            self.clip_and_step(self.critic_optimizer)
            forked.result()  # the child's steps are taken
        except BaseException:
            forked.close()
            self.forked = None
            raise
        actor_loss, entropy, alpha_loss, alpha = shared["metrics"].tolist()
        metrics = {**self.critic_metrics(qf_loss, q1), "losses/actor_loss": actor_loss, "losses/entropy": entropy}
        return {**metrics, **({"losses/alpha_loss": alpha_loss} if self.autotune else {}), "losses/alpha": alpha}

    def forked_actor_half(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """The tensors the forked actor's half shares with this process, forking it first where it is not
        running or where one of them is no longer the shared one it forked with (a checkpoint loaded into
        an optimiser replaces its state): the actor's, the critics' and log(alpha)'s weights, the actor's
        and the temperature's optimiser states, the batch's inputs and noise, the metrics."""
        optimizers = (self.actor_optimizer, self.alpha_optimizer)
        weights = [*self.actor.parameters(), *self.q1.parameters(), *self.q2.parameters(), self.log_alpha]
        shared = self.forked_tensors
        if (self.forked is not None and shared["x"].shape == x.shape and all(w.is_shared() for w in weights)
                and all(opt.state is state for opt, state in zip(optimizers, shared["states"]))):
            return shared  # an optimiser's loaded state is a new dict of new tensors
        if self.forked is not None:
            self.forked.close()
        for w in [*weights, *(v for opt in optimizers for state in opt.state.values() for v in state.values()
                               if isinstance(v, torch.Tensor))]:
            w.data.share_memory_()
        shared = {"x": torch.zeros_like(x).share_memory_(),
                  "noise": torch.zeros(len(x), self.act_dim).share_memory_(),
                  "metrics": torch.zeros(4, dtype=torch.float64).share_memory_()}

        def actor_half():  # in the child: the actor's gradients, then (let go on) its step and alpha's
            metrics, logp = self.actor_gradients({"x": shared["x"]}, shared["noise"])
            yield  # the critics are read; going on once the target has read the actor and alpha
            self.clip_and_step(self.actor_optimizer)
            temperature = self.temperature_step(logp)
            shared["metrics"].copy_(torch.tensor(
                [metrics["losses/actor_loss"], metrics["losses/entropy"],
                 temperature.get("losses/alpha_loss", float("nan")), temperature["losses/alpha"]], dtype=torch.float64))

        self.forked_tensors = shared = {**shared, "states": [opt.state for opt in optimizers]}
        self.forked = ForkedHalf(actor_half, name=f"{self.NAME} actor's half")
        self.forked.start()
        return shared

    @staticmethod
    def critic_metrics(qf_loss: torch.Tensor, q1: torch.Tensor) -> dict[str, float]:
        return {"losses/qf_loss": qf_loss.item() / 2.0, "losses/q_values": q1.mean().item()}

    def actor_step(self, t: dict[str, torch.Tensor]) -> dict[str, float]:
        """One actor step against min(Q1, Q2) (the critics frozen), then the temperature's."""
        with frozen(self.q1, self.q2):
            metrics, logp = self.actor_gradients(t)
            self.clip_and_step(self.actor_optimizer)
        return {**metrics, **self.temperature_step(logp)}

    def actor_gradients(self, t: dict[str, torch.Tensor],
                        noise: torch.Tensor | None = None) -> tuple[dict[str, float], torch.Tensor]:
        """The actor's loss against min(Q1, Q2) backwarded into the actor's gradients only (the critics'
        part enters through dQ/da); its metrics and log-probabilities."""
        with self.autocast():
            a, logp = self.actor(t["x"]).sample_with_log_prob(self.generator, noise)
        q_pi, dq_da = self.min_q_and_action_gradient(t["x"], a)
        alpha_logp = self.log_alpha.detach().exp() * logp
        actor_loss = (alpha_logp - q_pi).mean()
        # the same gradient as actor_loss's: the critics' part enters through dq_da, found side by side
        self.actor_optimizer.zero_grad(set_to_none=True)
        (alpha_logp.mean() - (a * dq_da).sum()).backward()
        return {"losses/actor_loss": actor_loss.item(), "losses/entropy": -logp.mean().item()}, logp

    def min_q_and_action_gradient(self, x: torch.Tensor, a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """min(Q1, Q2)(x, a) per sample, and the gradient of its batch mean with respect to ``a``: each
        critic's backward pass :attr:`side_by_side`. Only dQ/da is asked of autograd, so no weight gradient is
        computed or stored, whether the critics are frozen (the plain update) or not (``simultaneous``, whose
        other half is training them)."""
        a_in = a.detach().requires_grad_(True)
        qs = [q.float() for q in self.critics_at(self.q1, self.q2, x=x, a=a_in)]
        q_min = torch.min(*qs)
        slopes = torch.autograd.grad(q_min.mean(), qs)  # through the min and the mean only

        def action_gradient(q_and_slope: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
            q, slope = q_and_slope
            return torch.autograd.grad(q, a_in, slope)[0]

        return q_min.detach(), sum(self.side_by_side.map(action_gradient, list(zip(qs, slopes))))

    def temperature_step(self, logp: torch.Tensor) -> dict[str, float]:
        """With ``autotune``, one Adam step of log(alpha) on the actor's log-probabilities."""
        metrics = {}
        if self.autotune:
            alpha_loss = self.temperature_loss(logp)
            self.step(self.alpha_optimizer, alpha_loss, clip=False)
            metrics["losses/alpha_loss"] = alpha_loss.item()
        metrics["losses/alpha"] = self.alpha
        return metrics
