"""Watch RND-PPO explore deep sea: how deep along the all-right path it has been, and how likely
its policy is to get there.

Every ``--every`` iterations one line: env steps, seconds, the frontier (the deepest diagonal cell
any training episode has visited; the reward lies past cell size-1), the env step of the first
rewarding training episode, P(reach k) (the product of the policy's probability of "right" on the
first k diagonal cells) at a few depths, the lowest such probability up to the frontier, and the
intrinsic reward per step (normalised and raw) with the std it is divided by. It stops when the
greedy policy goes right on every diagonal cell after the reward was found ("solved"; the runner's
greedy evaluation would collect the reward). Used to screen the deep sea settings (docs/notes.md, deep sea settings):

    python scripts/deep_sea_probe.py --size 30 --seed 0 --budget 600000 algo.num_envs=16 algo.epochs=8

The run is built as ``her-run algo=rnd_ppo env=deep_sea`` would build it (its tuned file included),
with one torch thread, but trained here without the runner, so its seeding differs from a her-run
run of the same seed.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from her_rl.config import resolved
from her_rl.evaluation import build
from her_rl.runner import compose
from her_rl.rl.utils import set_seed


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size", type=int, default=30)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--budget", type=int, default=600_000, help="env steps")
    p.add_argument("--every", type=int, default=25, help="iterations between lines")
    p.add_argument("overrides", nargs="*", help="her-run overrides, e.g. algo.epochs=8")
    args = p.parse_args(argv)
    n = args.size
    cfg = compose(["algo=rnd_ppo", "env=deep_sea", f"size={n}", f"seed={args.seed}", "threads=1", *args.overrides])
    torch.set_num_threads(1)
    set_seed(args.seed)
    agent = build(resolved(cfg), "cpu")
    right = agent.envs.unwrapped.action_right  # [row, col] -> the action that moves right there
    diag_seen = np.zeros(n, dtype=bool)
    state: dict = {"found": None, "metrics": {}}
    advantages = agent._advantages

    def watched(ro):  # the rollout's visited diagonal cells and rewards, then RND-PPO's own advantages
        x = ro.obs_raw[1:][ro.valid]
        on = x.sum(-1) > 0  # the all-zero observation after an episode's last step
        cell = x.argmax(-1)[on].numpy()
        row, col = cell // n, cell % n
        diag_seen[np.unique(row[row == col])] = True
        if state["found"] is None and bool((ro.rewards > 0.5).any()):
            state["found"] = agent.global_step
        out = advantages(ro)
        state["metrics"] = out[2]
        return out

    agent._advantages = watched
    cells = np.eye(n * n, dtype=np.float32)[[k * n + k for k in range(n)]]  # one-hot diagonal cells
    depths = [d for d in (10, 20, 30, 40, 50) if d < n] + [n]
    start, steps, iteration = time.time(), 0, 0
    result = {"solved_at": None}
    while steps < args.budget:
        steps += agent.train_iteration().env_steps
        iteration += 1
        if iteration % args.every and steps < args.budget:
            continue
        with torch.no_grad():  # the policy sees what collection feeds it (whitened if algo.normalize_obs)
            logits = agent.policy.net(torch.as_tensor(agent.obs_proc.normalize(cells)))
        p_right = torch.softmax(logits, -1).numpy()[np.arange(n), right[np.arange(n), np.arange(n)]]
        reach = np.cumprod(p_right)
        frontier = int(np.flatnonzero(diag_seen).max()) if diag_seen.any() else -1
        m = state["metrics"]
        print(f"{steps:>10,} {time.time() - start:6.0f}s frontier {frontier:3d} found {state['found']} P(reach "
              + "/".join(f"{d}:{reach[d - 1]:.3f}" for d in depths)
              + f") min p(right) {p_right[:frontier + 1].min():.2f} r_int {m.get('charts/intrinsic_reward', 0):.3g}"
              f" raw {m.get('charts/intrinsic_reward_raw', 0):.3g} std {float(np.sqrt(agent.rnd.ret_rms.var)):.3g}",
              flush=True)
        result.update(frontier=frontier, found=state["found"], env_steps=steps)
        if state["found"] is not None and bool((p_right > 0.5).all()):
            result["solved_at"] = steps
            print(f"solved (greedy goes right on every diagonal cell) at {steps:,} env steps, "
                  f"{time.time() - start:.0f} s", flush=True)
            break
    return result


if __name__ == "__main__":
    main()
