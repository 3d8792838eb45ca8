"""A 2-D table with a point gripper and one round block: the shared core of the push and drag tasks.

Both tasks are goal-conditioned (HER's Fetch tasks reduced to the plane): move the block's centre
to within ``success_distance`` of a random goal. In *push* the gripper shoves the block by contact
only; in *drag* contact does nothing and the block moves only while the gripper holds it.

:class:`TableCore` holds the state of N copies as numpy arrays and applies the rules to all of them
in a few array calls. The single gymnasium env is the same core with N = 1, so the single and the
batched env cannot drift apart. Positions are float32 throughout: the reward computed from an
observation (HER relabelling) is then exactly the reward the env paid.
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from her_rl.envs.table_settings import DEFAULTS, DRAG_DEFAULTS, check_table_kwargs  # noqa: F401  (re-exported)

OBS_DIM = 11  # gripper xy, block xy, block - gripper xy, gripper velocity xy, block velocity xy, grip
_DIAG = 1.0 / math.sqrt(2.0)
# E, NE, N, NW, W, SW, S, SE as unit vectors; drag appends two non-moves (8 = grip, 9 = release).
COMPASS = np.array([[1, 0], [_DIAG, _DIAG], [0, 1], [-_DIAG, _DIAG],
                    [-1, 0], [-_DIAG, -_DIAG], [0, -1], [_DIAG, -_DIAG]], dtype=np.float64)
GRIP, RELEASE = 8, 9


def _sq_len(v: np.ndarray) -> np.ndarray:
    """Squared length of ``[2, ...]`` vectors (x, y on the first axis). Every distance test goes
    through here (no fused multiply-add), so the env's reward and a reward recomputed from
    observations agree to the bit."""
    return v[0] * v[0] + v[1] * v[1]


def compute_reward(achieved_goal, desired_goal, info: Any = None, success_distance: float = 0.05) -> np.ndarray:
    """-1 where the block is farther than ``success_distance`` from the goal, else 0 (float32, any batch dims)."""
    d = np.asarray(achieved_goal, dtype=np.float32) - np.asarray(desired_goal, dtype=np.float32)
    return (_sq_len(np.moveaxis(d, -1, 0)) <= np.float32(success_distance) ** 2).astype(np.float32) - 1.0


def _spaces(cfg: dict[str, Any], drag: bool) -> tuple[spaces.Dict, spaces.Space]:
    s, st = cfg["table_size"], cfg["step_size"]
    # A move is at most one step long; a push can set the gripper back by as much again, so 3 steps
    # bound every velocity component with room for rounding (the block moves at most one step).
    low = np.array([0, 0, 0, 0, -s, -s] + [-3 * st] * 4 + [0], dtype=np.float32)
    high = np.array([s] * 6 + [3 * st] * 4 + [1], dtype=np.float32)
    goal = spaces.Box(0.0, s, shape=(2,), dtype=np.float32)
    obs = spaces.Dict({"observation": spaces.Box(low, high, dtype=np.float32),
                       "achieved_goal": goal, "desired_goal": goal})
    if cfg["actions"] == "discrete":
        return obs, spaces.Discrete(10 if drag else 8)
    return obs, spaces.Box(-1.0, 1.0, shape=(3 if drag else 2,), dtype=np.float32)


class TableCore:
    """State and rules of ``num`` copies of one task; the single env is the case ``num == 1``.

    The state is field-major, ``[11, num]`` float32 in the observation's order: ``gripper``,
    ``block``, ``rel``, ``gripper_vel`` and ``block_vel`` are ``[2, num]`` views into it and
    ``grip`` is ``[num]``; ``goal`` is ``[2, num]``. Each field is contiguous, which makes the
    per-step array calls several times cheaper than on ``[num, 2]`` columns of one buffer.
    """

    def __init__(self, num: int, task: str, **kwargs: Any):
        cfg = self.cfg = check_table_kwargs(task, **kwargs)
        self.num, self.drag = int(num), task == "drag"
        self.size = np.float32(cfg["table_size"])
        self.radius = np.float32(cfg["block_size"] / 2)
        self.success_distance = float(cfg["success_distance"])
        self.max_episode_steps = cfg["max_episode_steps"]
        self.terminate_on_success = cfg["terminate_on_success"]
        self.discrete = cfg["actions"] == "discrete"
        # Contact means deeper than a float32 rounding error, so a gripper left exactly on the
        # block's edge does not nudge it on the next step.
        self._contact2 = np.float32((cfg["block_size"] / 2 - 1e-6 * cfg["table_size"]) ** 2)
        self._reach2 = np.float32(cfg.get("grip_reach", 0.0)) ** 2
        self._success2 = np.float32(self.success_distance) ** 2
        moves = np.vstack([COMPASS, np.zeros((2, 2))]) if self.drag else COMPASS
        self._moves = np.ascontiguousarray((moves * cfg["step_size"]).T, dtype=np.float32)  # [2, n actions]
        self._step = np.float32(cfg["step_size"])
        self.state = np.zeros((OBS_DIM, self.num), dtype=np.float32)
        st = self.state
        self.gripper, self.block, self.rel = st[0:2], st[2:4], st[4:6]
        self.gripper_vel, self.block_vel, self.grip = st[6:8], st[8:10], st[10]
        self.goal = np.zeros((2, self.num), dtype=np.float32)
        self.holding = np.zeros(self.num, dtype=bool)
        self.t = np.zeros(self.num, dtype=np.int64)

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
        bad = _sq_len(block - goal) <= self._success2
        while bad.any():  # expected redraws: the goal disk's share of the region
            goal[:, bad] = rng.uniform(low[:, bad], high[:, bad])
            bad = _sq_len(block - goal) <= self._success2
        gripper = fresh[0:2]
        # Anywhere on the table, or (gripper_range, as Fetch places the object near the gripper)
        # in the square of that half-width around the block, cut to the table.
        reach = self.cfg["gripper_range"]
        low = np.zeros_like(block) if reach is None else np.maximum(block - reach, 0.0)
        high = np.full_like(block, s) if reach is None else np.minimum(block + reach, s)
        gripper[:] = rng.uniform(low, high)
        bad = _sq_len(gripper - block) < self.radius ** 2
        while bad.any():
            gripper[:, bad] = rng.uniform(low[:, bad], high[:, bad])
            bad = _sq_len(gripper - block) < self.radius ** 2
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
        """Apply one action per copy (shape ``[num]`` discrete, ``[num, 2 or 3]`` continuous)."""
        if self.discrete:
            a = np.asarray(actions).reshape(self.num)
            if a.dtype.kind not in "iu" or a.min() < 0 or a.max() >= self._moves.shape[1]:
                raise ValueError(f"actions must be integers in [0, {self._moves.shape[1]}), got {actions!r}")
            move = np.take(self._moves, a, axis=1)
            if self.drag:
                self._drag(move, a == GRIP, a == RELEASE)
            else:
                self._push(move)
            return
        a = np.asarray(actions, dtype=np.float32).reshape(self.num, 3 if self.drag else 2).T
        if not np.isfinite(a).all():
            raise ValueError(f"actions must be finite, got {actions!r}")
        move = np.clip(a[:2], -1.0, 1.0) * self._step
        length2 = _sq_len(move)
        long = length2 > self._step ** 2
        if long.any():  # diagonals: at most step_size long, as the discrete moves, so never past the block
            move[:, long] *= self._step / np.sqrt(length2[long])
        if self.drag:
            close = a[2] > 0
            self._drag(move, close, ~close)
        else:
            self._push(move)

    def _move_gripper(self, move: np.ndarray) -> None:
        g = self.gripper
        np.copyto(self.gripper_vel, g)  # the old position waits in the velocity slot
        g += move
        np.minimum(g, self.size, out=g)
        np.maximum(g, 0.0, out=g)
        self.block_vel.fill(0.0)

    def _push(self, move: np.ndarray) -> None:
        self._move_gripper(move)
        rel = self.block - self.gripper
        dist2 = _sq_len(rel)
        contact = dist2 < self._contact2
        if contact.any():
            self._resolve_contact(np.flatnonzero(contact), rel, dist2)
        np.subtract(self.gripper, self.gripper_vel, out=self.gripper_vel)
        np.subtract(self.block, self.gripper, out=self.rel)

    def _resolve_contact(self, rows: np.ndarray, rel: np.ndarray, dist2: np.ndarray) -> None:
        """Push the touched blocks radially out of the gripper, keep them on the table, and move a
        gripper that then overlaps its (wall-stopped) block back out to the block's edge."""
        r, s = self.radius, self.size
        gc, rc, dc = self.gripper[:, rows], rel[:, rows], np.sqrt(dist2[rows])
        centre = dc == 0
        if centre.any():  # gripper landed on the centre: push along the gripper's own displacement
            mv = gc[:, centre] - self.gripper_vel[:, rows[centre]]
            rc[:, centre], dc[centre] = mv, np.sqrt(_sq_len(mv))
        u = rc / dc
        bn = np.clip(gc + r * u, r, s - r)
        back = gc - bn
        back2 = _sq_len(back)
        inside = back2 < self._contact2
        if inside.any():
            at_centre = back2 == 0  # block stopped exactly under the gripper: back off against the push
            back[:, at_centre], back2[at_centre] = -u[:, at_centre], 1.0
            out = bn + r * back / np.sqrt(back2)
            gc[:, inside] = np.clip(out[:, inside], 0.0, s)
            self.gripper[:, rows] = gc
        self.block_vel[:, rows] = bn - self.block[:, rows]
        self.block[:, rows] = bn

    def _drag(self, move: np.ndarray, close: np.ndarray, release: np.ndarray) -> None:
        h = self.holding
        h |= close & (_sq_len(self.rel) <= self._reach2)  # positions before the move
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
        np.subtract(self.gripper, self.gripper_vel, out=self.gripper_vel)
        np.subtract(self.block, self.gripper, out=self.rel)
        np.copyto(self.grip, h)

    def success(self) -> np.ndarray:
        return _sq_len(self.block - self.goal) <= self._success2

    def obs(self) -> dict[str, np.ndarray]:
        """Fresh ``[num, ...]`` arrays (callers may keep them)."""
        return {"observation": self.state.T.copy(), "achieved_goal": self.block.T.copy(),
                "desired_goal": self.goal.T.copy()}

    def compute_reward(self, achieved_goal, desired_goal, info=None) -> np.ndarray:
        return compute_reward(achieved_goal, desired_goal, info, self.success_distance)

    def compute_terminated(self, achieved_goal, desired_goal, info=None) -> np.ndarray:
        return (self.compute_reward(achieved_goal, desired_goal) == 0) & self.terminate_on_success

    # --- render ------------------------------------------------------------------------------
    def render(self, row: int = 0, pixels: int = 240) -> np.ndarray:
        """``pixels x pixels x 3`` uint8 top view of one copy (y up): table, goal disk of radius
        success_distance blended in, block, gripper dot (yellow while holding, else blue)."""
        centres = (np.arange(pixels) + 0.5) * (float(self.size) / pixels)
        x, y = centres[None, :], centres[::-1, None]
        img = np.empty((pixels, pixels, 3), dtype=np.float32)
        img[:] = (235, 230, 215)

        def disk(centre, radius):
            return (x - centre[0]) ** 2 + (y - centre[1]) ** 2 <= radius ** 2

        goal = disk(self.goal[:, row], self.success_distance)
        img[goal] = 0.5 * img[goal] + 0.5 * np.array((40, 170, 60))
        img[disk(self.block[:, row], float(self.radius))] = (200, 60, 50)
        dot = max(float(self.radius) / 3, 1.5 * float(self.size) / pixels)
        img[disk(self.gripper[:, row], dot)] = (240, 180, 0) if self.holding[row] else (40, 60, 200)
        return img.astype(np.uint8)


