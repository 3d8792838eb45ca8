"""Building blocks for policy-gradient, PPO, RND and off-policy/HER agents."""
from .her import GoalEnvSpec, GoalInputs, HindsightMemory, HindsightSettings, collect_episodes, goal_env_spec
from .history import RewardHistory
from .losses import ClipLoss, EntropyLoss, PGLoss
from .nets import Action, ContinuousAction, DiscreteAction, ElementwiseQ, NormalPolicyHead, mlp
from .noise import GaussianNoise, OUNoise
from .normalize import RunningMeanStd
from .replay import ReplayBuffer
from .returns import Rewards, discounted_returns, gae
from .rnd import RND
from .utils import np2torch, set_seed, to_numpy

__all__ = [
    "Action", "ContinuousAction", "DiscreteAction", "NormalPolicyHead",
    "GoalEnvSpec", "GoalInputs", "collect_episodes", "goal_env_spec", "HindsightMemory", "HindsightSettings",
    "RewardHistory", "ClipLoss", "EntropyLoss", "PGLoss", "ElementwiseQ", "mlp",
    "GaussianNoise", "OUNoise", "RunningMeanStd", "ReplayBuffer",
    "Rewards", "discounted_returns", "gae", "RND", "np2torch", "set_seed", "to_numpy",
]
