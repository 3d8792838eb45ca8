"""Drag: pick up a round block with a point gripper and carry it to a goal on a 2-D table.

The rule, here in :class:`DragCore` (the rest of the table is :mod:`her_rl.envs.table_core`): the
gripper passes over the block (contact never moves it). A grip command closes on the block only if
the gripper is within ``grip_reach`` of its centre (default: block radius + ``step_size``); while
held, the block moves with the gripper, by a displacement clipped so that both stay on the table.
Actions: ``Discrete(10)`` (8 compass moves, 8 = grip, 9 = release; grip and release do not move),
or ``Box(-1, 1, (3,))``: dx, dy as in push and ``a[2] > 0`` to hold (each step; ``<= 0``
releases). The observation's last entry is 1 while holding. Reward and episode length as in push.
``her_rl/Drag-v0`` builds :class:`DragEnv`, or batched :class:`DragVectorEnv` through
``gymnasium.make_vec``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from her_rl.envs.table import TableEnv, TableVectorEnv
from her_rl.envs.table_core import compute_reward
from her_rl.envs.table_settings import check_table_kwargs
from her_rl.envs.table_core import COMPASS, GRIP, RELEASE, TableCore, sq_len


class DragCore(TableCore):
    """Drag over ``num`` copies: the block moves only while gripped, and then with the gripper."""

    task = "drag"
    moves = np.vstack([COMPASS, np.zeros((2, 2))])  # grip and release stand still
    act_dim = 3

    def __init__(self, num: int, **kwargs: Any):
        super().__init__(num, **kwargs)
        self._reach2 = np.float32(self.cfg["grip_reach"]) ** 2

    def _apply(self, move: np.ndarray, actions: np.ndarray) -> None:
        if self.discrete:
            close, release = actions == GRIP, actions == RELEASE
        else:
            close = actions[2] > 0
            release = ~close
        h = self.holding
        h |= close & (sq_len(self.rel) <= self._reach2)  # positions before the move
        h &= ~release
        self._move_gripper(move)
        if h.any():  # held blocks move with the gripper, by a displacement that keeps both on the table
            rows = np.flatnonzero(h)
            g, b, old = self.gripper, self.block, self.gripper_vel
            bo = b[:, rows]
            bn = np.clip(bo + (g[:, rows] - old[:, rows]), self.radius, self.size - self.radius)
            shift = bn - bo
            g[:, rows] = np.clip(old[:, rows] + shift, 0.0, self.size)
            b[:, rows], self.block_vel[:, rows] = bn, shift
        self._finish_step()
        np.copyto(self.grip, h)


class DragEnv(TableEnv):
    """One drag task (gymnasium goal env)."""

    core_class = DragCore


class DragVectorEnv(TableVectorEnv):
    """``num_envs`` drag tasks stepped in a few numpy calls (NEXT_STEP autoreset, or none)."""

    core_class = DragCore

__all__ = ["GRIP", "RELEASE", "DragCore", "DragEnv", "DragVectorEnv", "check_table_kwargs", "compute_reward"]
