"""The opt-in CPU-parallel updates of the learners with twin critics, with the numbers of their plain ones.

Each learner writes its plain update top to bottom (her_sac.py, her_td3.py, her_crossq.py); this module
runs the same update with its pieces spread over two CPU cores, and only when the config asks for it:

``critic_threads: 2`` (HER-SAC, HER-TD3, HER-CrossQ): the two critics share no weights, so their forward
    and backward passes need not wait for each other. On a CPU each pass is a chain of small matrix
    products that one core runs about as fast as two (at a batch of 256 the products are too short to
    split), so the second core does more by taking the other critic whole (:class:`SideBySide`). torch
    releases Python's lock inside every operator, which lets the two chains overlap.
``simultaneous: true`` (HER-SAC): the three gradients of an update all from the parameters as they were
    before it (the actor climbs the critics before their step, alpha scales both losses before its own);
    the steps follow. The critics' half (target and critic loss) and the actor's half then share nothing
    that changes, so with ``critic_threads`` 2 they run side by side, one thread each, instead of the two
    critics. This one changes the numbers: it is a setting, not bookkeeping.
``actor_half: process`` (HER-SAC, with both above): the actor's half runs in a forked copy of the process
    (:class:`ForkedHalf`) instead of a thread: two halves on two threads of one process slow each other
    (each takes 10-16% longer beside the other than alone), in two processes neither does
    (docs/benchmarks/env-speed.md).

Threads and processes give the numbers of one thread bit for bit: each critic's operators run in the
same order on one thread, and no two threads write the same tensor (each critic's gradients are its
own). Grad mode and autocast are per thread in torch, so a piece sets its own inside the function it
hands over.
"""

from __future__ import annotations

import inspect
import multiprocessing as mp
import signal
import sys
import traceback
import weakref
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any, Callable, Sequence, TypeVar

import torch
import torch.nn.functional as F

from her_rl.algos.hindsight import frozen
from her_rl.errors import ConfigError

T = TypeVar("T")
R = TypeVar("R")
Batch = dict[str, torch.Tensor]


def can_fork() -> bool:
    """Whether a copy of this process may be forked here: on Linux (Windows cannot fork, and on macOS
    forking a process that has used the system's frameworks is unsafe)."""
    return sys.platform.startswith("linux") and "fork" in mp.get_all_start_methods()


def check_actor_half(values: dict[str, Any]) -> None:
    """``actor_half: process`` only beside ``simultaneous`` and ``critic_threads`` 2, and only where it can fork."""
    if values.get("actor_half", "thread") == "process":
        if not (values.get("simultaneous", False) and values.get("critic_threads", 1) == 2):
            raise ConfigError("algo.actor_half=process needs algo.simultaneous=true and algo.critic_threads=2")
        if not can_fork():
            raise ConfigError("algo.actor_half=process needs Linux (it forks a copy of the process); "
                              "use algo.actor_half=thread")


class SideBySide:
    """``map(fn, items)``: ``fn`` on every item, the first here and the others on worker threads (up to
    ``threads - 1`` of them); with ``threads`` 1, one after the other on this thread."""

    def __init__(self, threads: int = 1):
        self.threads = int(threads)
        self._pool: ThreadPoolExecutor | None = None  # started at first use, after any env workers are forked

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        if self.threads < 2 or len(items) < 2:
            return [fn(item) for item in items]
        if self._pool is None:
            # each worker splits a product over as many threads as this one does (OpenMP's count is per thread)
            self._pool = ThreadPoolExecutor(self.threads - 1, thread_name_prefix="her-rl-critic",
                                            initializer=torch.set_num_threads, initargs=(torch.get_num_threads(),))
        later = [self._pool.submit(fn, item) for item in items[1:]]
        try:
            first = fn(items[0])
        finally:  # whatever raised, no piece outlives the call: the next update's gradients are its own
            wait(later)
        return [first, *(f.result() for f in later)]

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None


