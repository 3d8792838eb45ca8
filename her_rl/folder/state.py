"""A run's counters: what a checkpoint saves as ``runner`` and a resumed run starts from.

They are read back from a file the user may have edited or damaged, so :meth:`RunState.restore`
checks every entry (type and range, and that they agree with each other) and names the first that
is wrong; a resumed run never starts from counters it cannot trust.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass, fields
from typing import Any

from her_rl.errors import CheckpointError


def _count(v: Any) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool) and v >= 0


def _seconds(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v) and v >= 0


def _scores(v: Any) -> bool:
    return v is None or (isinstance(v, dict) and all(isinstance(k, str) and isinstance(x, numbers.Real)
                                                      and not isinstance(x, bool) for k, x in v.items()))


_CHECKS = {  # entry -> (test, what it must be)
    "env_steps": (_count, "an integer >= 0"),
    "iteration": (_count, "an integer >= 0"),
    "wall_time_s": (_seconds, "a finite number >= 0"),
    "episodes": (_count, "an integer >= 0"),
    "eval": (_scores, "null or a mapping of names to numbers"),
    "solved": (lambda v: isinstance(v, bool), "true or false"),
    "solved_at_env_steps": (lambda v: v is None or _count(v), "null or an integer >= 0"),
}


REQUIRED = ("env_steps", "iteration")  # every her-rl checkpoint has had these; the others have defaults


@dataclass
class RunState:
    """The run's counters: saved in every checkpoint (as ``runner``), restored on resume."""

    env_steps: int = 0
    iteration: int = 0
    wall_time_s: float = 0.0
    episodes: int = 0
    eval: dict[str, float] | None = None
    """The last greedy evaluation."""
    solved: bool = False
    """Solved with ``eval.stop_when_solved``: the loop ends."""
    solved_at_env_steps: int | None = None
    """The env step of the first evaluation that reached the threshold."""

    @classmethod
    def restore(cls, saved: Any, source: Any = "the checkpoint") -> RunState:
        """The counters of a checkpoint's ``runner`` entry; a CheckpointError naming ``source`` and
        the first entry that is missing or wrong."""
        def bad(why: str) -> CheckpointError:
            return CheckpointError(f"cannot load checkpoint {source}: its runner entry {why}")

        if not isinstance(saved, dict):
            raise bad(f"is a {type(saved).__name__}, not a mapping")
        for name in REQUIRED:
            if name not in saved:
                raise bad(f"has no {name} (the file is damaged or was not written by her-rl)")
        values = {f.name: saved[f.name] for f in fields(cls) if f.name in saved}  # older files: defaults
        for name, value in values.items():
            test, allowed = _CHECKS[name]
            if not test(value):
                raise bad(f"has {name}={value!r}; it must be {allowed}")
        state = cls(**values)
        if state.solved_at_env_steps is not None and state.solved_at_env_steps > state.env_steps:
            raise bad(f"says it solved at env step {state.solved_at_env_steps}, after its last ({state.env_steps})")
        if state.solved and state.solved_at_env_steps is None:
            raise bad("says solved but not when")
        return state

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


__all__ = ["RunState"]
