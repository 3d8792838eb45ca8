"""The ``video`` keys: their defaults, the short form ``video=true``, and when they are accepted.

The config key is a table (``video.enabled``, ``video.episodes``, ...); :func:`expand_overrides` turns
``video=true`` into ``video.enabled=true``, because an OmegaConf bool cannot also hold
``video.episodes``. Videos are recorded from a saved run (``load=``): :mod:`her_rl.run.video` records.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from her_rl.errors import ConfigError


def _config_defaults() -> dict[str, Any]:
    """The ``video`` settings of conf/config.yaml: written there once, for her-run and for Python callers."""
    import yaml

    text = (Path(__file__).parents[1] / "conf" / "config.yaml").read_text(encoding="utf-8")
    return dict(yaml.safe_load(text)["video"])


DEFAULTS: dict[str, Any] = _config_defaults()
_SHORT = re.compile(r"^(\+{0,2})video=(true|false)$", re.IGNORECASE)


def expand_overrides(overrides: list[str]) -> list[str]:
    """``video=true`` / ``video=false`` -> ``video.enabled=...``; every other override unchanged."""
    out = []
    for override in overrides:
        short = _SHORT.match(override)
        out.append(f"{short.group(1)}video.enabled={short.group(2).lower()}" if short else override)
    return out


def _given(overrides: list[str] | None) -> list[str]:
    """The ``video`` keys among command-line overrides (``video``, ``video.episodes``, ...)."""
    keys = [o.lstrip("+~").split("=", 1)[0] for o in overrides or []]
    return [k for k in keys if k.split(".")[0] == "video"]


def refuse_without_load(cfg: dict[str, Any], overrides: list[str] | None) -> None:
    """Videos are recorded from a saved run: ``video`` keys on a training command are refused."""
    value = cfg.get("video")
    wanted = value is True or (isinstance(value, Mapping) and value.get("enabled") is True)  # dict or DictConfig
    if not cfg.get("load") and (_given(overrides) or wanted):
        raise ConfigError("video keys need load=RUN_DIR: videos are recorded from a trained run "
                          "(her-run load=RUN_DIR video=true)")


def check_given(options: dict[str, Any], overrides: list[str] | None) -> None:
    """``video.episodes=5`` alone would record nothing: say so instead of evaluating silently."""
    given = _given(overrides)
    if given and not options["enabled"] and not {"video", "video.enabled"} & set(given):
        raise ConfigError(f"{given[0]} is given but video is off: add video=true to record")


def settings(value: Any) -> dict[str, Any]:
    """The ``video`` table from a config value: a table, or the bare bool ``video=true`` leaves when
    given without :func:`expand_overrides` (Python callers); values are checked by the schema."""
    if value is None:
        return dict(DEFAULTS)
    if isinstance(value, bool):
        return {**DEFAULTS, "enabled": value}
    return {**DEFAULTS, **dict(value)}


__all__ = ["DEFAULTS", "check_given", "expand_overrides", "refuse_without_load", "settings"]
