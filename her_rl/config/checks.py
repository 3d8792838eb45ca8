"""Checks on a composed config, run before anything is built, trained or written.

``validate`` resolves the config, checks every value against its group's rules
(``her_rl.config.schema``), builds the env the way training builds it to read its spaces
(``probe_env``) and checks that the algorithm fits them (``her_rl.config.registry.check_pairing``).
Every problem becomes a :class:`ConfigError` with one line that says what is wrong and what is
accepted; the CLI prints it and exits with status 2 instead of a traceback.
"""

from __future__ import annotations

import re
from typing import Any

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from her_rl.config import schema
from her_rl.errors import ConfigError, one_line
from her_rl.config.registry import check_pairing
from her_rl.envs.probe import EnvSpaces, probe_env, show_held_warnings
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


def check_device(name: str) -> None:
    import torch  # lazy: her-run imports this module at its start, before torch

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
    from her_rl.rl.memory import check_env_copies  # lazy: torch (her-run imports this module at its start)

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


def validate(cfg: DictConfig | dict[str, Any], overrides: list[str] | None = None, required: bool = True) -> EnvSpaces:
    """Raise ConfigError on the first missing key (``overrides``: the command's, to name a ``~KEY``
    that deleted one; ``required=False``: checked already) or invalid value; return the env's probed
    spaces. A saved config may predate a hyperparameter: only the run's own keys are required."""
    data = resolved(cfg, overrides)
    if required:
        schema.check_required(data, overrides, learner=False)
    return check(data, interpolations(cfg))
