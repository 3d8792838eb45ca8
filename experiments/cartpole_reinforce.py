"""REINFORCE on CartPole-v1 with the her_rl building blocks.

    python experiments/cartpole_reinforce.py --seed 0 --plot cartpole.png

Stops as soon as the running mean return over the last 100 episodes reaches 475
(CartPole-v1's "solved" threshold) and prints how many episodes that took.
"""
import argparse
import time

import gymnasium as gym
import torch

from her_rl.rl import DiscreteAction, PGLoss, RewardHistory, Rewards, mlp, set_seed


def main(episodes=1000, seed=0, plot=None, lr=5e-3, hidden=(64,), gamma=0.99, solved=475.0):
    set_seed(seed)
    env, policy = gym.make("CartPole-v1"), mlp(4, 2, hidden=hidden, activation="relu")
    optim, loss_fn, history = torch.optim.Adam(policy.parameters(), lr=lr), PGLoss(), RewardHistory(100)
    for ep in range(episodes):
        obs, _ = env.reset(seed=seed + ep)
        actions, rewards, done = DiscreteAction([]), Rewards(), False
        while not done:  # one episode; DiscreteAction samples and keeps the log-prob graph
            act = DiscreteAction(logits=policy(torch.as_tensor(obs)))
            obs, r, terminated, truncated, _ = env.step(act.action())
            actions += act
            rewards.append(r)
            done = terminated or truncated
        # Normalised reward-to-go: a cheap baseline that keeps the gradient scale steady.
        optim.zero_grad()
        loss_fn(actions, rewards.discounted(gamma, normalize=True)).backward()
        optim.step()
        history.append(rewards.sum())
        if len(history) >= 100 and history.running_mean >= solved:
            break
    if plot:
        history.plot(plot, title=f"REINFORCE CartPole-v1 (seed {seed})")
    return history


if __name__ == "__main__":
    p = argparse.ArgumentParser(description="REINFORCE on CartPole-v1")
    p.add_argument("--episodes", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--plot", default="cartpole_reinforce.png", help="PNG path ('' to skip)")
    args, t0 = p.parse_args(), time.perf_counter()
    h = main(args.episodes, args.seed, args.plot)
    print(f"episodes used: {len(h)}, running mean {h.running_mean:.1f}, {time.perf_counter() - t0:.1f} s")
