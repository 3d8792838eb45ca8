"""Checks on a composed config, run before anything is built, trained or written.

``validate`` resolves the config, checks every value against its group's rules
(``her_rl.schema``), builds one env to read its spaces (``probe_env``) and checks that the
algorithm fits them (``her_rl.registry.check_pairing``). Every problem becomes a
:class:`ConfigError` with one line that says what is wrong and what is accepted; the CLI prints it
and exits with status 2 instead of a traceback.
"""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from her_rl import schema
from her_rl.registry import ConfigError, EnvSpaces, check_pairing

GOAL_KEYS = ("observation", "achieved_goal", "desired_goal")


def one_line(text: Any) -> str:
    return " ".join(str(text).split())


def resolved(cfg: DictConfig | dict[str, Any]) -> dict[str, Any]:
    """The config as plain containers with every interpolation resolved."""
    if isinstance(cfg, dict):
        return cfg
    try:
        return OmegaConf.to_container(cfg, resolve=True)
    except OmegaConfBaseException as exc:
        raise ConfigError(f"cannot resolve the config: {one_line(exc)}") from None


def probe_env(env: dict[str, Any]) -> EnvSpaces:
    """Build one env of the ``env`` group, read its spaces, close it.

    This is how goal-ness is known: a Dict observation with observation/achieved_goal/desired_goal
    and a ``compute_reward`` on the unwrapped env, whatever the env's name.
    """
    import gymnasium as gym
    from gymnasium import spaces

    import her_rl.envs  # noqa: F401  (registers her_rl/* ids)
    from her_rl.envs.custom import registered_id
    from her_rl.envs.fetch import ensure_registered

    env_id, kwargs = env["id"], dict(env.get("kwargs") or {})
    ensure_registered(env_id, env.get("name"))  # Fetch ids: gymnasium-robotics registers them, or one line
    # Only registered ids, never an import here: a "module:Env-v0" id's module must already be imported.
    make_id = registered_id(env_id)
    try:
        made = gym.make(make_id, disable_env_checker=True, **kwargs)
    except gym.error.DependencyNotInstalled as exc:
        raise ConfigError(f"env.id '{env_id}' needs packages that are not installed: {one_line(exc)}") from None
    except (TypeError, ValueError) as exc:
        why = one_line(exc).split(" was raised from the environment creator")[0]  # gymnasium repeats the kwargs
        raise ConfigError(f"env.kwargs={kwargs} rejected by '{env_id}': {why}") from None
    except Exception as exc:  # gymnasium and third-party envs raise many types
        raise ConfigError(f"cannot make env '{env_id}' with env.kwargs={kwargs}: {one_line(exc)}") from None
    try:
        obs, act = made.observation_space, made.action_space
        goal = (isinstance(obs, spaces.Dict) and all(k in obs.spaces for k in GOAL_KEYS)
                and callable(getattr(made.unwrapped, "compute_reward", None)))
    finally:
        made.close()
    return EnvSpaces(observation_space=obs, action_space=act, goal_env=bool(goal))


def check_device(name: str) -> None:
    import torch

    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device=cuda but no CUDA device is available; use device=cpu or device=auto")


def _interpolations(cfg: DictConfig | dict[str, Any]) -> dict[str, str]:
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


def validate(cfg: DictConfig | dict[str, Any]) -> EnvSpaces:
    """Raise ConfigError on the first invalid value; return the env's probed spaces."""
    data = resolved(cfg)
    try:
        schema.check(data)
    except schema.RuleError as exc:
        source = _interpolations(cfg).get(exc.key)
        raise (exc.from_source(source) if source else exc) from None
    check_device(data["device"])
    env_spaces = probe_env(data["env"])
    check_pairing(data["algo"]["name"], data["env"]["name"], data["env"]["id"], env_spaces)
    return env_spaces
