"""Algorithms: HER-DQN (off-policy, goal envs) and the on-policy REINFORCE, PPO and RND-PPO."""
