"""What one benchmark run reports, both sides alike: a :class:`Row` (solved, and the env steps and
wall seconds to that or to the cap) or a to-target dict read off an evaluation curve."""

from __future__ import annotations

import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from bench.stats import first_reaching


@dataclass
class Row:
    """One run. When ``solved`` is False, env_steps / wall_s are what the run used before its cap
    (the true time to success is larger: a lower bound)."""

    side: str
    seed: int
    solved: bool
    env_steps: int
    wall_s: float
    n: int = 0


def solve_row(side: str, seed: int, n: int, curve: Sequence[tuple[int, float, float]], target: float,
              ran: tuple[int, float]) -> Row:
    """The row of a run whose curve first reaches ``target`` there, else of what it ``ran``
    (env steps, wall seconds) before its cap."""
    hit = first_reaching(curve, target)
    steps, wall = (hit[0], hit[1]) if hit else ran
    return Row(side, seed, hit is not None, int(steps), float(wall), n)


def target_row(curve: Sequence[tuple[int, float, float]], target: float, **ran: Any) -> dict[str, Any]:
    """Whether and where the curve reached ``target``, what the run ran (``env_steps``, ``wall_s``,
    ``final_success``: the last evaluation's unless given in ``ran``) and its best value."""
    hit = first_reaching(curve, target)
    last = curve[-1] if curve else (0, None, None)
    row = {"reached": hit is not None, "steps_to_target": hit[0] if hit else None,
           "wall_to_target": hit[1] if hit else None, "env_steps": last[0], "wall_s": last[1],
           "final_success": last[2], "best_success": max((v for *_, v in curve), default=0.0)}
    row.update(ran)
    return row


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


SIMD = ("avx2", "avx512f", "avx512_bf16", "amx_tile")  # what decides which float kernels torch runs


def cpu_flags() -> str:
    """The vector-unit flags of this CPU that change torch's arithmetic (two CPUs of one model name can differ)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                have = set(line.split(":", 1)[1].split())
                return " ".join(f for f in SIMD if f in have)
    except OSError:
        pass
    return ""
