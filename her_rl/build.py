"""Agents from a run's config: built to train or only to act, with a saved state loaded into them.

A new run, a resumed one, ``her-run load=`` and ``her_rl.load`` all make their agent here, so an
agent is built from a config one way and a saved state that does not fit it is one line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from her_rl.errors import CheckpointError, one_line
from her_rl.registry import build_agent


def device_name(name: str) -> str:
    """``auto``: cuda when there is one (the config check already refused a missing cuda)."""
    if name == "auto":
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    return name


def load_state(agent: Any, state: dict[str, Any], path: str | Path | None, algo: str) -> None:
    """Load an agent state (a checkpoint's ``agent``); one CheckpointError naming ``path`` if it does not fit."""
    try:
        agent.load_state_dict(state)
    except Exception as exc:  # key or shape mismatches surface as KeyError/RuntimeError/ValueError
        raise CheckpointError(f"cannot load checkpoint {path}: its agent state does not fit algo '{algo}' "
                              f"({one_line(exc)[:200]})") from None


def make_agent(config: dict[str, Any], device: str = "cpu", *, inference: bool = False,
               state: dict[str, Any] | None = None, source: str | Path | None = None) -> Any:
    """The agent of a run's resolved ``config`` on ``device`` (``cpu``, ``cuda``, ``auto``).

    ``inference``: only what acting needs (networks, input statistics), no training envs and no
    replay memory. ``state``: a saved agent state to load (its replay memory too, unless
    ``inference``); ``source`` is the checkpoint it came from, named if the state does not fit.
    """
    agent = build_agent(config["algo"], env=config["env"], seed=int(config.get("seed", 0)),
                        device=device_name(device), inference=inference)
    if state is not None:
        if inference:
            state = {k: v for k, v in state.items() if k != "memory"}
        load_state(agent, state, source, config["algo"]["name"])
    return agent


__all__ = ["device_name", "load_state", "make_agent"]
