"""The MuJoCo Fetch tasks of gymnasium-robotics, an optional extra: ``pip install -e ".[robotics]"``.

``FetchReach-v4``, ``FetchPush-v4``, ``FetchSlide-v4`` and ``FetchPickAndPlace-v4`` (and the rest of
gymnasium-robotics: mazes, Shadow hand) are registered with gymnasium only when
``gymnasium_robotics`` is imported. :func:`ensure_registered` (her_rl/envs/families.py, one table
of such families: gymnasium-robotics, panda-gym) does that on demand for their ids
(``her_rl.envs.make_vec`` and the config check's env probe call it), so runs on the other envs never
import MuJoCo, and a missing or unsuitable extra is one ConfigError line that names the install
command.

Fetch has no batched implementation: ``make_vec`` steps copies with gymnasium's SyncVectorEnv or
AsyncVectorEnv (``env.vectorization``). The Fetch YAMLs pick ``sync``: on this 2-core machine it
stepped FetchPush-v4 as fast as or faster than ``async`` with 2, 4 and 16 copies in lock-step HER
collection (``scripts/bench_fetch_vec.py``; a MuJoCo step is about 1 ms, too short for the
inter-process round trip to pay off on 2 shared cores). An AsyncVectorEnv's copies live in worker
processes, so :class:`GoalVectorEnv` wraps it with one local copy that answers ``compute_reward``,
``compute_terminated`` and ``max_episode_steps`` (Fetch's reward and termination rules depend on
the goals only, never on the simulator state).

Every Fetch observation reads the robot's joints through ``mujoco_utils.robot_get_obs``, which
looks each of the 15 joints up by name twice a step: about a third of a FetchPush step's wall
time besides the simulation itself. :func:`cache_joint_lookups` gives each copy a stand-in that
reads the same values from addresses looked up once (same numbers, bit for bit).

FetchPickAndPlace puts about half its goals in the air, and a learner that has never seen the block
off the table does not learn to lift it (measured: docs/benchmarks/fetch.md). :class:`StartInGripper`
starts a share of the *training* episodes with the block held between the closed fingers, the HER
paper's remedy for this task (Andrychowicz et al. 2017); ``env.start_in_gripper`` sets the share and
evaluation episodes always start as the task does.
"""

from __future__ import annotations

import functools
import importlib
import sys
from typing import Any

import gymnasium as gym
import numpy as np

from her_rl.envs.families import FAMILIES, family_of
from her_rl.errors import NoBlockToHold

ROBOTICS = next(f for f in FAMILIES if f.extra == "robotics")
ROBOTICS_VERSIONS = ROBOTICS.versions
INSTALL = ROBOTICS.install
VECTORIZATION = ("sync", "async")


def needs_robotics(env_id: str) -> bool:
    """Whether ``env_id`` is one of gymnasium-robotics' tasks (``FetchPush-v4``, ``PointMaze_UMaze-v3``, ...)."""
    return family_of(env_id) is ROBOTICS


class GoalVectorEnv(gym.vector.VectorWrapper):
    """A vector env whose copies run elsewhere (AsyncVectorEnv), plus one local copy for the goal
    env's pure functions: ``compute_reward``, ``compute_terminated`` and ``max_episode_steps``."""

    def __init__(self, envs: gym.vector.VectorEnv, env_id: str, kwargs: dict[str, Any]):
        super().__init__(envs)
        self.local_env = gym.make(env_id, disable_env_checker=True, **kwargs)
        unwrapped = self.local_env.unwrapped
        self.compute_reward = unwrapped.compute_reward
        if hasattr(unwrapped, "compute_terminated"):
            self.compute_terminated = unwrapped.compute_terminated
        limit = self.local_env.spec.max_episode_steps if self.local_env.spec is not None else None
        self.max_episode_steps = int(limit) if limit else None

    def close_extras(self, **kwargs: Any) -> None:
        self.local_env.close()
        super().close_extras(**kwargs)

    def close(self, **kwargs: Any) -> None:
        self.local_env.close()
        super().close(**kwargs)


