"""Checks on a composed config, run before anything is built, trained or written.

``validate`` resolves the config, checks every value against its group's rules
(``her_rl.config.schema``), builds the env the way training builds it to read its spaces
(``probe_env``) and checks that the algorithm fits them (``her_rl.config.registry.check_pairing``).
Every problem becomes a :class:`ConfigError` with one line that says what is wrong and what is
accepted; the CLI prints it and exits with status 2 instead of a traceback.
"""

from __future__ import annotations

import copy
import json
import re
import warnings
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from her_rl.config import schema
from her_rl.errors import ConfigError, one_line, outside
from her_rl.config.registry import EnvSpaces, check_pairing
from her_rl.rules import RuleError


def resolved(cfg: DictConfig | dict[str, Any], overrides: list[str] | None = None) -> dict[str, Any]:
    """The config as plain containers with every interpolation resolved; ``overrides``: the command's,
    to name the ``~KEY`` that deleted a key an interpolation needs."""
    if isinstance(cfg, dict):
        return cfg
    try:
        return OmegaConf.to_container(cfg, resolve=True)
    except OmegaConfBaseException as exc:
        needed = re.match(r"Interpolation key '([^']+)' not found", str(getattr(exc, "msg", "")))
        line = schema.deleted_by(needed.group(1), overrides) if needed else None
        if line:
            raise ConfigError(f"{exc.full_key} needs {needed.group(1)}, which was deleted with {line}") from None
        raise ConfigError(f"cannot resolve the config: {one_line(exc)}") from None


_HELD: dict[tuple[str, str], list] = {}  # warnings each probe raised, until the run passes its checks
_PROBED: dict[tuple[str, str], EnvSpaces] = {}  # one probe per env config and process: a sweep checks each variant, then its jobs plan


def by_size(size: Any, table: dict[Any, Any]) -> Any:
    """``${by_size:${n},{30: a, 4096: b}}``: the value of the smallest bound >= ``size`` (a setting
    chosen by the size of the task, as the bit-flip tuned file chooses its network by n).

    A size past every bound takes the last value and one that is not an integer the first: the size's
    own rule (``n`` in her_rl/envs/bitflip.py) then refuses it with its one line."""
    bounds = sorted(table, key=int)
    try:
        size = int(size)
    except (TypeError, ValueError):
        return table[bounds[0]]
    return next((table[b] for b in bounds if size <= int(b)), table[bounds[-1]])


def forget_probes() -> None:
    """Forget the env spaces probed so far in this process (the next check builds the env again)."""
    _PROBED.clear()


def _probe_failure(env: dict[str, Any], exc: ConfigError) -> ConfigError:
    """make_vec's one line, told as the probe tells it: which packages, which kwargs."""
    import gymnasium as gym

    cause, env_id, kwargs = exc.__cause__, env["id"], dict(env.get("kwargs") or {})
    if cause is None:  # an unknown or unimported id, a missing extra: make_vec's own line says it
        return exc
    if isinstance(cause, gym.error.DependencyNotInstalled):
        return ConfigError(f"env.id '{env_id}' needs packages that are not installed: {outside(one_line(cause))}")
    if isinstance(cause, (TypeError, ValueError)):
        why = outside(one_line(cause).split(" was raised from the environment creator")[0])  # gymnasium repeats kwargs
        return ConfigError(f"env.kwargs={kwargs} rejected by '{env_id}': {why}")
    return ConfigError(f"cannot make env '{env_id}' with env.kwargs={kwargs}: {outside(one_line(cause))}")


