"""Algorithms: the hindsight learners HER-DQN, HER-DDPG, HER-SAC and HER-TD3 (shared base in hindsight.py) and
the on-policy REINFORCE, PPO and RND-PPO (shared base in onpolicy.py, collection in rollout.py)."""
