"""her_rl: experiment runner and building blocks for sparse-reward, goal-conditioned RL.

Only the lightweight building blocks (``her_rl.rl``) and the environments (``her_rl.envs``, whose
import registers ``her_rl/BitFlip-v0``, ``her_rl/Push-v0``, ``her_rl/Drag-v0`` and
``her_rl/DeepSea-v0`` with gymnasium) are imported here; the runner, CLI and algorithms are
imported from their own modules on demand.
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

__all__ = [
    "__version__", "RND", "Action", "ClipLoss", "ContinuousAction", "DiscreteAction", "ElementwiseQ",
    "EntropyLoss", "GaussianNoise", "NormalPolicyHead", "OUNoise", "PGLoss", "ReplayBuffer",
    "RewardHistory", "Rewards", "RunningMeanStd", "discounted_returns", "gae", "mlp",
    "np2torch", "set_seed", "to_numpy",
]
