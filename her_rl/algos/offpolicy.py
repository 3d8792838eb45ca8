"""The hindsight learners' shared pieces under their earlier import path: the goal-env building
blocks live in :mod:`her_rl.rl.goal`, the learner base and its cycle in :mod:`her_rl.algos.hindsight`."""

from her_rl.algos.hindsight import (PRECISIONS, HindsightLearner, clip_to_return_range, cycle_envs, cycle_result,
                                    polyak_update, update_precision, updates_for_cycle)
from her_rl.rl.goal import (GOAL_KEYS, GoalEnvSpec, GoalInputs, action_space_for, batch_tensors, collect_episodes,
                            episode_horizon, from_env_actions, goal_env_spec, hindsight_memory, to_env_actions)

__all__ = [
    "PRECISIONS", "HindsightLearner", "clip_to_return_range", "cycle_envs", "cycle_result", "polyak_update",
    "update_precision", "updates_for_cycle", "GOAL_KEYS", "GoalEnvSpec", "GoalInputs", "action_space_for",
    "batch_tensors", "collect_episodes", "episode_horizon", "from_env_actions", "goal_env_spec", "hindsight_memory",
    "to_env_actions",
]