def _serve(piece: Callable[[], Any], conn, other_end, threads: int) -> None:
    other_end.close()  # this process's end: once it is closed everywhere, recv() below ends
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    torch.set_num_threads(threads)
    try:
        while conn.recv() is not None:
            try:
                steps = piece()
                for _ in steps if inspect.isgenerator(steps) else ():
                    conn.send(None)  # at a yield: this far, and wait to be let go on
                    if conn.recv() is None:
                        return
                reply = None
            except BaseException as e:  # sent back: the parent raises it in one line
                reply = f"{type(e).__name__}: {e}".splitlines()[0] if str(e) else type(e).__name__
                traceback.clear_frames(e.__traceback__)
            conn.send(reply)
    except (EOFError, OSError):  # the parent is gone
        return


def _stop(conn, process) -> None:
    try:
        conn.send(None)
    except (BrokenPipeError, OSError):
        pass
    conn.close()
    process.join(timeout=5)
    if process.is_alive():
        process.kill()
        process.join()


class ForkedHalf:
    """``piece()`` in a child forked from this process, on the second core. The child has this process's
    objects as they were at the fork; the tensors both must see afterwards (the weights, the piece's inputs
    and outputs) are in shared memory, moved there before the fork by the caller.

    :meth:`start` forks, :meth:`submit` starts one call there (one message each way over a pipe),
    :meth:`result` waits for it to end or reach a ``yield`` (raising the child's error as a ``RuntimeError``),
    :meth:`proceed` lets it go on from there (so each side can wait for the other to have read what it is
    about to write), :meth:`close` ends the child. A caller that stops between :meth:`submit` and the
    call's end, for its own error or the child's, closes the child: a :meth:`proceed` already sent would
    otherwise be read as the next call's start (a fresh fork follows).

    The child never outlives this process: it reads its pipe, which ends when this process does (however
    it ends, SIGKILL included), and it ignores the interrupts a terminal or a job scheduler sends the whole
    process group, which this process answers itself."""

    def __init__(self, piece: Callable[[], Any], name: str):
        self.piece, self.name = piece, name
        self._conn = None
        self._process = None
        self._finalizer = None

    @property
    def started(self) -> bool:
        return self._process is not None

    def start(self) -> None:
        ctx = mp.get_context("fork")
        here, there = ctx.Pipe()
        self._process = ctx.Process(target=_serve, args=(self.piece, there, here, torch.get_num_threads()),
                                    name=self.name, daemon=True)
        self._process.start()
        there.close()
        self._conn = here
        self._finalizer = weakref.finalize(self, _stop, here, self._process)

    def submit(self) -> None:
        self._conn.send(1)

    def proceed(self) -> None:
        self._conn.send(1)

    def result(self) -> None:
        try:
            reply = self._conn.recv()
        except (EOFError, OSError):
            self._process.join(timeout=5)
            code = self._process.exitcode
            self.close()
            raise RuntimeError(f"{self.name} ended (exit code {code}) in the middle of an update") from None
        if reply is not None:
            raise RuntimeError(f"{self.name} failed: {reply}")

    def close(self) -> None:
        if self._finalizer is not None:
            self._finalizer()
        self._conn = self._process = self._finalizer = None


def critic_metrics(qf_loss: torch.Tensor, q1: torch.Tensor) -> dict[str, float]:
    return {"losses/qf_loss": qf_loss.item() / 2.0, "losses/q_values": q1.mean().item()}


