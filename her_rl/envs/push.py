"""Push: shove a round block across a 2-D table to a goal with a point gripper (contact only).

The rule, here in :class:`PushCore` (the rest of the table is :mod:`her_rl.envs.table_core`): a
gripper step that would end inside the block pushes the block radially out of it; a block stopped
by a wall pushes the gripper back out to its edge, so the gripper never ends inside the block.
Actions: ``Discrete(8)`` compass moves of ``step_size``, or ``Box(-1, 1, (2,))`` scaled by
``step_size`` (a diagonal longer than one step is shortened to one step, as the discrete diagonals
are, so that the gripper cannot pass the block). Reward -1 until the block's centre is within
``success_distance`` of the goal, then 0; episodes run ``max_episode_steps`` steps (ending early
only with ``terminate_on_success=True``). ``her_rl/Push-v0`` builds :class:`PushEnv`, or batched
:class:`PushVectorEnv` through ``gymnasium.make_vec``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from her_rl.envs.table import TableEnv, TableVectorEnv
from her_rl.envs.table_core import compute_reward
from her_rl.envs.table_settings import check_table_kwargs
from her_rl.envs.table_core import TableCore, sq_len


class PushCore(TableCore):
    """Push over ``num`` copies: the block moves only when the gripper steps into it."""

    task = "push"

    def __init__(self, num: int, **kwargs: Any):
        super().__init__(num, **kwargs)
        # Contact means deeper than a float32 rounding error, so a gripper left exactly on the
        # block's edge does not nudge it on the next step.
        self._contact2 = np.float32((self.cfg["block_size"] / 2 - 1e-6 * self.cfg["table_size"]) ** 2)

    def _apply(self, move: np.ndarray, actions: np.ndarray) -> None:
        self._move_gripper(move)
        rel = self.block - self.gripper
        dist2 = sq_len(rel)
        contact = dist2 < self._contact2
        if contact.any():
            self._resolve_contact(np.flatnonzero(contact), rel, dist2)
        self._finish_step()

    def _resolve_contact(self, rows: np.ndarray, rel: np.ndarray, dist2: np.ndarray) -> None:
        """Push the touched blocks radially out of the gripper, keep them on the table, and move a
        gripper that then overlaps its (wall-stopped) block back out to the block's edge."""
        r, s = self.radius, self.size
        gc, rc, dc = self.gripper[:, rows], rel[:, rows], np.sqrt(dist2[rows])
        centre = dc == 0
        if centre.any():  # gripper landed on the centre: push along the gripper's own displacement
            mv = gc[:, centre] - self.gripper_vel[:, rows[centre]]
            rc[:, centre], dc[centre] = mv, np.sqrt(sq_len(mv))
        u = rc / dc
        bn = np.clip(gc + r * u, r, s - r)
        back = gc - bn
        back2 = sq_len(back)
        inside = back2 < self._contact2
        if inside.any():
            at_centre = back2 == 0  # block stopped exactly under the gripper: back off against the push
            back[:, at_centre], back2[at_centre] = -u[:, at_centre], 1.0
            out = bn + r * back / np.sqrt(back2)
            gc[:, inside] = np.clip(out[:, inside], 0.0, s)
            self.gripper[:, rows] = gc
        self.block_vel[:, rows] = bn - self.block[:, rows]
        self.block[:, rows] = bn


class PushEnv(TableEnv):
    """One push task (gymnasium goal env)."""

    core_class = PushCore


class PushVectorEnv(TableVectorEnv):
    """``num_envs`` push tasks stepped in a few numpy calls (NEXT_STEP autoreset, or none)."""

    core_class = PushCore

__all__ = ["PushCore", "PushEnv", "PushVectorEnv", "check_table_kwargs", "compute_reward"]