class TableEnv(gym.Env):
    """One copy of a table task with the gymnasium goal-env API; subclasses set ``task``.

    It truncates itself after ``max_episode_steps``. ``gymnasium.make(id, max_episode_steps=k)``
    does not reach it: gymnasium takes ``k`` for a TimeLimit wrapper, which ends episodes at k
    steps only when k is the smaller limit.
    """

    task = "push"
    metadata = {"render_modes": ["rgb_array"], "render_fps": 10}

    def __init__(self, render_mode: str | None = None, **task_kwargs: Any):
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode={render_mode!r} is not allowed: it must be None or 'rgb_array'")
        self.render_mode = render_mode
        self.core = TableCore(1, self.task, **task_kwargs)
        self.max_episode_steps = self.core.max_episode_steps
        self.observation_space, self.action_space = _spaces(self.core.cfg, self.core.drag)
        self._row = np.zeros(1, dtype=np.int64)

    def _obs(self) -> dict[str, np.ndarray]:
        return {k: v[0] for k, v in self.core.obs().items()}

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.core.reset_rows(self.np_random, self._row)
        return self._obs(), {"is_success": False}

    def set_state(self, gripper, block, goal, holding: bool = False) -> dict[str, np.ndarray]:
        """Place gripper, block and goal by hand (after ``reset``); returns the observation."""
        self.core.set_state(self._row, gripper, block, goal, holding)
        return self._obs()

    def step(self, action):
        core = self.core
        core.act(np.asarray(action)[None])
        core.t += 1
        success = bool(core.success()[0])
        terminated = success and core.terminate_on_success
        truncated = bool(core.t[0] >= core.max_episode_steps) and not terminated
        return self._obs(), float(success) - 1.0, terminated, truncated, {"is_success": success}

    def compute_reward(self, achieved_goal, desired_goal, info):
        return self.core.compute_reward(achieved_goal, desired_goal, info)

    def compute_terminated(self, achieved_goal, desired_goal, info):
        return self.core.compute_terminated(achieved_goal, desired_goal, info)

    def render(self):
        return self.core.render() if self.render_mode == "rgb_array" else None


