"""Push: shove a round block across a 2-D table to a goal with a point gripper (contact only).

Rules (all in :mod:`her_rl.envs.table`): a gripper step that would end inside the block pushes the
block radially out of it; a block stopped by a wall pushes the gripper back out to its edge, so the
gripper never ends inside the block. Actions: ``Discrete(8)`` compass moves of ``step_size``, or
``Box(-1, 1, (2,))`` scaled by ``step_size`` (a diagonal longer than one step is shortened to one
step, as the discrete diagonals are, so that the gripper cannot pass the block). Reward -1 until
the block's centre is within ``success_distance`` of the goal, then 0; episodes run
``max_episode_steps`` steps (ending early only with ``terminate_on_success=True``).

``gymnasium.make('her_rl/Push-v0')`` builds :class:`PushEnv`;
``gymnasium.make_vec('her_rl/Push-v0', num_envs=256)`` builds the batched :class:`PushVectorEnv`.
"""

from __future__ import annotations

from her_rl.envs.table import TableEnv, TableVectorEnv, check_table_kwargs, compute_reward


class PushEnv(TableEnv):
    """One push task (gymnasium goal env)."""

    task = "push"


class PushVectorEnv(TableVectorEnv):
    """``num_envs`` push tasks stepped in a few numpy calls (NEXT_STEP autoreset, or none)."""

    task = "push"


__all__ = ["PushEnv", "PushVectorEnv", "check_table_kwargs", "compute_reward"]
