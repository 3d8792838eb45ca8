"""her_rl: experiment runner and building blocks for sparse-reward, goal-conditioned RL.

The public API: :func:`train` (the run ``her-run`` makes), :func:`load` (a run's trained
:class:`Policy`, whose ``predict`` acts on plain gymnasium observations) and :func:`evaluate`,
beside the building blocks of ``her_rl.rl``. Importing the package registers ``her_rl/BitFlip-v0``,
``her_rl/Push-v0``, ``her_rl/Drag-v0`` and ``her_rl/DeepSea-v0`` with gymnasium; the runner, Hydra
and the algorithms are imported on first use.
"""
__version__ = "0.1.0"

from .rl import (  # noqa: E402  (re-export the public building blocks)
    RND,
    Action,
    ClipLoss,
    ContinuousAction,
    DiscreteAction,
    ElementwiseQ,
    EntropyLoss,
    GaussianNoise,
    NormalPolicyHead,
    OUNoise,
    PGLoss,
    ReplayBuffer,
    RewardHistory,
    Rewards,
    RunningMeanStd,
    discounted_returns,
    gae,
    mlp,
    np2torch,
    set_seed,
    to_numpy,
)
from . import envs  # noqa: E402,F401  (registers the env ids with gymnasium)
from .api import Policy, evaluate, load, train  # noqa: E402
from .checkpoint import CheckpointError  # noqa: E402
from .errors import ConfigError, EnvError  # noqa: E402

__all__ = [
    "__version__", "train", "load", "evaluate", "Policy", "ConfigError", "EnvError", "CheckpointError", "RND", "Action", "ClipLoss", "ContinuousAction", "DiscreteAction", "ElementwiseQ",
    "EntropyLoss", "GaussianNoise", "NormalPolicyHead", "OUNoise", "PGLoss", "ReplayBuffer",
    "RewardHistory", "Rewards", "RunningMeanStd", "discounted_returns", "gae", "mlp",
    "np2torch", "set_seed", "to_numpy",
]
