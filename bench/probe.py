"""Watch RND-PPO explore deep sea: how deep along the all-right path it has been, and how likely
its policy is to get there.

Every ``every`` iterations one line: env steps, seconds, the frontier (the deepest diagonal cell
any training episode has visited; the reward lies past cell size-1), the env step of the first
rewarding training episode, P(reach k) (the product of the policy's probability of "right" on the
first k diagonal cells) at a few depths, the lowest such probability up to the frontier, and the
intrinsic reward per step (normalised and raw) with the std it is divided by. It stops when the
greedy policy goes right on every diagonal cell after the reward was found ("solved"; the runner's
greedy evaluation would collect the reward).

The run is built as ``her-run algo=rnd_ppo env=deep_sea`` would build it (its tuned file
included), with one torch thread, but trained here without the runner, so its seeding differs
from a her-run run of the same seed.
"""

from __future__ import annotations

import time
from typing import Any, Sequence

import numpy as np
import torch


class Watch:
    """What the rollouts of an RND-PPO agent on deep sea of ``size`` reached: the diagonal cells
    visited, the env step of the first reward, the last advantages' metrics. It wraps the agent's
    advantage step, which sees every rollout."""

    def __init__(self, agent: Any, size: int):
        self.agent, self.n = agent, size
        self.diag_seen = np.zeros(size, dtype=bool)
        self.found: int | None = None
        self.metrics: dict[str, float] = {}
        self.advantages = agent._advantages
        agent._advantages = self

    def __call__(self, ro: Any) -> Any:
        x = ro.obs_raw[1:][ro.valid]
        on = x.sum(-1) > 0  # the all-zero observation after an episode's last step
        cell = x.argmax(-1)[on].numpy()
        row, col = cell // self.n, cell % self.n
        self.diag_seen[np.unique(row[row == col])] = True
        if self.found is None and bool((ro.rewards > 0.5).any()):
            self.found = self.agent.global_step
        out = self.advantages(ro)
        self.metrics = out[2]
        return out

    def frontier(self) -> int:
        return int(np.flatnonzero(self.diag_seen).max()) if self.diag_seen.any() else -1

    def p_right(self) -> np.ndarray:
        """The policy's probability of "right" on every diagonal cell (observed as collection feeds it)."""
        n, agent = self.n, self.agent
        cells = np.eye(n * n, dtype=np.float32)[[k * n + k for k in range(n)]]  # one-hot diagonal cells
        right = agent.envs.unwrapped.action_right  # [row, col] -> the action that moves right there
        with torch.no_grad():  # whitened if algo.normalize_obs
            logits = agent.actor.net(torch.as_tensor(agent.obs_proc.normalize(cells)))
        return torch.softmax(logits, -1).numpy()[np.arange(n), right[np.arange(n), np.arange(n)]]

    def line(self, steps: int, seconds: float) -> str:
        p_right, n, m = self.p_right(), self.n, self.metrics
        reach = np.cumprod(p_right)
        depths = [d for d in (10, 20, 30, 40, 50) if d < n] + [n]
        return (f"{steps:>10,} {seconds:6.0f}s frontier {self.frontier():3d} found {self.found} P(reach "
                + "/".join(f"{d}:{reach[d - 1]:.3f}" for d in depths)
                + f") min p(right) {p_right[:self.frontier() + 1].min():.2f}"
                f" r_int {m.get('charts/intrinsic_reward', 0):.3g} raw {m.get('charts/intrinsic_reward_raw', 0):.3g}"
                f" std {float(np.sqrt(self.agent.rnd.ret_rms.var)):.3g}")


def probe(size: int, seed: int, budget: int, every: int, overrides: Sequence[str] = ()) -> dict[str, Any]:
    """Train and watch (see the module docstring); returns the last frontier, the env step of the
    first reward (``found``), the env steps run and where greedy went all right (``solved_at``)."""
    from her_rl.run.runner import make_agent
    from her_rl.config.checks import resolved
    from her_rl.rl.utils import set_seed
    from her_rl.config.compose import compose

    cfg = compose(["algo=rnd_ppo", "env=deep_sea", f"size={size}", f"seed={seed}", "threads=1", *overrides])
    torch.set_num_threads(1)
    set_seed(seed)
    watch = Watch(make_agent(resolved(cfg), "cpu"), size)
    start, steps, iteration = time.time(), 0, 0
    result: dict[str, Any] = {"solved_at": None}
    while steps < budget:
        steps += watch.agent.train_iteration().env_steps
        iteration += 1
        if iteration % every and steps < budget:
            continue
        print(watch.line(steps, time.time() - start), flush=True)
        result.update(frontier=watch.frontier(), found=watch.found, env_steps=steps)
        if watch.found is not None and bool((watch.p_right() > 0.5).all()):
            result["solved_at"] = steps
            print(f"solved (greedy goes right on every diagonal cell) at {steps:,} env steps, "
                  f"{time.time() - start:.0f} s", flush=True)
            break
    return result
