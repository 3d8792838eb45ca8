"""The table both tasks share: the state of N copies, episode starts, action decoding, the gripper's move.

Both tasks are goal-conditioned (HER's Fetch tasks reduced to the plane): move the block's centre
to within ``success_distance`` of a random goal. What a step does to the block is the task's own
rule, a subclass's ``_apply``: contact in :mod:`her_rl.envs.push`, the grip in
:mod:`her_rl.envs.drag`. Everything else lives here once, so the two tasks cannot drift apart.

:class:`TableCore` holds the state of N copies as numpy arrays and applies the rules to all of them
in a few array calls. The single gymnasium env is the same core with N = 1, so the single and the
batched env cannot drift apart either. Positions are float32 throughout: the reward computed from
an observation (HER relabelling) is then exactly the reward the env paid.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from her_rl.envs.table_render import render_table
from her_rl.envs.table_settings import check_table_kwargs

OBS_DIM = 11  # gripper xy, block xy, block - gripper xy, gripper velocity xy, block velocity xy, grip
_DIAG = 1.0 / math.sqrt(2.0)
# E, NE, N, NW, W, SW, S, SE as unit vectors; drag appends two non-moves (8 = grip, 9 = release).
COMPASS = np.array([[1, 0], [_DIAG, _DIAG], [0, 1], [-_DIAG, _DIAG],
                    [-1, 0], [-_DIAG, -_DIAG], [0, -1], [_DIAG, -_DIAG]], dtype=np.float64)
GRIP, RELEASE = 8, 9


def sq_len(v: np.ndarray) -> np.ndarray:
    """Squared length of ``[2, ...]`` vectors (x, y on the first axis). Every distance test goes
    through here (no fused multiply-add), so the env's reward and a reward recomputed from
    observations agree to the bit."""
    return v[0] * v[0] + v[1] * v[1]


def compute_reward(achieved_goal, desired_goal, info: Any = None, success_distance: float = 0.05) -> np.ndarray:
    """-1 where the block is farther than ``success_distance`` from the goal, else 0 (float32, any batch dims)."""
    d = np.asarray(achieved_goal, dtype=np.float32) - np.asarray(desired_goal, dtype=np.float32)
    return (sq_len(np.moveaxis(d, -1, 0)) <= np.float32(success_distance) ** 2).astype(np.float32) - 1.0


class TableCore:
    """State and shared rules of ``num`` copies of one task; the single env is the case ``num == 1``.

    Subclasses name their ``task`` (the settings it takes), its discrete ``moves`` (unit vectors,
    ``[n actions, 2]``) and continuous ``act_dim``, and implement ``_apply``.

    The state is field-major, ``[11, num]`` float32 in the observation's order: ``gripper``,
    ``block``, ``rel``, ``gripper_vel`` and ``block_vel`` are ``[2, num]`` views into it and
    ``grip`` is ``[num]``; ``goal`` is ``[2, num]``. Each field is contiguous, which makes the
    per-step array calls several times cheaper than on ``[num, 2]`` columns of one buffer.
    """

    task: str
    moves: np.ndarray = COMPASS
    act_dim = 2

    def __init__(self, num: int, **kwargs: Any):
        cfg = self.cfg = check_table_kwargs(self.task, **kwargs)
        self.num = int(num)
        self.size = np.float32(cfg["table_size"])
        self.radius = np.float32(cfg["block_size"] / 2)
        self.success_distance = float(cfg["success_distance"])
        self.max_episode_steps = cfg["max_episode_steps"]
        self.terminate_on_success = cfg["terminate_on_success"]
        self.discrete = cfg["actions"] == "discrete"
        self._success2 = np.float32(self.success_distance) ** 2
        self._moves = np.ascontiguousarray((self.moves * cfg["step_size"]).T, dtype=np.float32)  # [2, n actions]
        self._step = np.float32(cfg["step_size"])
        self.state = np.zeros((OBS_DIM, self.num), dtype=np.float32)
        st = self.state
        self.gripper, self.block, self.rel = st[0:2], st[2:4], st[4:6]
        self.gripper_vel, self.block_vel, self.grip = st[6:8], st[8:10], st[10]
        self.goal = np.zeros((2, self.num), dtype=np.float32)
        self.holding = np.zeros(self.num, dtype=bool)
        self.t = np.zeros(self.num, dtype=np.int64)

    @property
    def n_actions(self) -> int:
        """Size of the discrete action space."""
        return int(self._moves.shape[1])

    # --- reset -------------------------------------------------------------------------------
    def reset_rows(self, rng: np.random.Generator, rows: np.ndarray) -> None:
        """Fresh episodes in copies ``rows``: block and goal apart by more than the success
        distance, gripper outside the block, grip open, zero velocities."""
        n, s, r = len(rows), float(self.size), float(self.radius)
        fresh = np.zeros((OBS_DIM, n), dtype=np.float32)
        block = fresh[2:4]
        block[:] = rng.uniform(r, s - r, size=(2, n))
        # The goal anywhere on the table, or (goal_range, as Fetch's target_range) in the square of
        # that half-width around the block, cut to where the block fits.
        far = self.cfg["goal_range"]
        low = np.full_like(block, r) if far is None else np.maximum(block - far, r)
        high = np.full_like(block, s - r) if far is None else np.minimum(block + far, s - r)
        goal = rng.uniform(low, high).astype(np.float32)
        bad = sq_len(block - goal) <= self._success2
        while bad.any():  # expected redraws: the goal disk's share of the region
            goal[:, bad] = rng.uniform(low[:, bad], high[:, bad])
            bad = sq_len(block - goal) <= self._success2
        gripper = fresh[0:2]
        # Anywhere on the table, or (gripper_range, as Fetch places the object near the gripper)
        # in the square of that half-width around the block, cut to the table.
        reach = self.cfg["gripper_range"]
        low = np.zeros_like(block) if reach is None else np.maximum(block - reach, 0.0)
        high = np.full_like(block, s) if reach is None else np.minimum(block + reach, s)
        gripper[:] = rng.uniform(low, high)
        bad = sq_len(gripper - block) < self.radius ** 2
        while bad.any():
            gripper[:, bad] = rng.uniform(low[:, bad], high[:, bad])
            bad = sq_len(gripper - block) < self.radius ** 2
        fresh[4:6] = block - gripper
        self.state[:, rows] = fresh
        self.goal[:, rows] = goal
        self.holding[rows] = False
        self.t[rows] = 0

    def set_state(self, rows, gripper, block, goal, holding=False) -> None:
        """Place copies by hand (tests, demos; positions ``[n, 2]`` or ``[2]``); velocities zero,
        episode clock restarted."""
        rows = np.atleast_1d(rows)
        fresh = np.zeros((OBS_DIM, len(rows)), dtype=np.float32)
        fresh[0:2] = np.asarray(gripper, dtype=np.float32).reshape(-1, 2).T
        fresh[2:4] = np.asarray(block, dtype=np.float32).reshape(-1, 2).T
        fresh[4:6] = fresh[2:4] - fresh[0:2]
        fresh[10] = holding
        self.state[:, rows] = fresh
        self.goal[:, rows] = np.asarray(goal, dtype=np.float32).reshape(-1, 2).T
        self.holding[rows] = holding
        self.t[rows] = 0

    # --- step --------------------------------------------------------------------------------
    def act(self, actions) -> None:
        """Apply one action per copy (shape ``[num]`` discrete, ``[num, act_dim]`` continuous)."""
        if self.discrete:
            a = np.asarray(actions).reshape(self.num)
            if a.dtype.kind not in "iu" or a.min() < 0 or a.max() >= self.n_actions:
                raise ValueError(f"actions must be integers in [0, {self.n_actions}), got {actions!r}")
            self._apply(np.take(self._moves, a, axis=1), a)
            return
        a = np.asarray(actions, dtype=np.float32).reshape(self.num, self.act_dim).T
        if not np.isfinite(a).all():
            raise ValueError(f"actions must be finite, got {actions!r}")
        move = np.clip(a[:2], -1.0, 1.0) * self._step
        length2 = sq_len(move)
        long = length2 > self._step ** 2
        if long.any():  # diagonals: at most step_size long, as the discrete moves, so never past the block
            move[:, long] *= self._step / np.sqrt(length2[long])
        self._apply(move, a)

    def _apply(self, move: np.ndarray, actions: np.ndarray) -> None:
        """The task's rule: move the gripper by ``move`` (``[2, num]``) and the block as the task
        says; ``actions`` are the indices ``[num]`` (discrete) or ``[act_dim, num]`` (continuous)."""
        raise NotImplementedError

    def _move_gripper(self, move: np.ndarray) -> None:
        g = self.gripper
        np.copyto(self.gripper_vel, g)  # the old position waits in the velocity slot
        g += move
        np.minimum(g, self.size, out=g)
        np.maximum(g, 0.0, out=g)
        self.block_vel.fill(0.0)

    def _finish_step(self) -> None:
        """Velocities and the block's offset from the positions after the move."""
        np.subtract(self.gripper, self.gripper_vel, out=self.gripper_vel)
        np.subtract(self.block, self.gripper, out=self.rel)

    def success(self) -> np.ndarray:
        return sq_len(self.block - self.goal) <= self._success2

    def obs(self) -> dict[str, np.ndarray]:
        """Fresh ``[num, ...]`` arrays (callers may keep them)."""
        return {"observation": self.state.T.copy(), "achieved_goal": self.block.T.copy(),
                "desired_goal": self.goal.T.copy()}

    def compute_reward(self, achieved_goal, desired_goal, info=None) -> np.ndarray:
        return compute_reward(achieved_goal, desired_goal, info, self.success_distance)

    def compute_terminated(self, achieved_goal, desired_goal, info=None) -> np.ndarray:
        return (self.compute_reward(achieved_goal, desired_goal) == 0) & self.terminate_on_success

    def render(self, row: int = 0, pixels: int = 240) -> np.ndarray:
        """Top view of copy ``row`` (see :func:`~her_rl.envs.table_render.render_table`)."""
        return render_table(self, row, pixels)
