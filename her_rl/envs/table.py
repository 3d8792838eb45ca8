"""The gymnasium side of the table tasks: the goal-env API over a :class:`~her_rl.envs.table_core.TableCore`.

:class:`TableEnv` (one copy) and :class:`TableVectorEnv` (``num_envs`` copies, next-step
autoreset) wrap the core of a task, set by a subclass's ``core_class`` (push.py, drag.py): spaces,
seeding, episode ends, rewards, ``compute_reward`` for HER relabelling, rendering. The rules live
in ``table_core.py`` and the tasks' modules, the drawing in ``table_render.py``, the settings and
their check in ``table_settings.py``; their public names are importable from here as well.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from her_rl.envs.table_core import TableCore


def _spaces(core: TableCore) -> tuple[spaces.Dict, spaces.Space]:
    s, st = core.cfg["table_size"], core.cfg["step_size"]
    # A move is at most one step long; a push can set the gripper back by as much again, so 3 steps
    # bound every velocity component with room for rounding (the block moves at most one step).
    low = np.array([0, 0, 0, 0, -s, -s] + [-3 * st] * 4 + [0], dtype=np.float32)
    high = np.array([s] * 6 + [3 * st] * 4 + [1], dtype=np.float32)
    goal = spaces.Box(0.0, s, shape=(2,), dtype=np.float32)
    obs = spaces.Dict({"observation": spaces.Box(low, high, dtype=np.float32),
                       "achieved_goal": goal, "desired_goal": goal})
    if core.discrete:
        return obs, spaces.Discrete(core.n_actions)
    return obs, spaces.Box(-1.0, 1.0, shape=(core.act_dim,), dtype=np.float32)


class _GoalAPI:
    """What the single and the batched env share: the render mode, and rewards recomputed by the core."""

    core: TableCore

    def _check_render_mode(self, render_mode: str | None) -> None:
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode={render_mode!r} is not allowed: it must be None or 'rgb_array'")
        self.render_mode = render_mode

    def compute_reward(self, achieved_goal, desired_goal, info=None):
        return self.core.compute_reward(achieved_goal, desired_goal, info)

    def compute_terminated(self, achieved_goal, desired_goal, info=None):
        return self.core.compute_terminated(achieved_goal, desired_goal, info)

    def render(self):
        """The (first) copy's image with ``render_mode='rgb_array'``, else None."""
        return self.core.render(0) if self.render_mode == "rgb_array" else None


class TableEnv(_GoalAPI, gym.Env):
    """One copy of a table task with the gymnasium goal-env API; subclasses set ``core_class``.

    It truncates itself after ``max_episode_steps``. ``gymnasium.make(id, max_episode_steps=k)``
    does not reach it: gymnasium takes ``k`` for a TimeLimit wrapper, which ends episodes at k
    steps only when k is the smaller limit.
    """

    core_class: type[TableCore]
    metadata = {"render_modes": ["rgb_array"], "render_fps": 10}

    def __init__(self, render_mode: str | None = None, **task_kwargs: Any):
        self._check_render_mode(render_mode)
        self.core = self.core_class(1, **task_kwargs)
        self.max_episode_steps = self.core.max_episode_steps
        self.observation_space, self.action_space = _spaces(self.core)
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


class TableVectorEnv(_GoalAPI, VectorEnv):
    """``num_envs`` copies stepped together in a few numpy calls; subclasses set ``core_class``.

    Autoreset as :class:`~her_rl.envs.bitflip.BitFlipVectorEnv`: gymnasium's NEXT_STEP mode (the
    step after an episode ends resets that copy, its action ignored, reward 0), or with
    ``autoreset=False`` copies keep stepping after they end (lock-step HER collection).
    """

    core_class: type[TableCore]
    metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP, "render_modes": ["rgb_array"], "render_fps": 10}

    def __init__(self, num_envs: int, seed: int | None = None, autoreset: bool = True,
                 render_mode: str | None = None, **task_kwargs: Any):
        self._check_render_mode(render_mode)
        self.num_envs = int(num_envs)
        self.autoreset = autoreset
        self.core = self.core_class(self.num_envs, **task_kwargs)
        self.max_episode_steps = self.core.max_episode_steps
        self.single_observation_space, self.single_action_space = _spaces(self.core)
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