def probe_env(env: dict[str, Any]) -> EnvSpaces:
    """Build the env of the ``env`` group as training builds it (``her_rl.envs.make_vec``, one
    copy), read its spaces, close it.

    This is how goal-ness is known: a Dict observation with observation/achieved_goal/desired_goal
    and a ``compute_reward`` on the env, whatever the env's name.
    """
    import gymnasium as gym
    from gymnasium import spaces

    from her_rl.envs import make_vec
    from her_rl.envs.custom import registered_id
    from her_rl.envs.families import ensure_registered
    from her_rl.rl.goal import ARRAY_SPACES, GOAL_KEYS, episode_horizon, extra_keys, goal_carrier

    ensure_registered(env["id"], env.get("name"))  # Fetch ids: gymnasium-robotics registers them, or one line
    # Only registered ids, never an import here: a "module:Env-v0" id's module must already be imported.
    key = (json.dumps(env, sort_keys=True, default=str), repr(gym.registry[registered_id(env["id"])]))
    if key in _PROBED:
        return _PROBED[key]
    with warnings.catch_warnings(record=True) as said:  # shown only once the env passes: none before a refusal
        try:
            made = make_vec(env, 1, training=True)  # env.start_in_gripper: refused here for an env without a block
        except ConfigError as exc:
            raise _probe_failure(env, exc) from None
        try:
            obs, act = made.single_observation_space, made.single_action_space
            goal = (isinstance(obs, spaces.Dict) and all(k in obs.spaces for k in GOAL_KEYS)
                    and all(isinstance(obs[k], ARRAY_SPACES) for k in GOAL_KEYS)  # FrankaKitchen's are dicts per task
                    and callable(getattr(goal_carrier(made), "compute_reward", None)))
            if goal:
                extra_keys(obs, f"env {env['id']}")  # a key the networks cannot read: one line before the run folder
            elif isinstance(obs, spaces.Dict) and not all(isinstance(obs.spaces.get(k), ARRAY_SPACES)
                                                          for k in ("observation", "desired_goal")):
                raise ConfigError(
                    f"env {env['id']}: no learner of her-rl reads its observations, a Dict with keys "
                    f"{sorted(obs.spaces)[:8]} whose observation and desired_goal are not both arrays; her-rl reads "
                    "Box, Discrete or MultiBinary observations or a goal env's Dict of arrays (flatten yours with "
                    "gymnasium.wrappers.FlattenObservation in a module of your own and name that env.id)")
            # The env's first reset and step, checked by her_rl.envs.checks: a fault is one line before
            # anything is written, not after the run folder is taken.
            made.reset(seed=0)
            actions = copy.deepcopy(made.action_space)
            actions.seed(0)
            made.step(actions.sample())
            try:
                horizon = episode_horizon(made, env)
            except Exception:  # noqa: BLE001  (a user's attribute that raises or is no number: the horizon is unknown)
                horizon = None
        finally:
            made.close()
    if len(_PROBED) >= 32:
        _PROBED.clear()
        _HELD.clear()
    _HELD[key] = said
    _PROBED[key] = EnvSpaces(observation_space=obs, action_space=act, goal_env=bool(goal), horizon=horizon)
    return _PROBED[key]


def check_device(name: str) -> None:
    import torch

    if name == "cuda" and torch.version.cuda is None:
        raise ConfigError(f"device=cuda, but the installed torch {torch.__version__} is a CPU build without CUDA: "
                          "install a CUDA build of torch (docs: GPU training), or use device=cpu or device=auto")
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"device=cuda, but torch {torch.__version__} (CUDA {torch.version.cuda}) finds no CUDA device "
                          "(no GPU, or its driver is missing or too old); use device=cpu or device=auto")


def interpolations(cfg: DictConfig | dict[str, Any]) -> dict[str, str]:
    """``{key: "${other}"}`` for values set by interpolation, to name where a bad value came from."""
    if isinstance(cfg, dict):
        return {}
    found: dict[str, str] = {}

    def walk(node: Any, prefix: str) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                walk(value, f"{prefix}{key}.")
        elif isinstance(node, str) and "${" in node:
            found[prefix[:-1]] = node
    walk(OmegaConf.to_container(cfg, resolve=False), "")
    return found


def check(data: dict[str, Any], sources: dict[str, str] | None = None) -> EnvSpaces:
    """Check a resolved config that holds every key the run needs (``sources``: the interpolation each
    value came from, to name it in an error); raise ConfigError on the first invalid value; return the
    env's probed spaces."""
    from her_rl.rl.memory import check_env_copies  # her_rl.rl loads torch: her-run imports this module at its start

    try:
        schema.check(data)
    except RuleError as exc:
        source = (sources or {}).get(exc.key)
        raise (exc.from_source(source) if source else exc) from None
    check_device(data["device"])
    env_spaces = probe_env(data["env"])
    check_pairing(data["algo"]["name"], data["env"]["name"], data["env"]["id"], env_spaces)
    # training and load= both evaluate in this many copies; the learner sizes its own training copies
    episodes = int(data["eval"]["episodes"])
    check_env_copies(episodes, env_spaces.observation_space, env_spaces.action_space,
                     f"a batched env of {episodes:,} evaluation copies of {data['env']['id']}", "eval.episodes")
    show_held_warnings()
    return env_spaces


def show_held_warnings() -> None:
    """The warnings the env probes raised (gymnasium's env checker, the env's own), shown once the run
    passed every check: a refused run's one line is all it prints."""
    for key, said in _HELD.items():
        for w in said:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno, w.file, w.line)
        _HELD[key] = []


def validate(cfg: DictConfig | dict[str, Any], overrides: list[str] | None = None, required: bool = True) -> EnvSpaces:
    """Raise ConfigError on the first missing key (``overrides``: the command's, to name a ``~KEY``
    that deleted one; ``required=False``: checked already) or invalid value; return the env's probed
    spaces. A saved config may predate a hyperparameter: only the run's own keys are required."""
    data = resolved(cfg, overrides)
    if required:
        schema.check_required(data, overrides, learner=False)
    return check(data, interpolations(cfg))
