"""The public Python API: train a run, load its policy, evaluate it.

```python
import her_rl

results = her_rl.train(["algo=her_dqn", "env=bitflip", "n=8"], out_dir="outputs/flip8")
policy = her_rl.load("outputs/flip8")
print(her_rl.evaluate(policy, episodes=100)["success_rate"])  # goal envs; "return" for any task
```

This module loads torch, Hydra and the training runner; ``import her_rl`` stays light (no torch) because
the package imports this module only when one of its names is first used (``her_rl.__getattr__``).
"""

from __future__ import annotations

import numbers
from pathlib import Path
from typing import Any, Sequence

from her_rl.config.checks import MAX_ENVS
from her_rl.envs import make_vec
from her_rl.errors import ConfigError, one_line
from her_rl.run.evaluation import evaluate as evaluate_agent, success_rule_of
from her_rl.run.plan import Evaluation, gate
from her_rl.run.runner import start
from her_rl.saved.evaluate import evaluate_checkpoint
from her_rl.saved.policy import Policy, load


def train(overrides: Sequence[str] = (), out_dir: str | Path | None = None) -> dict[str, Any]:
    """The run ``her-run`` makes of these overrides: the same gate (:func:`her_rl.run.plan.gate`), run
    folder rules (``out_dir`` plays ``hydra.run.dir``; None: a new folder under ``outputs/``), logs and
    checkpoints. Returns the results dict that is also written to ``results.json`` (``load=PATH``
    among the overrides: the evaluation report instead). Bad input raises :class:`her_rl.ConfigError`
    with the one line ``her-run`` would print."""
    if isinstance(overrides, (str, bytes)) or not isinstance(overrides, Sequence):
        raise ConfigError(f"overrides must be a list of strings such as ['n=8'], got {type(overrides).__name__}")
    if not isinstance(out_dir, (str, Path, type(None))):
        raise ConfigError(f"out_dir must be a folder path (a str or Path) or None, got {type(out_dir).__name__}")
    wrong = next(((i, o) for i, o in enumerate(overrides) if not isinstance(o, str)), None)
    if wrong is not None:  # str(None) or str(8) would reach Hydra as an override it cannot explain
        index, value = wrong
        raise ConfigError(f"overrides[{index}] is {one_line(repr(value))[:60]} ({type(value).__name__}); each override "
                          "must be a string such as 'n=8'")
    checked = gate(list(overrides), out_dir)
    try:
        return evaluate_checkpoint(checked) if isinstance(checked, Evaluation) else start(checked)
    except SystemExit as exc:  # her-run's exit after a stop signal: a Python caller gets a KeyboardInterrupt
        if isinstance(exc.code, int) and exc.code > 128:
            raise KeyboardInterrupt(f"stopped by signal {exc.code - 128}; the run folder keeps its last "
                                    "checkpoint (resume=true continues it)") from None
        raise


def evaluate(policy: Policy, episodes: int = 100, seed: int = 0) -> dict[str, float]:
    """Greedy episodes of ``policy`` in its run's env, all played at once in one vector env:
    ``return``, ``length`` (means), ``terminated_rate`` (episodes that ended in a terminal state rather
    than at the time limit) and, where the env tells success (``info["is_success"]``, ``info["success"]``,
    ``env.success_key``, else a goal env's ``compute_reward`` at the goal), ``success_rate`` (at each
    episode's last step) and ``any_success_rate`` (at any step); a task without success has neither.
    The same ``seed`` gives the same episodes."""
    if not isinstance(policy, Policy):
        raise ConfigError(f"evaluate needs the Policy of her_rl.load(run_folder), got {type(policy).__name__}")
    if not _is_int(episodes) or not 1 <= episodes <= MAX_ENVS:
        raise ConfigError(f"episodes={episodes!r} is not allowed: episodes must be an integer in [1, {MAX_ENVS}]")
    if not _is_int(seed) or seed < 0:
        raise ConfigError(f"seed={seed!r} is not allowed: seed must be an integer >= 0")
    episodes, seed = int(episodes), int(seed)
    envs = make_vec(policy.config["env"], episodes, seed=seed)
    try:
        result = evaluate_agent(policy.agent, envs, seed, success_rule_of(policy.agent, policy.config["env"]))
    finally:
        envs.close()
    return {"episodes": episodes, **result}


def _is_int(value: Any) -> bool:
    """An integer (numpy's too), not a bool: ``True`` episodes would be one by accident."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


__all__ = ["Policy", "evaluate", "load", "train"]