class CachedJointUtils:
    """gymnasium-robotics' ``mujoco_utils`` module for one env copy, except that ``robot_get_obs``
    reads the robot's joints at addresses looked up on its first call instead of by name every step.
    Robots with a joint of more than one coordinate (free or ball joints) keep the module's own reader."""

    MODULE = "gymnasium_robotics.utils.mujoco_utils"

    def __init__(self) -> None:
        self._utils = importlib.import_module(self.MODULE)
        self._addresses: tuple[np.ndarray, np.ndarray] | None = None
        self._by_name = False

    def __reduce__(self):  # sent to AsyncVectorEnv workers: rebuilt there, addresses looked up again
        return (CachedJointUtils, ())

    def __getattr__(self, name: str) -> Any:
        return getattr(self._utils, name)

    def robot_get_obs(self, model, data, joint_names):
        if self._addresses is None and not self._by_name:
            import mujoco  # optional extra: mujoco (gymnasium-robotics)

            ids = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, n) for n in joint_names if n.startswith("robot")]
            one_coordinate = (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))
            # np.squeeze of one joint's value would be a 0-d array: the module's reader keeps that case
            self._by_name = len(ids) < 2 or any(int(model.jnt_type[i]) not in one_coordinate for i in ids)
            if not self._by_name:
                self._addresses = (model.jnt_qposadr[ids].copy(), model.jnt_dofadr[ids].copy())
        if self._by_name or data.qpos is None:
            return self._utils.robot_get_obs(model, data, joint_names)
        return data.qpos[self._addresses[0]], data.qvel[self._addresses[1]]


class StartInGripper(gym.Wrapper):
    """Start each episode, with probability ``share`` (drawn from the env's own seeded generator),
    with the block at the gripper's centre and the fingers closed on it: the same observation
    layout and goal, only the block's start differs. For gymnasium-robotics' Fetch tasks with a block."""

    FINGERS = ("robot0:l_gripper_finger_joint", "robot0:r_gripper_finger_joint")
    HALF_WIDTH = 0.0242  # finger opening that holds FetchPickAndPlace's 5 cm block without pushing it out

    def __init__(self, env: gym.Env, share: float):
        super().__init__(env)
        base = env.unwrapped
        grips = getattr(base, "has_object", False) and not getattr(base, "block_gripper", True)
        if not grips or not hasattr(base, "_utils"):
            name = env.spec.id if env.spec is not None else type(base).__name__
            raise NoBlockToHold(f"env.start_in_gripper needs a MuJoCo Fetch task with a block and working fingers "
                              f"(FetchPickAndPlace-v4); '{name}' has none: set env.start_in_gripper=0")
        self.share = float(share)

    def reset(self, **kwargs: Any):
        obs, info = self.env.reset(**kwargs)
        base = self.env.unwrapped
        if base.np_random.random() >= self.share:
            return obs, info
        utils, model, data = base._utils, base.model, base.data
        block = utils.get_joint_qpos(model, data, "object0:joint").copy()
        block[:3] = utils.get_site_xpos(model, data, "robot0:grip")
        utils.set_joint_qpos(model, data, "object0:joint", block)
        for finger in self.FINGERS:
            utils.set_joint_qpos(model, data, finger, np.array([self.HALF_WIDTH]))
        base._mujoco.mj_forward(model, data)
        return base._get_obs(), info


def start_in_gripper(share: float) -> Any:
    """The ``wrappers`` entry of ``gymnasium.make_vec`` for :class:`StartInGripper` (picklable: async copies)."""
    return functools.partial(StartInGripper, share=share)


def cache_joint_lookups(envs: gym.vector.VectorEnv) -> gym.vector.VectorEnv:
    """Give every Fetch copy of ``envs`` a :class:`CachedJointUtils` (in place; returns ``envs``).
    Copies that do not read their joints through ``mujoco_utils`` (other envs) are left alone."""
    module = sys.modules.get(CachedJointUtils.MODULE)  # not imported: no copy can be a Fetch env
    if module is None:
        return envs
    if isinstance(envs, GoalVectorEnv):  # copies in worker processes: only the attribute travels
        if getattr(envs.local_env.unwrapped, "_utils", None) is module:
            envs.env.set_attr("_utils", CachedJointUtils())
        return envs
    for env in getattr(envs, "envs", ()):
        if getattr(env.unwrapped, "_utils", None) is module:
            env.unwrapped._utils = CachedJointUtils()
    return envs
