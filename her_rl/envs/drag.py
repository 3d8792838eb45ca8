"""Drag: pick up a round block with a point gripper and carry it to a goal on a 2-D table.

Rules (all in :mod:`her_rl.envs.table`): the gripper passes over the block (contact never moves
it). A grip command closes on the block only if the gripper is within ``grip_reach`` of its centre
(default: block radius + ``step_size``); while held, the block moves with the gripper, by a
displacement clipped so that both stay on the table. Actions: ``Discrete(10)`` (8 compass moves,
8 = grip, 9 = release; grip and release do not move), or ``Box(-1, 1, (3,))``: dx, dy as in push
and ``a[2] > 0`` to hold (each step; ``<= 0`` releases). The observation's last entry is 1 while
holding. Reward and episode length as in push.

``gymnasium.make('her_rl/Drag-v0')`` builds :class:`DragEnv`;
``gymnasium.make_vec('her_rl/Drag-v0', num_envs=256)`` builds the batched :class:`DragVectorEnv`.
"""

from __future__ import annotations

from her_rl.envs.table import GRIP, RELEASE, TableEnv, TableVectorEnv, check_table_kwargs, compute_reward


class DragEnv(TableEnv):
    """One drag task (gymnasium goal env)."""

    task = "drag"


class DragVectorEnv(TableVectorEnv):
    """``num_envs`` drag tasks stepped in a few numpy calls (NEXT_STEP autoreset, or none)."""

    task = "drag"


__all__ = ["GRIP", "RELEASE", "DragEnv", "DragVectorEnv", "check_table_kwargs", "compute_reward"]
