"""Which config a resumed (or ``load=``-evaluated) run uses: the saved one, plus safe changes.

The saved run's resolved config is the base, so a run folder is resumed without retyping its
overrides. Keys given again are compared with it: equal values are no-ops, changed values of safe
keys (the bookkeeping keys of her_rl/config/bookkeeping.py) are taken and reported,
and any other change is refused naming the key, because it would silently mix two experiments
(the optimiser, the networks and the replay memory were built for the saved values). Reading the
saved config off a run folder is her_rl/folder/resume.py's.
"""

from __future__ import annotations

import copy
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser

from her_rl.config import bookkeeping, schema
from her_rl.errors import CheckpointError, ConfigError
from her_rl.rules import show

GROUPS = ("algo", "env")

_MISSING = object()


def is_safe(key: str, extra: tuple[str, ...] = ()) -> bool:
    return bookkeeping.is_bookkeeping(key) or key.split(".")[0] in extra


def _get(cfg: dict[str, Any], key: str) -> Any:
    node: Any = cfg
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return _MISSING
        node = node[part]
    return node


def _set(cfg: dict[str, Any], key: str, value: Any) -> None:
    *parents, last = key.split(".")
    node = cfg
    for part in parents:
        node = node.setdefault(part, {})
    if value is _MISSING:
        node.pop(last, None)
    else:
        node[last] = copy.deepcopy(value)


def _leaves(cfg: dict[str, Any], prefix: str = "") -> list[str]:
    keys = []
    for key, value in cfg.items():
        if isinstance(value, dict) and value:
            keys += _leaves(value, f"{prefix}{key}.")
        else:
            keys.append(f"{prefix}{key}")
    return keys


def _override_keys(overrides: list[str]) -> list[tuple[str, bool]]:
    """``(key, is_group)`` for each command-line override, parsed with Hydra's own grammar."""
    keys = []
    for override in OverridesParser.create().parse_overrides(list(overrides)):
        key = override.key_or_group
        keys.append((key, "/" in key or key in (*GROUPS, "tuned")))
    return keys


def _text(value: Any) -> str:
    return "(unset)" if value is _MISSING else show(value)


def merge(saved: dict[str, Any], current: dict[str, Any], overrides: list[str] | None,
          verb: str = "resume", extra_safe: tuple[str, ...] = (),
          source: str = "the checkpoint was trained with") -> tuple[dict[str, Any], dict[str, list]]:
    """The effective config and its changes ``{key: [saved, new]}``.

    ``overrides``: the keys given on the command line (Hydra override strings). None means every
    key of ``current`` was given (a config built in Python): then the whole config is compared.
    """
    if overrides is None:
        leaves = list(dict.fromkeys(_leaves(current) + _leaves(saved)))
        keys = [(k, False) for k in sorted(leaves, key=lambda k: k.count("."))]  # top-level keys first
    else:
        keys = _override_keys(overrides)
    effective = copy.deepcopy(saved)
    changes: dict[str, list] = {}

    def refuse(key: str, old: Any, new: Any) -> ConfigError:
        return ConfigError(f"cannot {verb}: {source} {key}={_text(old)}, this run asks for "
                           f"{key}={_text(new)}; only {bookkeeping.DESCRIPTION}{''.join(', ' + k for k in extra_safe)} may "
                           f"differ (start a new run in another folder to change it)")

    for key, is_group in keys:
        if key.split(".")[0] in bookkeeping.VERBS:
            continue
        if is_group:
            if key not in GROUPS:
                raise ConfigError(f"cannot {verb}: the '{key}' group cannot be given again (the saved config "
                                  "already holds its values); drop it from the command")
            old, new = _get(saved, f"{key}.name"), _get(current, f"{key}.name")
            if old != new:
                raise refuse(key, old, new)
            continue
        old, new = _get(saved, key), _get(current, key)
        if old == new or (old is _MISSING and new is _MISSING):
            continue
        if not is_safe(key, extra_safe):
            raise refuse(key, old, new)
        _set(effective, key, new)
        changes[key] = [None if old is _MISSING else old, None if new is _MISSING else new]
    for key in (*bookkeeping.TABLES, *bookkeeping.KEYS, *bookkeeping.VERBS):  # newer than the saved run; verbs
        if key in current and (key in bookkeeping.VERBS or key not in effective):
            effective[key] = copy.deepcopy(current[key])
    return effective, changes


def check_saved(saved: dict[str, Any], path: Any) -> None:
    """The saved run's own config must pass the rules it was started under: a value edited into the
    checkpoint is named as the checkpoint's fault, before this command's changes are merged in."""
    try:
        schema.check(saved["config"])
    except ConfigError as exc:
        raise CheckpointError(f"cannot load checkpoint {path}: its saved config is not valid ({exc})") from None


def describe(changes: dict[str, list]) -> str:
    return ", ".join(f"{k}: {show(old)} -> {show(new)}" for k, (old, new) in changes.items())
