"""Your own env: ``env=gym env.id=some.module:EnvName-v0``, gymnasium's ``module:id`` convention.

Importing ``some.module`` is what registers ``EnvName-v0`` (``gymnasium.register`` at import time).
her-rl imports such a module at exactly one place, :func:`import_env_module`, and only for an id the
user gave: on the command line (or in ``her_rl.train``'s overrides). A checkpoint or saved config
(``resume=``, ``load=``, ``her_rl.load``) never imports a module: :func:`registered_id` refuses an id
whose module is not imported yet, and a resume asks for the id on its command line, each in one line
saying how to name it.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import os
import sys
from typing import Iterable

import gymnasium as gym

from her_rl.envs.families import family_of, load, split_id
from her_rl.errors import ConfigError, outside, raised_by_code

MISSING = "???"  # OmegaConf's mandatory value, as a resolved config holds it (env=gym's id)


class _UserFolders(importlib.abc.MetaPathFinder):
    """Top-level modules of the folders a user's env module was imported from, found last.

    The folder is on ``sys.path`` only while that module imports (first, as ``python -m`` puts it). After,
    a module the env imports later (a helper beside it) is still found here, yet the folder is on no search
    path: a ``hydra_plugins/`` folder in it never joins Hydra's plugin namespace, whose scan imports every
    module there, and a library her-rl imports later never resolves to a file of the same name in it."""

    def __init__(self) -> None:
        self.folders: list[str] = []

    def find_spec(self, name, path=None, target=None):  # noqa: ANN001, ANN201  (importlib's protocol)
        if path is not None:  # a submodule: its package's own __path__ finds it
            return None
        for folder in self.folders:
            spec = importlib.machinery.PathFinder.find_spec(name, [folder])
            if spec is not None and spec.loader is not None:
                return spec
        return None


_USER_FOLDERS = _UserFolders()


def import_env_module(env_id: str) -> None:
    """Import the module an id names (the user asked for it), then check that it registered the id."""
    module, name = split_id(env_id)
    if module is None:
        return
    family = family_of(env_id)
    if family is not None:  # gymnasium_robotics:PointMaze_UMaze-v3: as quiet as the plain id
        load(family, f"env.id '{env_id}'")
    here = os.getcwd()
    ours = "" not in sys.path and here not in sys.path
    if ours:  # as `python -m`: modules of the current folder, first for this import
        sys.path.insert(0, here)
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as exc:
        missing = f" (module '{exc.name}' not found)" if exc.name and exc.name != module else ""
        raise ConfigError(f"env.id '{env_id}': cannot import module '{module}'{missing}; it must be importable "
                          "from the current directory or an installed package (check PYTHONPATH)") from None
    except BaseException as exc:  # noqa: BLE001  (the user's module may raise anything at import, sys.exit() too)
        if not raised_by_code(exc):
            raise
        why = outside(" ".join(f"{type(exc).__name__}: {exc}".split())[:300])
        raise ConfigError(f"env.id '{env_id}': importing module '{module}' failed: {why}") from None
    finally:
        if ours:
            if here in sys.path:
                sys.path.remove(here)
            if here not in _USER_FOLDERS.folders:
                _USER_FOLDERS.folders.append(here)
            if _USER_FOLDERS not in sys.meta_path:
                sys.meta_path.append(_USER_FOLDERS)
    if name not in gym.registry:
        raise ConfigError(f"env.id '{env_id}': module '{module}' was imported but registers no env '{name}' "
                          f"(call gymnasium.register(id='{name}', entry_point=...) at its top level)")


def registered_id(env_id: str) -> str:
    """The id to hand to gymnasium, without importing anything: a ``module:`` id must have been
    imported by :func:`import_env_module` (or by the user's own Python code) first."""
    if env_id in (None, "", MISSING):  # env=gym names no env of its own: never guess one
        raise ConfigError("env=gym needs env.id=<gymnasium id>, e.g. env.id=CartPole-v1, or your own env as "
                          "env.id=your.module:YourEnv-v0")
    module, name = split_id(env_id)
    if module is not None and module not in sys.modules:
        raise ConfigError(f"env.id '{env_id}' names module '{module}', which her-rl imports only when you name it: "
                          f"give env.id={env_id} on the command line (or import {module} before her_rl.load)")
    if name not in gym.registry:
        raise ConfigError(f"unknown gymnasium env id '{env_id}' (check env.id; e.g. CartPole-v1, Acrobot-v1, "
                          "or your own env as env.id=your.module:YourEnv-v0)")
    return name


def ids_given(overrides: Iterable[str] | None) -> list[str]:
    """The ``env.id`` values of command-line overrides (every value of a sweep) that name a module."""
    if not overrides:
        return []
    # lazy: `import her_rl` (this module's importer) loads no Hydra
    from hydra.core.override_parser.overrides_parser import OverridesParser

    found = []
    for override in OverridesParser.create().parse_overrides(list(overrides)):
        if override.key_or_group != "env.id" or override.is_delete():
            continue
        values = override.sweep_string_iterator() if override.is_sweep_override() else [override.value()]
        found += [str(v) for v in values if split_id(str(v))[0] is not None]
    return found


def import_given(overrides: Iterable[str] | None) -> None:
    """Import the modules that the given overrides name in ``env.id``."""
    for env_id in ids_given(overrides):
        import_env_module(env_id)
