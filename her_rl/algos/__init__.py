"""Algorithms: the hindsight learners HER-DQN, HER-DDPG and HER-SAC (shared pieces in offpolicy.py) and
the on-policy REINFORCE, PPO and RND-PPO (shared collection in rollout.py)."""
