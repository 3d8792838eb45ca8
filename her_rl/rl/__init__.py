"""Building blocks for policy-gradient, PPO, RND and off-policy/HER agents."""
from .actions import Action, ContinuousAction, DiscreteAction, NormalPolicyHead
from .goal import GoalEnvSpec, GoalInputs, collect_episodes, goal_env_spec
from .her import HindsightMemory, HindsightSettings
from .history import RewardHistory
from .losses import ClipLoss, EntropyLoss, PGLoss
from .nets import ElementwiseQ, mlp
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
