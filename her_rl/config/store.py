"""The configs her-run takes from the code, put into Hydra's ConfigStore by :func:`store`.

A learner is a dataclass of its hyperparameters, and its class is the one place a hyperparameter is
written: the field's default is the config's default, the string under the field says what it
means, and ``RULES`` says what it may be. So there is no YAML file per algorithm: ``algo=NAME``
finds one stored config per registered algorithm (``name``, ``_target_`` and every field's
default), and the config reference page reads the meanings with :func:`meanings`. Adding a
hyperparameter is adding a field (and its rule).

The same holds for the push and drag settings: their defaults are ``her_rl.envs.table_settings``'s,
which a Python caller of the env gets too, and conf/env/push.yaml and drag.yaml take them as
``env.kwargs`` from the stored ``_push_kwargs`` / ``_drag_kwargs``.
"""

from __future__ import annotations

import ast
import functools
import inspect
import textwrap
from dataclasses import MISSING, fields
from typing import Any

from her_rl.algos.base import RUNTIME_ARGS
from her_rl.config.registry import ALGOS, resolve_target, target_of


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


@functools.lru_cache(maxsize=None)
def _class_docs(cls: type) -> dict[str, str]:
    """Field -> the string literal right under its annotated line, in ``cls``'s own body."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError):  # no source at hand (frozen); the page then says nothing
        return {}
    body = tree.body[0].body
    docs = {}
    for stmt, after in zip(body, body[1:]):
        if (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
                and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)):
            docs[stmt.target.id] = " ".join(after.value.value.split())
    return docs


def meanings(name: str) -> dict[str, str]:
    """Hyperparameter -> what it means: the field's docstring in the nearest class that gives one,
    so a learner that changes a default keeps the base's words unless it writes its own."""
    out: dict[str, str] = {}
    for cls in resolve_target(name, None).__mro__:
        for key, doc in _class_docs(cls).items():
            out.setdefault(key, doc)
    return {key: out.get(key, "") for key in defaults(name)}


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
