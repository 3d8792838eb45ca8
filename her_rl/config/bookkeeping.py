"""Which config keys are run bookkeeping: how a run is carried out, not what it learns.

This one table decides, for every key that is not part of the experiment:

* resume and ``load=``: a bookkeeping key may differ from the saved run's value (the change is
  taken and reported); every other key must match, or the command is refused;
* sweep folder names: bookkeeping overrides do not name a job's folder, so rerunning a sweep with a
  larger budget continues the same folders;
* summaries: runs that differ only in bookkeeping keys (and in ``seed``, what a row averages over)
  fall into one row, except the success thresholds (``JUDGING``);
* TensorBoard's HParams: bookkeeping overrides are not logged as hyperparameters (thresholds are).

A key here is a top-level key or a whole table (``budget`` covers ``budget.env_steps`` and every
other key under it), or one key of a group (``LEAVES``). ``resume`` and ``load`` say what to do with a run; they are never compared
and always taken from the command.
"""

from __future__ import annotations

from typing import Any

from her_rl.config.schema import TOP

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
    wildcards), from the top-level schema ``tables`` (``her_rl.config.schema.TOP``)."""
    out = [*VERBS, *KEYS, *LEAVES]
    for table in TABLES:
        out += [f"{table}.{key}" for key in tables.get(table, {})]
    return out


def exclude_keys() -> list[str]:
    """Resolver ``${bookkeeping_keys:}`` in conf/config.yaml: the keys left out of folder names."""
    return leaf_keys(TOP)
