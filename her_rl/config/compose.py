"""The config ``her-run`` composes from a command's overrides, and the one line for what Hydra refuses.

Before Hydra composes, :func:`check_group_names` refuses an override that would make Hydra run code
and an unknown algo, env or tuned name (sweeps included), listing the choices; :func:`hydra_message`
turns an error Hydra or OmegaConf raised while composing into one line. :func:`compose` is the
composition ``her-run``, ``her_rl.train`` and scripts share.
"""

from __future__ import annotations

import re
from pathlib import Path

from omegaconf import DictConfig

from her_rl.config import schema
from her_rl.config.overrides import check_overrides, sweep_values
from her_rl.config.registry import algo_info, check_env_name
from her_rl.config.video import expand_overrides
from her_rl.errors import ConfigError, one_line

_EXTRAS = {"hydra/launcher/ray": "ray", "hydra/launcher/joblib": "launchers", "hydra/sweeper/optuna": "tune",
           "hydra/launcher/submitit_local": "launchers", "hydra/launcher/submitit_slurm": "launchers"}


def compose(overrides: list[str] | None = None, hydra: bool = False) -> DictConfig:
    """The config ``her-run`` would see for these overrides (``hydra``: with its ``hydra`` node, as the
    command line's checks need it). An override that would make Hydra run code is refused first."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module

    check_overrides(list(overrides or []))  # the command line's refusals, for Python callers too
    with initialize_config_module(config_module="her_rl.conf", version_base="1.3"):
        return hydra_compose(config_name="config", overrides=expand_overrides(list(overrides or [])),
                             return_hydra_config=hydra)


def _check_tuned_name(name: str) -> None:
    """``tuned`` is an optional group (absent for most algo/env pairs), so Hydra would silently skip a
    misspelt explicit choice: refuse it here instead."""
    if name == "None":
        raise ConfigError("tuned=null is not accepted; pass ~tuned to run without the tuned file")
    names = sorted(p.stem for p in (Path(__file__).parents[1] / "conf" / "tuned").glob("*.yaml"))
    if name not in names:
        raise ConfigError(f"unknown tuned file '{name}'; valid choices: {', '.join(names)}")


def check_group_names(overrides: list[str]) -> None:
    """Reject an override that would make Hydra run code (:func:`her_rl.config.overrides.check_overrides`), then
    unknown algo/env/tuned names with one line listing the choices, before Hydra composes (sweeps
    included: ``algo=ppo,reinforce``, ``env=choice(cartpole,nope)``)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    check_overrides(overrides)
    for override in OverridesParser.create().parse_overrides(list(overrides)):
        if override.is_delete() and override.key_or_group in schema.GROUPS:  # Hydra would fail on ${algo}_${env}
            raise schema.missing(override.key_or_group, [override.input_line])
        check = {"algo": algo_info, "env": check_env_name, "tuned": _check_tuned_name}.get(override.key_or_group)
        if check is None or override.is_delete():
            continue
        for name in sweep_values(override):
            check(str(name))


def _malformed(overrides: list[str]) -> str | None:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    for override in overrides:
        try:
            parser.parse_overrides([override])
        except Exception:
            return override
    return None


def hydra_message(exc: BaseException, overrides: list[str]) -> str:
    """One line for an error Hydra or OmegaConf raised while composing the config."""
    from hydra.errors import MissingConfigException, OverrideParseException

    text = str(exc)
    if isinstance(exc, OverrideParseException):
        bad = _malformed(overrides)
        return (f"malformed override {bad!r}: " if bad else "malformed override: ") + one_line(text.splitlines()[0]) \
            + " (override grammar: https://hydra.cc/docs/advanced/override_grammar/basic)"
    found = re.match(r"Could not override '([^']+)'", text)
    if found:
        key, cause = found.group(1), str(exc.__cause__ or "")
        if "not in struct" in cause or "not in '" in cause:
            return f"unknown config key '{key}' (her-run --cfg job lists the keys; +{key}=VALUE adds a new one)"
        return f"cannot set '{key}': {one_line(cause.splitlines()[0] if cause else text)}"
    if isinstance(exc, MissingConfigException):
        lines = [line.strip() for line in text.split("Config search path")[0].splitlines() if line.strip()]
        head, options = lines[0], [line for line in lines[1:] if not line.startswith("Available")]
        extra = next((extra for path, extra in _EXTRAS.items() if f"'{path}'" in head), None)
        hint = f" (it comes with her-rl's {extra} extra: pip install -e \".[{extra}]\")" if extra else ""
        return head + (f"; available: {', '.join(options)}" if options else "") + hint
    return one_line(text.split("Config search path")[0])


__all__ = ["check_group_names", "compose", "hydra_message"]
