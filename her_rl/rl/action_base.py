"""The base class of policy outputs, apart so that each kind of action can import it.

``losses.py`` and the concatenation checks test ``isinstance(x, Action)`` to accept any policy
output and refuse plain tensors with one clear message.
"""
from __future__ import annotations

__all__ = ["Action"]


class Action:
    """Marker base class of policy outputs (used for operand type checks)."""
