"""Policy outputs as objects: discrete (categorical) and continuous (Gaussian) actions.

Each kind lives in its own module: :class:`DiscreteAction` in ``discrete_action.py``,
:class:`ContinuousAction` and :class:`NormalPolicyHead` in ``continuous_action.py``, their base
:class:`Action` in ``action_base.py``. This module keeps the names importable from one place
(``her_rl.rl.actions``), as code and saved objects written against it expect.
"""
from __future__ import annotations

from .action_base import Action
from .continuous_action import ContinuousAction, NormalPolicyHead
from .discrete_action import DiscreteAction

__all__ = ["Action", "DiscreteAction", "ContinuousAction", "NormalPolicyHead"]
