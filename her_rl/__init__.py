"""her_rl: experiment runner and building blocks for sparse-reward, goal-conditioned RL.

The public API: :func:`train` (the run ``her-run`` makes), :func:`load` (a run's trained
:class:`Policy`, whose ``predict`` acts on plain gymnasium observations) and :func:`evaluate`,
beside the building blocks of ``her_rl.rl``. Importing the package registers ``her_rl/BitFlip-v0``,
``her_rl/Push-v0``, ``her_rl/Drag-v0`` and ``her_rl/DeepSea-v0`` with gymnasium and nothing more:
torch, Hydra, the runner and the algorithms are imported on first use of a name that needs them, so
``her-run`` handles a signal from its first moment (:mod:`her_rl.cli`).
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError, version

from her_rl import envs  # noqa: F401  (registers the env ids with gymnasium; no torch)
from her_rl.errors import CheckpointError, ConfigError, EnvError

try:
    __version__ = version("her-rl")
except PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"

_BLOCKS = ("RND", "Action", "ClipLoss", "ContinuousAction", "DiscreteAction", "ElementwiseQ", "EntropyLoss",
           "GaussianNoise", "NormalPolicyHead", "OUNoise", "PGLoss", "ReplayBuffer", "RewardHistory", "Rewards",
           "RunningMeanStd", "discounted_returns", "gae", "mlp", "np2torch", "set_seed", "to_numpy")
_HOMES = {"train": "her_rl.api", "load": "her_rl.api", "evaluate": "her_rl.api", "Policy": "her_rl.saved.policy",
          **{name: "her_rl.rl" for name in _BLOCKS}}

__all__ = ["__version__", "train", "load", "evaluate", "Policy", "ConfigError", "EnvError", "CheckpointError",
           *_BLOCKS]


def __getattr__(name: str):
    """The API and the building blocks, imported when first named (PEP 562)."""
    if name not in _HOMES:
        raise AttributeError(f"module 'her_rl' has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOMES[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})
