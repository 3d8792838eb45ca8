"""her_rl: experiment runner and building blocks for sparse-reward, goal-conditioned RL.

Only the lightweight building blocks (``her_rl.rl``) are imported here; the runner,
CLI and algorithms are imported from their own modules on demand.
"""
__version__ = "0.1.0"

from .rl import (  # noqa: E402  (re-export the public building blocks)
    RND,
    Action,
    ClipLoss,
    ContinuousAction,
    DiscreteAction,
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

__all__ = [
    "__version__", "RND", "Action", "ClipLoss", "ContinuousAction", "DiscreteAction",
    "EntropyLoss", "GaussianNoise", "NormalPolicyHead", "OUNoise", "PGLoss", "ReplayBuffer",
    "RewardHistory", "Rewards", "RunningMeanStd", "discounted_returns", "gae", "mlp",
    "np2torch", "set_seed", "to_numpy",
]
