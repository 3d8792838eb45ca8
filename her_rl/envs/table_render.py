"""Drawing a table task: one copy's top view as an RGB image (``render_mode='rgb_array'``, videos).

Apart from the rules so that what a frame shows can change without touching a step; it reads the
core's arrays and writes nothing back.
"""

from __future__ import annotations

from typing import Any

import numpy as np

TABLE, GOAL, BLOCK = (235, 230, 215), (40, 170, 60), (200, 60, 50)
GRIPPER_OPEN, GRIPPER_HOLDING = (40, 60, 200), (240, 180, 0)


def render_table(core: Any, row: int = 0, pixels: int = 240) -> np.ndarray:
    """``pixels x pixels x 3`` uint8 top view of copy ``row`` of a :class:`~her_rl.envs.table_core.TableCore`
    (y up): table, goal disk of radius success_distance blended in, block, gripper dot (yellow
    while holding, else blue)."""
    size = float(core.size)
    centres = (np.arange(pixels) + 0.5) * (size / pixels)
    x, y = centres[None, :], centres[::-1, None]
    img = np.empty((pixels, pixels, 3), dtype=np.float32)
    img[:] = TABLE

    def disk(centre, radius):
        return (x - centre[0]) ** 2 + (y - centre[1]) ** 2 <= radius ** 2

    goal = disk(core.goal[:, row], core.success_distance)
    img[goal] = 0.5 * img[goal] + 0.5 * np.array(GOAL)
    img[disk(core.block[:, row], float(core.radius))] = BLOCK
    dot = max(float(core.radius) / 3, 1.5 * size / pixels)
    img[disk(core.gripper[:, row], dot)] = GRIPPER_HOLDING if core.holding[row] else GRIPPER_OPEN
    return img.astype(np.uint8)
