"""The configs her-run takes from the code, put into Hydra's ConfigStore by :func:`store`.

A learner is a dataclass of its hyperparameters, and its class is the one place a hyperparameter is
written: the field (``her_rl.rules.setting``) holds the config's default, what the key may be and
what it means. So there is no YAML file per algorithm: ``algo=NAME`` finds one stored config per
registered algorithm (``name``, ``_target_`` and every field's default), and the config reference
page reads the meanings with :func:`meanings`. Adding a hyperparameter is adding a field.

The same holds for the push and drag settings: their defaults are ``her_rl.envs.table_settings``'s,
which a Python caller of the env gets too, and conf/env/push.yaml and drag.yaml take them as
``env.kwargs`` from the stored ``_push_kwargs`` / ``_drag_kwargs``.
"""

from __future__ import annotations

from dataclasses import MISSING, fields
from typing import Any

from her_rl.algos.base import RUNTIME_ARGS
from her_rl.config.registry import ALGOS, resolve_target, target_of
from her_rl.rules import meanings_of


def _plain(value: Any) -> Any:
    """A default as a config holds it: tuples become lists."""
    return [_plain(v) for v in value] if isinstance(value, (list, tuple)) else value


def defaults(name: str) -> dict[str, Any]:
    """Algo ``name``'s hyperparameters and their defaults, in the class's field order."""
    out = {}
    for f in fields(resolve_target(name, None)):
        if f.name in RUNTIME_ARGS or not f.init:
            continue
        if f.default is MISSING:  # a hyperparameter needs a default to be a config key
            raise TypeError(f"{name}: hyperparameter field '{f.name}' has no default")
        out[f.name] = _plain(f.default)
    return out


def node(name: str) -> dict[str, Any]:
    """The config ``algo=NAME`` selects."""
    return {"name": name, "_target_": target_of(name), **defaults(name)}


def meanings(name: str) -> dict[str, str]:
    """Hyperparameter -> what it means: the words of the nearest class that declares the field with
    some, so a learner that changes a default keeps the base's words unless it writes its own."""
    words = meanings_of(resolve_target(name, None))
    return {key: words.get(key, "") for key in defaults(name)}


def store() -> None:
    """Put every registered algorithm's config and the table tasks' settings into Hydra's ConfigStore
    (idempotent)."""
    from hydra.core.config_store import ConfigStore

    from her_rl.envs.table_settings import DEFAULTS, DRAG_DEFAULTS

    cs = ConfigStore.instance()
    for name in ALGOS:
        cs.store(group="algo", name=name, node=node(name))
    cs.store(name="_push_kwargs", node=dict(DEFAULTS))
    cs.store(name="_drag_kwargs", node=dict(DRAG_DEFAULTS))


__all__ = ["defaults", "meanings", "node", "store"]
