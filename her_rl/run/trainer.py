"""The training loop of one run, as an object whose attributes are the run's state.

Iteration by iteration: train, count, guard against non-finite values, log, evaluate greedily
when due (every ``eval.every_env_steps`` env steps, else every ``eval.every_iterations``
iterations), checkpoint every ``checkpoint.every_s`` seconds (a fresh run after its first
iteration). It stops at the env-step or wall-time budget, once solved (``eval.stop_when_solved``)
or at the end of the iteration in which a signal came (:mod:`her_rl.run.signals`), then evaluates the
final policy and writes the final checkpoint. A checkpoint due after an iteration is written when
the loop goes on (before the next one), never just before the final one.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np

from her_rl.folder import checkpoint
from her_rl.agent import IterationResult
from her_rl.envs import make_vec
from her_rl.envs.time_limits import episode_cap
from her_rl.envs.checks import IN_CALL
from her_rl.errors import EnvError, NonFiniteError, OutputError, printable
from her_rl.folder.rundir import CHECKPOINT
from her_rl.run.evaluation import eval_seed, evaluate, success_rule_of, success_source
from her_rl.run.guard import Guard, failure_in_iteration
from her_rl.run.logger import RunLogger, final_metrics, hparams_of
from her_rl.run.plan import Plan
from her_rl.run.progress import Progress, job_label, warn
from her_rl.run.results import results_of
from her_rl.folder.checkpoint import RunState
from her_rl.envs.goal_env import GOAL_KEYS
from her_rl.rl.updates import slow_precision
from her_rl.run.signals import GRACE_S, StopSignals, resume_command

SLOW_CALL_S = 10.0  # an env reset or step running this long is said once, while it runs


def eval_due(eval_cfg: dict[str, Any], iteration: int, step: int, steps_this_iteration: int) -> bool:
    """Every ``every_env_steps`` env steps (the first iteration that crosses a multiple) when set,
    else every ``every_iterations`` iterations."""
    every = eval_cfg.get("every_env_steps")
    if every:
        return step // every > (step - steps_this_iteration) // every
    return iteration % eval_cfg["every_iterations"] == 0


def is_solved(eval_cfg: dict[str, Any], goal_env: bool, result: dict[str, float]) -> bool:
    """A goal env (or any task with a success rate and no return threshold) by ``success_threshold``,
    else by ``return_threshold``; a task with neither is never solved."""
    threshold = eval_cfg["return_threshold"]
    if "success_rate" in result and (goal_env or threshold is None):
        return result["success_rate"] >= eval_cfg["success_threshold"]
    return threshold is not None and result["return"] >= threshold


def log_iteration(logger: RunLogger, result: IterationResult, step: int, sps: float) -> dict[str, float]:
    charts = dict(result.metrics)
    charts["charts/SPS"] = sps
    if result.episode_returns:
        charts["charts/episodic_return"] = float(np.mean(result.episode_returns))
        charts["charts/episodic_length"] = float(np.mean(result.episode_lengths))
    if result.episode_successes:
        charts["charts/success_rate"] = float(np.mean(result.episode_successes))
    if result.episode_any_successes:
        charts["charts/any_success_rate"] = float(np.mean(result.episode_any_successes))
    logger.scalars(charts, step)
    return charts


class Trainer:
    """One planned run's loop; the folder must be taken (:meth:`Plan.take_folder`) first.

    Besides ``state`` (:class:`RunState`): ``saved_at``, the env step of the last checkpoint
    written (None before the first); ``evaluated_at``, the iteration of the last evaluation;
    ``skips_in_row``, iterations skipped in a row by ``guard.nonfinite=skip``.
    """

    def __init__(self, plan: Plan, agent: Any, state: RunState):
        config = plan.config
        self.plan, self.agent, self.state, self.config = plan, agent, state, config
        self.goal_env = plan.spaces.goal_env
        self._reconsider_solved()
        self.first_iteration = state.iteration  # > 0 on resume: a finished run resumed logs nothing twice
        self.budget, self.wall_budget = int(config["budget"]["env_steps"]), config["budget"]["wall_time_s"]
        if slow := slow_precision(str(config["algo"].get("precision")), getattr(agent, "device", None)):
            warn(slow)
        self.eval_envs = make_vec(config["env"], int(config["eval"]["episodes"]), seed=int(config["seed"]))
        self.success = success_rule_of(agent, config["env"])
        told = success_source(self.eval_envs, self.success, config["env"], self.goal_env)
        self.score = "success_rate" if told else "return"  # what the progress line shows
        self._say_what_the_env_is()
        guard_cfg = config.get("guard") or {}
        self.guard = Guard(agent, keep_last_good=guard_cfg.get("nonfinite", "stop") == "skip")
        self.max_skips, self.skips_in_row = int(guard_cfg.get("max_skips", 10)), 0
        self.saved_at = state.env_steps if plan.saved is not None else None
        self.save_failing = False  # the last checkpoint write failed (warned once per streak)
        self.evaluated_at = state.iteration if state.eval is not None else -1
        # the trackers (logger=[...,wandb,mlflow]) continue the folder's runs where this one continues a run
        self.logger = RunLogger(plan.out, start_step=state.env_steps + 1 if state.env_steps else 0, config=config,
                                resumed=plan.saved is not None or config.get("resume") == "auto", warn=warn)
        if self.logger.metrics.damaged:  # lines her-rl did not write: repaired rather than refused
            warn(f"{self.logger.metrics.path}: dropped {len(self.logger.metrics.damaged)} damaged line(s) "
                 f"(line {self.logger.metrics.damaged[0]} first); the rest is kept")
        label, parallel = job_label(config["algo"]["name"], config["env"]["name"])
        self.progress = Progress(self.budget, self.wall_budget, step=state.env_steps, elapsed=state.wall_time_s,
                                 label=label, enabled=bool(config["progress"]), plain=parallel)
        if state.iteration == 0 or plan.changes:  # a resume changing nothing logs no second config
            self.logger.config(plan.yaml, state.env_steps)
        self.signals = StopSignals()
        self.start = self.last_ckpt = 0.0

    def _say_what_the_env_is(self) -> None:
        """One line each, at start, for what her-rl read from the env that changes what a run does: where
        her-rl cuts the episodes of an env that would run forever, extra observation keys the networks read, a
        dense goal reward, and a return threshold that the episode cap puts out of reach (a run that could
        never be solved would spend its budget without a word)."""
        env_id, space = self.config["env"]["id"], self.plan.spaces.observation_space
        if self.plan.spaces.default_limit:
            print(printable(f"env {env_id} has no time limit of its own: her-rl truncates its episodes after "
                            f"{self.plan.spaces.default_limit:,} steps (env.max_episode_steps sets another)"), flush=True)
        if self.goal_env:
            extra = [key for key in getattr(space, "spaces", {}) if key not in GOAL_KEYS]
            if extra:
                print(printable(f"env {env_id}: observation keys {', '.join(map(repr, extra))} beside the goal keys "
                                "are network inputs (flattened after 'observation', in this order, and normalised "
                                "with it); predict asks for them too"), flush=True)
            spec = getattr(self.agent, "spec", None)
            if spec is not None and spec.reward_bounds is None and self.config["env"].get("reward_range") is None:
                print(printable(f"env {env_id}: its reward is dense (compute_reward gives more than two values): "
                                "hindsight relabels that reward; success is still read from the step info"), flush=True)
        threshold, cap = self.config["eval"].get("return_threshold"), self._episode_steps()
        if (not self.goal_env or self.score == "return") and threshold is not None and cap and threshold > cap:
            warn(f"eval.return_threshold {threshold:g} is above the {cap:,} steps an episode of {env_id} may last: at "
                 "up to one reward per step no run reaches it, so it trains to its budget (set eval.return_threshold "
                 "or env.solved_return to what these episodes allow)")

    def _episode_steps(self) -> int | None:
        """How long an episode may last: the limit the probe read through the env's wrappers, else what the
        evaluation copies say."""
        return self.plan.spaces.horizon or episode_cap(self.eval_envs)

    def _reconsider_solved(self) -> None:
        """A resumed run is judged by this command's ``eval`` table: with ``stop_when_solved=false``, or a
        threshold the last evaluation no longer meets, a run saved as solved trains on to its budget."""
        s, eval_cfg = self.state, self.config["eval"]
        bar_moved = any(key in self.plan.changes for key in ("eval.success_threshold", "eval.return_threshold"))
        if bar_moved and s.solved_at_env_steps is not None and s.eval is not None \
                and not is_solved(eval_cfg, self.goal_env, s.eval):
            s.solved_at_env_steps = None  # judged by the new bar from here on
        s.solved = s.solved and s.solved_at_env_steps is not None and bool(eval_cfg["stop_when_solved"])

    def train(self) -> bool:
        """Train until a stop, evaluate, checkpoint; returns whether the final checkpoint was written."""
        ended, saved, ok = "stopped", True, False  # how the progress display ends; whether it got through
        watching = threading.Event()
        threading.Thread(target=_watch_slow_calls, args=(watching,), daemon=True, name="her-rl slow env").start()
        with self.signals:
            try:
                self.start = time.perf_counter() - self.state.wall_time_s
                # a fresh run checkpoints after its first iteration, so an early kill loses little
                self.last_ckpt = time.perf_counter() if self.plan.saved is not None else -float("inf")
                self._loop()
                self.signals.iteration_ended()
                ended = self._finish()
                saved = self.save(final=True)
                ok = True
            except EnvError as exc:  # the env failed mid-run: nothing more is written, the last checkpoint stays
                raise EnvError(f"{exc}; training stopped at env step {self.state.env_steps:,}, {self._resumable()}",
                               exit_code=EnvError.TRAINING_EXIT_CODE) from None
            finally:
                watching.set()
                self.progress.close(ended)
                self.logger.close("FINISHED" if ok and not self.signals.received else "KILLED" if ok else "FAILED")
                self._close_eval_envs(failing=not ok)
        return saved

    def _close_eval_envs(self, failing: bool) -> None:
        """Close the evaluation envs; a close that fails while another error is on its way is not told."""
        try:
            self.eval_envs.close()
        except EnvError as exc:
            if failing:
                return
            raise EnvError(str(exc), exit_code=EnvError.TRAINING_EXIT_CODE) from None

    def _resumable(self) -> str:
        if self.saved_at is None:
            return "no checkpoint had been written yet"
        return (f"its last checkpoint (env step {self.saved_at:,}) is kept: fix the env, then continue with "
                f"{resume_command(self.plan.out, self.plan.config['env'].get('id'))}")

    def _stopping(self) -> bool:
        s = self.state
        return (s.env_steps >= self.budget or s.solved or bool(self.signals.received)
                or (self.wall_budget is not None and time.perf_counter() - self.start >= self.wall_budget))

    def _loop(self) -> None:
        s, every_s = self.state, self.config["checkpoint"]["every_s"]
        # a due checkpoint is written when the loop goes on, not as it ends: the final evaluation still adds
        # to the last step, which a checkpoint at that step would miss (the final checkpoint follows anyway)
        due = False
        while not self._stopping():
            if due:
                self.save()
                self.last_ckpt, due = time.perf_counter(), False
            try:
                result = self.agent.train_iteration(max_env_steps=self.budget - s.env_steps)
            except EnvError:
                raise
            except (ValueError, RuntimeError) as exc:  # torch refusing a non-finite value mid-iteration
                bad = failure_in_iteration(exc)
                if bad is None:
                    raise
                s.iteration += 1
                self._nonfinite(bad)
                continue
            s.env_steps += result.env_steps
            s.iteration += 1
            s.episodes += len(result.episode_returns)
            s.wall_time_s = time.perf_counter() - self.start
            if not self._finite(result):
                continue
            charts = log_iteration(self.logger, result, s.env_steps, s.env_steps / max(s.wall_time_s, 1e-9))
            shown = {"train": charts.get("charts/success_rate" if self.score == "success_rate"
                                         else "charts/episodic_return")}
            if eval_due(self.config["eval"], s.iteration, s.env_steps, result.env_steps):
                shown["eval"] = self.evaluate()
            s.wall_time_s = time.perf_counter() - self.start
            self.progress.update(s.env_steps, s.wall_time_s, **shown)
            due = time.perf_counter() - self.last_ckpt >= every_s

    def _finish(self) -> str:
        """The final evaluation (unless the last iteration had one) and the HParams entry; returns
        how the run ended, in the progress display's words."""
        s = self.state
        if self.evaluated_at != s.iteration and not self.signals.received:
            self.evaluate(may_stop=False)
        s.wall_time_s = time.perf_counter() - self.start
        if s.eval is not None:
            self.progress.update(s.env_steps, s.wall_time_s, eval=s.eval.get(self.score))
        ended = ("stopped" if self.signals.received else "solved" if s.solved
                 else "done" if s.env_steps >= self.budget else "time up")
        if not self.signals.received and s.iteration > self.first_iteration:
            numbers = self.results()
            self.logger.hparams(hparams_of(self.config, self.plan.overrides), final_metrics(numbers))
            self.logger.results(numbers)
        return ended

    def evaluate(self, may_stop: bool = True) -> float:
        """Evaluate greedily now, log it, keep it as the last evaluation and note when the run first
        solves (which ends the loop with ``eval.stop_when_solved`` if ``may_stop``); returns its score."""
        s, eval_cfg = self.state, self.config["eval"]
        s.eval = evaluate(self.agent, self.eval_envs, eval_seed(int(self.config["seed"]), s.iteration), self.success)
        self.evaluated_at = s.iteration
        self.logger.scalars({f"eval/{k}": v for k, v in s.eval.items()}, s.env_steps)
        if s.solved_at_env_steps is None and is_solved(eval_cfg, self.goal_env, s.eval):
            s.solved_at_env_steps = s.env_steps
            s.solved = may_stop and bool(eval_cfg["stop_when_solved"])
        return s.eval.get(self.score)

    def _finite(self, result: IterationResult) -> bool:
        """Whether the iteration's metrics and networks are finite; if not, stop the run or (with
        ``guard.nonfinite=skip``) restore the last good networks and skip the iteration."""
        bad = self.guard.find_nonfinite(result.metrics)
        if bad is None:
            self.skips_in_row = 0
            self.guard.remember_good()
            return True
        self._nonfinite(bad)
        return False

    def _nonfinite(self, bad: str) -> None:
        s = self.state
        where = f"non-finite {bad} in iteration {s.iteration} (env step {s.env_steps:,})"
        if not self.guard.keep_last_good:
            raise NonFiniteError(f"{where}; training stopped without saving it, {self._kept()}")
        self.guard.restore_good()
        self.skips_in_row += 1
        if self.skips_in_row >= self.max_skips:
            raise NonFiniteError(f"{where}, {self.skips_in_row} iterations in a row (guard.max_skips); training "
                                 f"stopped, {self._kept()}")
        warn(f"{where}; update skipped, networks restored to the last good iteration")
        self.progress.update(s.env_steps, s.wall_time_s)

    def _kept(self) -> str:
        if self.saved_at is None:
            return "no checkpoint had been written yet"
        return f"the last good checkpoint {self.plan.checkpoint} (env step {self.saved_at:,}) is kept"

    def save(self, final: bool = False) -> bool:
        """Write the checkpoint atomically. A failed write keeps the previous one and warns (once
        per failure streak, and always at the end); returns whether it was written."""
        agent_state = self.agent.state_dict()
        if not self.config["checkpoint"]["save_replay"]:
            agent_state.pop("memory", None)
        path = self.plan.checkpoint
        self.check_folder()
        try:
            self.logger.flush()  # what the checkpoint covers is on disk before it: a resume purges only the rest
            checkpoint.save({"agent": agent_state, "runner": self.state.to_dict(), "rng": checkpoint.rng_state(),
                             "config": self.config}, path)
        except OSError as exc:
            if final or not self.save_failing:
                kept = (f"the previous checkpoint (env step {self.saved_at:,}) is kept" if self.saved_at is not None
                        else "no checkpoint has been written yet")
                warn(f"could not write checkpoint {path} ({exc.strerror or exc}); {kept}")
            self.save_failing = True
            return False
        self.saved_at, self.save_failing = self.state.env_steps, False
        return True

    def check_folder(self) -> None:
        """Before a write by path: the run folder (and ``tb/``) must still be the one the run took. One
        that was deleted, moved or replaced by a link ends the run (exit 5) without a write there,
        naming where its last checkpoint is."""
        lost = self.plan.lock.lost() if self.plan.lock is not None else None
        tb = None if lost else self.logger.lost()
        if lost is None and tb is None:
            return
        why, where = (f"run folder {self.plan.out} {lost[0]}", lost[1]) if lost else \
            (f"run folder {self.plan.out}: {tb}", self.plan.out)
        if self.saved_at is None:
            kept = "no checkpoint had been written"
        elif where is None:
            kept = "its checkpoints went with it"
        else:
            kept = f"its last checkpoint (env step {self.saved_at:,}) is {where / CHECKPOINT}"
        raise OutputError(f"{why} during the run: training stopped at env step {self.state.env_steps:,} without "
                          f"writing there; {kept}")

    def results(self) -> dict[str, Any]:
        return results_of(self.config, self.state, self.goal_env, self.plan.checkpoint)


def _watch_slow_calls(done: threading.Event, slow_s: float = SLOW_CALL_S) -> None:
    """Say once per env method when one of its calls has run past ``slow_s``: a run that seems stuck is
    waiting for its env, and a stop signal still ends it within the grace."""
    told = set()
    while not done.wait(1.0):
        since, call = IN_CALL["since"], (IN_CALL["env"], IN_CALL["method"])
        if since is not None and time.monotonic() - since > slow_s and call not in told:
            told.add(call)
            warn(f"env {call[0]}: one {call[1]} (of all its copies in turn) has taken more than {slow_s:.0f} s so "
                 f"far; a stop signal (Ctrl-C) ends the run within {GRACE_S:.0f} s, keeping its last checkpoint")


__all__ = ["RunState", "Trainer", "eval_due", "is_solved"]
