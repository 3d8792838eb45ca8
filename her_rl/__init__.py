"""her_rl: experiment runner and building blocks for sparse-reward, goal-conditioned RL.

The public API: :func:`train` (the run ``her-run`` makes), :func:`load` (a run's trained
:class:`Policy`, whose ``predict`` acts on plain gymnasium observations) and :func:`evaluate`,
beside the building blocks of ``her_rl.rl``. Importing the package registers ``her_rl/BitFlip-v0``,
``her_rl/Push-v0``, ``her_rl/Drag-v0`` and ``her_rl/DeepSea-v0`` with gymnasium and nothing more:
torch, Hydra, the runner and the algorithms are imported on first use of a name that needs them, so
``her-run`` handles a signal from its first moment (:mod:`her_rl.cli`).
"""

from __future__ import annotations

import ast
import functools
import importlib
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from her_rl import envs  # noqa: F401  (registers the env ids with gymnasium; no torch)
from her_rl.errors import CheckpointError, ConfigError, EnvError

try:
    __version__ = version("her-rl")
except PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"

_HOMES = {"train": "her_rl.api", "load": "her_rl.api", "evaluate": "her_rl.api", "Policy": "her_rl.saved.policy"}
_API = ["__version__", "train", "load", "evaluate", "Policy", "ConfigError", "EnvError", "CheckpointError"]


@functools.cache
def _blocks() -> tuple[str, ...]:
    """The building blocks: ``her_rl.rl.__all__``, the one list of them, read from its source file
    (importing ``her_rl.rl`` would load torch)."""
    tree = ast.parse((Path(__file__).parent / "rl" / "__init__.py").read_text(encoding="utf-8"))
    return tuple(next(ast.literal_eval(node.value) for node in tree.body if isinstance(node, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)))


def __getattr__(name: str):
    """The API and the building blocks of ``her_rl.rl``, imported when first named (PEP 562);
    ``__all__`` is made on first use, for ``from her_rl import *``."""
    if name == "__all__":
        value = [*_API, *_blocks()]
    elif name in _HOMES:
        value = getattr(importlib.import_module(_HOMES[name]), name)
    elif not name.startswith("_") and name in _blocks():
        value = getattr(importlib.import_module("her_rl.rl"), name)
    else:
        raise AttributeError(f"module 'her_rl' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_API, *_blocks()})
