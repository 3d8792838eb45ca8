"""Trajectory energy (Zhao and Tresp 2018, "Energy-Based Hindsight Experience Prioritization"): the
work done on the object an episode's achieved goals track, by which ``HindsightMemory`` with
``prioritize="energy"`` draws its episodes (:mod:`her_rl.rl.her`)."""

from __future__ import annotations

import numpy as np

GRAVITY, MASS = 9.81, 1.0  # the energy of a unit mass under Earth's gravity (Zhao and Tresp 2018)


def trajectory_energy(achieved_goal: np.ndarray, length: np.ndarray, clip_energy: float,
                      dt: float = 0.04) -> np.ndarray:
    """The trajectory energy of a batch of episodes (Zhao and Tresp 2018), from the achieved goals
    [B, T+1, G] read as the object's position (the first three values; z the third): after step t the
    object's energy is E_t = m g (z_t - z_0) + m |p_t - p_(t-1)|^2 / (2 dt^2); a step's transition energy
    is E_1 for the first and E_t - E_(t-1) after, clipped to [0, clip_energy]; the trajectory energy is
    their sum over the episode's ``length`` steps. [B] float64."""
    pos = np.asarray(achieved_goal, dtype=np.float64).reshape(*np.shape(achieved_goal)[:2], -1)[..., :3]
    steps = pos.shape[1] - 1
    height = pos[:, 1:, 2] - pos[:, :1, 2] if pos.shape[-1] >= 3 else np.zeros((len(pos), steps))
    speed2 = (np.diff(pos, axis=1) ** 2).sum(-1) / dt ** 2
    energy = MASS * GRAVITY * height + 0.5 * MASS * speed2  # [B, T]: after each step
    transition = np.clip(np.concatenate([energy[:, :1], np.diff(energy, axis=1)], axis=1), 0.0, clip_energy)
    counted = np.arange(steps)[None] < np.asarray(length)[:, None]
    return (transition * counted).sum(1)
