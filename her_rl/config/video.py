"""The ``video`` keys: their defaults, the short form ``video=true``, and when they are accepted.

The config key is a table (``video.enabled``, ``video.episodes``, ...); :func:`expand_overrides` turns
``video=true`` into ``video.enabled=true`` as the command line is composed, because an OmegaConf bool
cannot also hold ``video.episodes``; :func:`options` is their one check. Videos are recorded from a
saved run (``load=``): :mod:`her_rl.saved.video` records.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from her_rl.errors import ConfigError


def _config_defaults() -> dict[str, Any]:
    """The ``video`` settings of conf/config.yaml: written there once, for her-run and for Python callers."""
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


def options(current: Mapping[str, Any], overrides: list[str] | None) -> dict[str, Any]:
    """The one check of the ``video`` keys, for training and ``load=`` alike: the table this command
    records with (:data:`DEFAULTS` under what was given; the bare bool ``video=true`` of a Python
    caller's dict counts as ``video.enabled``). Refused in one line: video keys on a training command
    (videos are recorded from a saved run), and ``video.episodes=5`` alone, which would record nothing.
    Values are checked by the schema."""
    value = current.get("video")
    table = {**DEFAULTS, **({"enabled": value} if isinstance(value, bool) else dict(value or {}))}
    given = _given(overrides)
    if not current.get("load") and (given or table["enabled"] is True):
        raise ConfigError("video keys need load=RUN_DIR: videos are recorded from a trained run "
                          "(her-run load=RUN_DIR video=true)")
    if given and table["enabled"] is False and not {"video", "video.enabled"} & set(given):
        raise ConfigError(f"{given[0]} is given but video is off: add video=true to record")
    return table


__all__ = ["DEFAULTS", "expand_overrides", "options"]
