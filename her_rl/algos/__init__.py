"""Algorithms: the hindsight learners HER-DQN, HER-DDPG, HER-SAC, HER-TD3, HER-REDQ and HER-CrossQ (shared
base in hindsight.py, their cycle in cycle.py, the opt-in CPU-parallel updates in parallel_update.py) and
the on-policy REINFORCE, PPO and RND-PPO (shared base in onpolicy.py, collection in rollout.py, the actor
in onpolicy_actor.py); both bases derive from the one learner base in base.py."""