class ParallelUpdate:
    """A twin-critic learner's update spread over two cores (see the module's docstring): built by the
    learner only when ``critic_threads`` is 2 or ``simultaneous`` is set, and called instead of its plain
    update. ``side_by_side`` runs the two critics' passes, ``halves`` the simultaneous update's halves."""

    def __init__(self, learner: Any, simultaneous: bool = False, actor_half: str = "thread"):
        self.learner, self.simultaneous, self.actor_half = learner, simultaneous, actor_half
        threads = learner.critic_threads
        self.side_by_side = SideBySide(1 if simultaneous else threads)  # with simultaneous the halves take the threads
        self.halves = SideBySide(threads if simultaneous else 1)
        self.forked: ForkedHalf | None = None  # actor_half: process, forked at the second update
        self.forked_tensors: dict | None = None  # what it shares with this process (forked_actor_half)
        if actor_half == "process" and learner.device.type != "cpu":
            raise ConfigError(f"algo.actor_half=process runs on the CPU only, not device={learner.device.type}; "
                              "use algo.actor_half=thread")

    # -- the critics' passes, a critic per thread --------------------------------------------------
    def critics_at(self, *critics: torch.nn.Module, x: torch.Tensor, a: torch.Tensor) -> list[torch.Tensor]:
        """Each critic's Q(x, a) in the learner's precision; recorded for backward where grad mode is on here."""
        grad = torch.is_grad_enabled()

        def value(critic: torch.nn.Module) -> torch.Tensor:
            with torch.set_grad_enabled(grad), self.learner.autocast():
                return critic(x, a)

        return self.side_by_side.map(value, critics)

    def critic_gradients(self, t: Batch, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Each critic's squared error towards ``y`` backwarded into its gradients; their sum and Q1."""
        def fit(critic: torch.nn.Module) -> tuple[torch.Tensor, torch.Tensor]:
            with self.learner.autocast():
                q = critic(t["x"], t["action"]).float()
            loss = F.mse_loss(q, y)
            loss.backward()
            return loss.detach(), q.detach()

        fitted = self.side_by_side.map(fit, (self.learner.q1, self.learner.q2))
        return sum(loss for loss, _ in fitted), fitted[0][1]

    def critic_step(self, t: Batch, y: torch.Tensor) -> dict[str, float]:
        """One step of both critics towards ``y``."""
        learner = self.learner
        learner.critic_optimizer.zero_grad(set_to_none=True)
        qf_loss, q1 = self.critic_gradients(t, y)
        learner.clip_and_step(learner.critic_optimizer)
        return critic_metrics(qf_loss, q1)

    def min_q_and_action_gradient(self, x: torch.Tensor, a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """min(Q1, Q2)(x, a) per sample, and the gradient of its batch mean with respect to ``a``, each
        critic's backward pass on its thread. Only dQ/da is asked of autograd, so no weight gradient is
        computed or stored, whether the critics are frozen or not (``simultaneous``: the other half is
        training them)."""
        a_in = a.detach().requires_grad_(True)
        qs = [q.float() for q in self.critics_at(self.learner.q1, self.learner.q2, x=x, a=a_in)]
        q_min = torch.min(*qs)
        slopes = torch.autograd.grad(q_min.mean(), qs)  # through the min and the mean only

        def action_gradient(q_and_slope: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
            q, slope = q_and_slope
            return torch.autograd.grad(q, a_in, slope)[0]

        return q_min.detach(), sum(self.side_by_side.map(action_gradient, list(zip(qs, slopes))))

    def actor_gradients(self, t: Batch, noise: torch.Tensor | None = None) -> tuple[dict[str, float], torch.Tensor]:
        """HER-SAC's actor loss against min(Q1, Q2) backwarded into the actor's gradients only (the critics'
        part enters through dQ/da); its metrics and log-probabilities. ``noise``: the policy's draws, made."""
        learner = self.learner
        with learner.autocast():
            a, logp = learner.actor(t["x"]).sample_with_log_prob(learner.generator, noise)
        q_pi, dq_da = self.min_q_and_action_gradient(t["x"], a)
        alpha_logp = learner.log_alpha.detach().exp() * logp
        actor_loss = (alpha_logp - q_pi).mean()
        # the same gradient as actor_loss's: the critics' part enters through dq_da, found side by side
        learner.actor_optimizer.zero_grad(set_to_none=True)
        (alpha_logp.mean() - (a * dq_da).sum()).backward()
        return {"losses/actor_loss": actor_loss.item(), "losses/entropy": -logp.mean().item()}, logp

    def actor_step(self, t: Batch) -> dict[str, float]:
        """HER-SAC's actor step (the critics frozen), then the temperature's."""
        learner = self.learner
        with frozen(learner.q1, learner.q2):
            metrics, logp = self.actor_gradients(t)
            learner.clip_and_step(learner.actor_optimizer)
        return {**metrics, **learner.temperature_step(logp)}

    # -- each learner's update ---------------------------------------------------------------------
    def sac_update(self, t: Batch) -> dict[str, float]:
        """HER-SAC's update (her_sac.py), or its simultaneous one."""
        if self.simultaneous:
            return self.simultaneous_update(t)
        metrics = self.critic_step(t, self.soft_target(t))
        return {**metrics, **self.actor_step(t)}

    @torch.no_grad()
    def soft_target(self, t: Batch, noise: torch.Tensor | None = None) -> torch.Tensor:
        """HER-SAC's target, a' drawn from the policy (with ``noise``, from these standard normal draws)."""
        learner = self.learner
        with learner.autocast():
            a_next, logp_next = learner.actor(t["x_next"]).sample_with_log_prob(learner.generator, noise)
        q_next = torch.min(*self.critics_at(learner.q1_target, learner.q2_target, x=t["x_next"], a=a_next)).float()
        return learner.td_target(t, q_next - learner.log_alpha.exp() * logp_next)

    def td3_update(self, t: Batch) -> dict[str, float]:
        """HER-TD3's update (her_td3.py)."""
        learner = self.learner
        with torch.no_grad():
            a_next = learner.smoothed_target_action(t["x_next"])
            q_next = torch.min(*self.critics_at(learner.q1_target, learner.q2_target, x=t["x_next"], a=a_next)).float()
        metrics = self.critic_step(t, learner.td_target(t, q_next))
        if learner.updates % learner.policy_delay == 0:
            metrics["losses/actor_loss"] = learner.actor_step(t, learner.q1)
        return metrics

    def crossq_update(self, t: Batch) -> dict[str, float]:
        """HER-CrossQ's update (her_crossq.py): the joint pass and each critic's backward on its thread."""
        learner, batch = self.learner, len(t["x"])
        x, a, entropy = learner.joint_batch(t)
        q1, q2 = (q.float() for q in self.critics_at(learner.q1, learner.q2, x=x, a=a))
        with torch.no_grad():
            y = learner.td_target(t, torch.min(q1[batch:], q2[batch:]), entropy=entropy)
        losses = [F.mse_loss(q1[:batch], y), F.mse_loss(q2[:batch], y)]
        learner.critic_optimizer.zero_grad(set_to_none=True)
        self.side_by_side.map(torch.Tensor.backward, losses)
        learner.clip_and_step(learner.critic_optimizer)
        metrics = critic_metrics(sum(loss.detach() for loss in losses), q1[:batch])
        if learner.updates % learner.policy_delay == 0:
            with learner.critics_acting():
                metrics.update(self.actor_step(t))
        return metrics

    # -- HER-SAC's simultaneous update -------------------------------------------------------------
    def simultaneous_update(self, t: Batch) -> dict[str, float]:
        """The critics' and the actor's gradients from the same parameters, :attr:`halves` (the critics'
        half here, the actor's on the second thread where there is one, or in the forked process with
        ``actor_half: process``), then the three steps. The two halves' draws are made first, in the order
        the plain update makes them."""
        learner = self.learner
        noise = [torch.randn((len(t["x"]), learner.act_dim), generator=learner.generator, device=learner.device)
                 for _ in range(2)]

        def critics_half() -> tuple[torch.Tensor, torch.Tensor]:
            learner.critic_optimizer.zero_grad(set_to_none=True)
            return self.critic_gradients(t, self.soft_target(t, noise[0]))

        def actors_half() -> tuple[dict[str, float], torch.Tensor]:
            return self.actor_gradients(t, noise[1])

        if self.actor_half == "process" and self.halves.threads == 2 and learner.actor_optimizer.state:
            return self.forked_update(t, noise)  # from the second update on: the optimisers' state exists
        (qf_loss, q1), (actor_metrics, logp) = self.halves.map(lambda half: half(), [critics_half, actors_half])
        learner.clip_and_step(learner.critic_optimizer)
        learner.clip_and_step(learner.actor_optimizer)
        return {**critic_metrics(qf_loss, q1), **actor_metrics, **learner.temperature_step(logp)}

    def forked_update(self, t: Batch, noise: list[torch.Tensor]) -> dict[str, float]:
        """:meth:`simultaneous_update` with the actor's half in the forked child, which also takes the actor's
        and the temperature's steps once the target here has read them; the critics step here once the
        child has read them. Either side's error ends the child (the next update forks anew)."""
        learner = self.learner
        shared = self.forked_actor_half(t["x"])
        shared["x"].copy_(t["x"])
        shared["noise"].copy_(noise[1])
        forked = self.forked
        forked.submit()
        try:
            learner.critic_optimizer.zero_grad(set_to_none=True)
            y = self.soft_target(t, noise[0])
            forked.proceed()  # the actor and alpha are read: the child may step them
            qf_loss, q1 = self.critic_gradients(t, y)
            forked.result()  # the child's half has read the critics
            learner.clip_and_step(learner.critic_optimizer)
            forked.result()  # the child's steps are taken
        except BaseException:
            forked.close()
            self.forked = None
            raise
        actor_loss, entropy, alpha_loss, alpha = shared["metrics"].tolist()
        metrics = {**critic_metrics(qf_loss, q1), "losses/actor_loss": actor_loss, "losses/entropy": entropy}
        return {**metrics, **({"losses/alpha_loss": alpha_loss} if learner.autotune else {}), "losses/alpha": alpha}

    def forked_actor_half(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        """The tensors the forked actor's half shares with this process, forking it first where it is not
        running or where one of them is no longer the shared one it forked with (a checkpoint loaded into
        an optimiser replaces its state): the actor's, the critics' and log(alpha)'s weights, the actor's
        and the temperature's optimiser states, the batch's inputs and noise, the metrics."""
        learner = self.learner
        optimizers = (learner.actor_optimizer, learner.alpha_optimizer)
        weights = [*learner.actor.parameters(), *learner.q1.parameters(), *learner.q2.parameters(), learner.log_alpha]
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
                  "noise": torch.zeros(len(x), learner.act_dim).share_memory_(),
                  "metrics": torch.zeros(4, dtype=torch.float64).share_memory_()}

        def actor_half():  # in the child: the actor's gradients, then (let go on) its step and alpha's
            metrics, logp = self.actor_gradients({"x": shared["x"]}, shared["noise"])
            yield  # the critics are read; going on once the target has read the actor and alpha
            learner.clip_and_step(learner.actor_optimizer)
            temperature = learner.temperature_step(logp)
            shared["metrics"].copy_(torch.tensor(
                [metrics["losses/actor_loss"], metrics["losses/entropy"],
                 temperature.get("losses/alpha_loss", float("nan")), temperature["losses/alpha"]], dtype=torch.float64))

        self.forked_tensors = shared = {**shared, "states": [opt.state for opt in optimizers]}
        self.forked = ForkedHalf(actor_half, name=f"{learner.NAME} actor's half")
        self.forked.start()
        return shared


__all__ = ["ForkedHalf", "ParallelUpdate", "SideBySide", "can_fork", "check_actor_half"]