class TableVectorEnv(VectorEnv):
    """``num_envs`` copies stepped together in a few numpy calls; subclasses set ``task``.

    Autoreset as :class:`~her_rl.envs.bitflip.BitFlipVectorEnv`: gymnasium's NEXT_STEP mode (the
    step after an episode ends resets that copy, its action ignored, reward 0), or with
    ``autoreset=False`` copies keep stepping after they end (lock-step HER collection).
    """

    task = "push"
    metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP, "render_modes": ["rgb_array"], "render_fps": 10}

    def __init__(self, num_envs: int, seed: int | None = None, autoreset: bool = True,
                 render_mode: str | None = None, **task_kwargs: Any):
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode={render_mode!r} is not allowed: it must be None or 'rgb_array'")
        self.render_mode = render_mode
        self.num_envs = int(num_envs)
        self.autoreset = autoreset
        self.core = TableCore(self.num_envs, self.task, **task_kwargs)
        self.max_episode_steps = self.core.max_episode_steps
        self.single_observation_space, self.single_action_space = _spaces(self.core.cfg, self.core.drag)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self._np_random, _ = gym.utils.seeding.np_random(seed)
        self._needs_reset = np.zeros(self.num_envs, dtype=bool)
        self._rows = np.arange(self.num_envs)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self._np_random, _ = gym.utils.seeding.np_random(seed)
        self.core.reset_rows(self._np_random, self._rows)
        self._needs_reset = np.zeros(self.num_envs, dtype=bool)
        return self.core.obs(), {"is_success": np.zeros(self.num_envs, dtype=bool)}

    def set_state(self, rows, gripper, block, goal, holding=False) -> dict[str, np.ndarray]:
        """Place copies ``rows`` by hand (after ``reset``); returns the observation of all copies."""
        self.core.set_state(rows, gripper, block, goal, holding)
        self._needs_reset[rows] = False
        return self.core.obs()

    def step(self, actions):
        core, resetting = self.core, self._needs_reset
        core.act(actions)  # copies being reset step too; their state is overwritten just below
        core.t += 1
        reset_any = resetting.any()
        if reset_any:
            core.reset_rows(self._np_random, np.flatnonzero(resetting))
        success = core.success()  # False in freshly reset copies: the block never starts at the goal
        reward = success.astype(np.float32)
        reward -= 1.0
        if reset_any:
            reward[resetting] = 0.0
        if core.terminate_on_success:
            terminated = success.copy()
            truncated = (core.t >= core.max_episode_steps) & ~success
        else:
            terminated = np.zeros(self.num_envs, dtype=bool)
            truncated = core.t >= core.max_episode_steps
        if self.autoreset:
            self._needs_reset = terminated | truncated
        return core.obs(), reward, terminated, truncated, {"is_success": success}

    def compute_reward(self, achieved_goal, desired_goal, info=None):
        return self.core.compute_reward(achieved_goal, desired_goal, info)

    def compute_terminated(self, achieved_goal, desired_goal, info=None):
        return self.core.compute_terminated(achieved_goal, desired_goal, info)

    def render(self):
        """The first copy's image (``render_mode='rgb_array'``), else None."""
        return self.core.render(0) if self.render_mode == "rgb_array" else None
