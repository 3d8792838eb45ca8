"""Settings of the push and drag tasks: their defaults and the one check of every value.

Kept apart from the rules (``table.py``) so a config checker can validate ``env.kwargs`` without
building an env; lengths are in table units.
"""

from __future__ import annotations

import math
from numbers import Real
from typing import Any

import numpy as np

DEFAULTS: dict[str, Any] = {
    "table_size": 1.0, "block_size": 0.1, "step_size": 0.05, "success_distance": None,
    "max_episode_steps": 50, "terminate_on_success": False, "actions": "discrete",
    # As Fetch (obj_range, target_range 0.15): the gripper starts near the block and the goal lies
    # near it. Unset, they keep Fetch's proportions (0.15 = 3 success distances; the gripper range at
    # least one block size); None means anywhere on the table. With both anywhere, HER-DQN still
    # had 0.00 success after 1M steps.
    "gripper_range": "max(3 * success_distance, block_size)", "goal_range": "3 * success_distance",
}
DRAG_DEFAULTS: dict[str, Any] = {**DEFAULTS, "grip_reach": None}

# What each setting means: the config page's words (``env.kwargs.*`` of env=push and env=drag).
MEANINGS: dict[str, str] = {
    "table_size": "the table is [0, table_size]^2",
    "block_size": "block diameter (< table_size)",
    "step_size": "gripper move per step (<= block_size / 2: it cannot pass the block)",
    "success_distance": "block-goal distance that counts as success; null: 0.05 * table_size (Fetch: 0.05 m)",
    "max_episode_steps": "episodes are truncated after this many steps",
    "terminate_on_success": "as in Fetch: reaching the goal does not end the episode",
    "actions": "discrete: 8 compass moves; continuous: Box(-1, 1, (2,)) x step_size",
    "gripper_range": "the gripper starts within this half-width of the block (Fetch's obj_range: 0.15 with the "
                     "default sizes); null: anywhere",
    "goal_range": "the goal lies within this half-width of the block's start (Fetch's target_range: 0.15 with the "
                  "default sizes); null: anywhere",
}
DRAG_MEANINGS: dict[str, str] = {
    **MEANINGS,
    "actions": "discrete: 8 moves, 8 = grip, 9 = release; continuous: Box(-1, 1, (3,)), a[2] > 0 holds",
    "grip_reach": "grip closes within this distance of the block centre; null: block_size / 2 + step_size",
}


def _positive(key: str, value: Any) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, Real) or not 0 < float(value) < math.inf:
        raise ValueError(f"{key}={value!r} is not allowed: {key} must be a positive finite number")
    return float(value)


def check_table_kwargs(task: str = "push", **kwargs: Any) -> dict[str, Any]:
    """Validate push/drag constructor kwargs without building an env (config checkers call this).

    Returns the complete settings with defaults filled in and ``None`` resolved; raises ValueError
    naming the key, its value and what is allowed.
    """
    if task not in ("push", "drag"):
        raise ValueError(f"task={task!r} is not allowed: task must be 'push' or 'drag'")
    allowed = DRAG_DEFAULTS if task == "drag" else DEFAULTS
    unknown = sorted(set(kwargs) - set(allowed))
    if unknown:
        raise ValueError(f"unknown {task} setting(s) {unknown}; allowed: {sorted(allowed)}")
    cfg = {**allowed, **kwargs}
    _check_sizes(cfg)
    _check_episode(cfg)
    _check_ranges(cfg)
    if task == "drag":
        reach = cfg["grip_reach"]
        default = cfg["block_size"] / 2 + cfg["step_size"]
        cfg["grip_reach"] = default if reach is None else _positive("grip_reach", reach)
    return cfg


def _check_sizes(cfg: dict[str, Any]) -> None:
    """Table, block, step and success distance: positive, and in proportions every episode can use."""
    size = cfg["table_size"] = _positive("table_size", cfg["table_size"])
    block = cfg["block_size"] = _positive("block_size", cfg["block_size"])
    if block >= size:
        raise ValueError(f"block_size={block!r} is not allowed: it must be < table_size ({size!r})")
    step = cfg["step_size"] = _positive("step_size", cfg["step_size"])
    if step > block / 2:
        raise ValueError(f"step_size={step!r} is not allowed: it must be <= block_size / 2 ({block / 2!r}) "
                         "so that the gripper cannot jump over the block")
    if cfg["success_distance"] is None:
        cfg["success_distance"] = 0.05 * size
    sd = cfg["success_distance"] = _positive("success_distance", cfg["success_distance"])
    if sd >= (size - block) / math.sqrt(2):  # else some block positions have no goal that far away
        raise ValueError(f"success_distance={sd!r} is not allowed: it must be < (table_size - block_size)"
                         f" / sqrt(2) = {(size - block) / math.sqrt(2)!r}")


def _check_episode(cfg: dict[str, Any]) -> None:
    steps = cfg["max_episode_steps"]
    if isinstance(steps, (bool, np.bool_)) or not isinstance(steps, (int, np.integer)) or steps < 1:
        raise ValueError(f"max_episode_steps={steps!r} is not allowed: it must be an integer >= 1")
    cfg["max_episode_steps"] = int(steps)
    if not isinstance(cfg["terminate_on_success"], (bool, np.bool_)):
        raise ValueError(f"terminate_on_success={cfg['terminate_on_success']!r} is not allowed: "
                         "it must be true or false")
    cfg["terminate_on_success"] = bool(cfg["terminate_on_success"])
    if cfg["actions"] not in ("discrete", "continuous"):
        raise ValueError(f"actions={cfg['actions']!r} is not allowed: it must be 'discrete' or 'continuous'")


def _check_ranges(cfg: dict[str, Any]) -> None:
    """Where the gripper and the goal start around the block; the defaults follow the success distance."""
    block, sd = cfg["block_size"], cfg["success_distance"]
    if cfg["gripper_range"] == DEFAULTS["gripper_range"]:
        cfg["gripper_range"] = max(round(3 * sd, 12), block)  # round: 3 * 0.05 is 0.15000000000000002
    if cfg["goal_range"] == DEFAULTS["goal_range"]:
        cfg["goal_range"] = round(3 * sd, 12)
    if cfg["gripper_range"] is not None:
        reach = cfg["gripper_range"] = _positive("gripper_range", cfg["gripper_range"])
        if reach <= block / 2:
            raise ValueError(f"gripper_range={reach!r} is not allowed: it must be > block_size / 2 ({block / 2!r}) "
                             "or null (anywhere on the table)")
    if cfg["goal_range"] is not None:
        far = cfg["goal_range"] = _positive("goal_range", cfg["goal_range"])
        if far <= sd:
            raise ValueError(f"goal_range={far!r} is not allowed: it must be > success_distance ({sd!r}) "
                             "or null (anywhere on the table)")
