"""Which config a resumed (or ``load=``-evaluated) run uses: the saved one, plus the changes of the
bookkeeping keys.

A bookkeeping key says how a run is carried out, not what it learns. This one table decides, for
every key that is not part of the experiment:

* resume and ``load=``: a bookkeeping key may differ from the saved run's value (the change is
  taken and reported); every other key must match, or the command is refused, because it would
  silently mix two experiments (the optimiser, the networks and the replay memory were built for the
  saved values);
* sweep folder names: bookkeeping overrides do not name a job's folder, so rerunning a sweep with a
  larger budget continues the same folders;
* summaries: runs that differ only in bookkeeping keys (and in ``seed``, what a row averages over)
  fall into one row, except the success thresholds (``JUDGING``);
* TensorBoard's HParams: bookkeeping overrides are not logged as hyperparameters (thresholds are).

A key here is a top-level key or a whole table (``budget`` covers ``budget.env_steps`` and every
other key under it), or one key of a group (``LEAVES``). ``resume`` and ``load`` say what to do with a
run; they are never compared and always taken from the command. The saved run's resolved config is
the base (:func:`merge`), so a run folder is resumed without retyping its overrides; reading it off a
run folder is her_rl/folder/rundir.py's.
"""

from __future__ import annotations

import copy
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser

from her_rl.config import checks
from her_rl.errors import CheckpointError, ConfigError
from her_rl.rules import show


TABLES = ("budget", "eval", "checkpoint", "guard", "video", "wandb", "mlflow")
"""Tables whose every key is bookkeeping."""
KEYS = ("progress", "device", "threads", "logger")
"""Top-level bookkeeping keys."""
LEAVES = ("algo.critic_threads", "algo.actor_half")
"""Keys inside a group that are bookkeeping: they change how fast a run goes, never its numbers."""
VERBS = ("resume", "load")
"""What to do with the run: never compared with a saved run, always taken from this command."""
JUDGING = ("eval.success_threshold", "eval.return_threshold")
"""Bookkeeping (a resumed run may raise the bar), but what "solved" means: runs judged by different
thresholds are not averaged into one summary row, and HParams shows the threshold."""
NOT_A_SETTING = ("seed", "experiment")
"""Not bookkeeping, but not what a summary row is keyed by either: a row averages over seeds, and an
``experiment`` preset is seen through the values it sets."""

DESCRIPTION = ("budget.*, eval.*, checkpoint.*, guard.*, video.*, wandb.*, mlflow.*, progress, device, threads, logger, "
               "algo.critic_threads and algo.actor_half")


def top_key(key: str) -> str:
    return key.lstrip("+~").split("=", 1)[0].split(".")[0]


def is_bookkeeping(key: str) -> bool:
    """``budget.env_steps``, ``+guard.max_skips``, ``progress``, ``resume``, ...: True."""
    top = top_key(key)
    return top in TABLES or top in KEYS or top in VERBS or key.lstrip("+~").split("=", 1)[0] in LEAVES


def is_setting(key: str) -> bool:
    """Whether an override's key distinguishes one experiment from another (summary rows, HParams)."""
    name, top = key.lstrip("+~").split("=", 1)[0], top_key(key)
    if name in JUDGING:
        return True
    return not (is_bookkeeping(key) or top in NOT_A_SETTING or top == "hydra" or top.startswith("hydra/"))


def leaf_keys(tables: dict[str, Any]) -> list[str]:
    """Every bookkeeping key as Hydra's ``override_dirname.exclude_keys`` needs it (exact keys, no
    wildcards), from the top-level schema ``tables`` (``her_rl.config.checks.TOP``)."""
    out = [*VERBS, *KEYS, *LEAVES]
    for table in TABLES:
        out += [f"{table}.{key}" for key in tables.get(table, {})]
    return out


def exclude_keys() -> list[str]:
    """Resolver ``${bookkeeping_keys:}`` in conf/config.yaml: the keys left out of folder names."""
    return leaf_keys(checks.TOP)


GROUPS = ("algo", "env")

_MISSING = object()


def is_safe(key: str, extra: tuple[str, ...] = ()) -> bool:
    return is_bookkeeping(key) or key.split(".")[0] in extra


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
                           f"{key}={_text(new)}; only {DESCRIPTION}{''.join(', ' + k for k in extra_safe)} may "
                           f"differ (start a new run in another folder to change it)")

    for key, is_group in keys:
        if key.split(".")[0] in VERBS:
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
    for key in (*TABLES, *KEYS, *VERBS):  # newer than the saved run; verbs
        if key in current and (key in VERBS or key not in effective):
            effective[key] = copy.deepcopy(current[key])
    return effective, changes


def check_saved(saved: dict[str, Any], path: Any) -> None:
    """The saved run's own config must pass the rules it was started under: a value edited into the
    checkpoint is named as the checkpoint's fault, before this command's changes are merged in."""
    try:
        checks.check_values(saved["config"])
    except ConfigError as exc:
        raise CheckpointError(f"cannot load checkpoint {path}: its saved config is not valid ({exc})") from None


def describe(changes: dict[str, list]) -> str:
    return ", ".join(f"{k}: {show(old)} -> {show(new)}" for k, (old, new) in changes.items())
