"""Where an env id comes from: a family of an optional package, or the user's own module.

Env families that live in optional packages: their ids are registered only once the package is imported.

``env=gym env.id=PointMaze_UMaze-v3`` or ``env.id=PandaReach-v3`` names an env of a family below;
:func:`ensure_registered` (called by ``her_rl.envs.make_vec``, the config check's env probe and
``her_rl.load``) imports the family's package when the id asks for it, so runs on other envs never
import MuJoCo or PyBullet, and a missing extra is one ConfigError line naming the install command.
``env.id=gymnasium_robotics:PointMaze_UMaze-v3`` (gymnasium's ``module:id`` form) names the same env.

- gymnasium-robotics (``gymnasium_robotics``, the ``robotics`` extra): ``Fetch*``, ``PointMaze_*``,
  ``AntMaze_*``, ``HandReach*``, ``HandManipulate*``, ``AdroitHand*``, ``FrankaKitchen*``;
- panda-gym (``panda_gym``, the ``panda`` extra): ``Panda*``.

The packages talk at import and construction: gymnasium-robotics prints a Farama notice about its
Adroit envs on stderr when imported, PyBullet its build time when imported and three ``argv[i]=...``
lines on stdout (from C) for every panda-gym env it builds. :func:`quiet` sends the process's
stdout and stderr to ``/dev/null`` at the file-descriptor level around exactly those calls (the
import, and the construction of a panda-gym env: its ids' entry points are wrapped in
:class:`QuietCreator` when panda-gym is loaded); an error raised inside still comes back as an
exception, and nothing else is silenced.

A user's own env: ``env=gym env.id=some.module:EnvName-v0``, gymnasium's ``module:id`` convention.

Importing ``some.module`` is what registers ``EnvName-v0`` (``gymnasium.register`` at import time).
her-rl imports such a module at exactly one place, :func:`import_env_module`, and only for an id the
user gave: on the command line (or in ``her_rl.train``'s overrides). A checkpoint or saved config
(``resume=``, ``load=``, ``her_rl.load``) never imports a module: :func:`registered_id` refuses an id
whose module is not imported yet, and a resume asks for the id on its command line, each in one line
saying how to name it.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.abc
import importlib.machinery
import os
import re
import sys
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

import gymnasium as gym

from her_rl.errors import ConfigError, outside, raised_by_code


@dataclass(frozen=True)
class Family:
    name: str              # the project, as its docs call it
    pattern: str           # a regular expression the id (without any ``module:``) starts with
    module: str            # the module whose import registers the ids
    extra: str             # her-rl's extra that installs it
    versions: str          # what the extra pins or requires, for the install line
    needs: tuple[str, ...]  # the modules the extra brings, checked in this order (the first missing one is named)
    quiet_construction: bool = False  # construction prints from C: wrap the entry points (QuietCreator)

    @property
    def install(self) -> str:
        return f'pip install -e ".[{self.extra}]" ({self.versions})'


FAMILIES: tuple[Family, ...] = (
    Family("gymnasium-robotics", r"Fetch|PointMaze_|AntMaze_|HandReach|HandManipulate|AdroitHand|FrankaKitchen",
           "gymnasium_robotics", "robotics", "gymnasium-robotics 1.4.2, mujoco 3.3.7", ("mujoco", "gymnasium_robotics")),
    Family("panda-gym", r"Panda", "panda_gym", "panda", "panda-gym >= 3.0.7, pybullet", ("pybullet", "panda_gym"),
           quiet_construction=True),
)


SETTINGS: tuple[tuple[str, str], ...] = (("pick_and_place", r"FetchPickAndPlace"),
                                         ("panda_pick_and_place", r"PandaPickAndPlace"), ("fetch", r"Fetch"),
                                         ("panda", r"Panda"), ("point_maze", r"PointMaze_"),
                                         ("ant_maze", r"AntMaze_"), ("hand", r"Hand"))
"""Kinds of task within the families that may have measured settings of their own, the most specific
first: a tuned file ``conf/tuned/<algo>_<kind>.yaml`` (FetchPickAndPlace, PandaPickAndPlace and the point
mazes have one; the others take ``<algo>_gym``)."""


def settings_names(env_id: str) -> tuple[str, ...]:
    """The tuned-file suffixes whose settings an env of a family takes, most specific first: its kinds
    of task (``pick_and_place``, ``panda_pick_and_place``, ``fetch``, ``panda``, ``point_maze``,
    ``ant_maze``, ``hand``), then ``gym``; none for an env of no family."""
    if family_of(env_id) is None:
        return ()
    name = split_id(env_id)[1]
    return (*(kind for kind, pattern in SETTINGS if re.match(pattern, name)), "gym")


def split_id(env_id: str) -> tuple[str | None, str]:
    """``"pkg.mod:Name-v0"`` -> ``("pkg.mod", "Name-v0")``; a plain id has no module."""
    module, sep, name = str(env_id).rpartition(":")
    return (module, name) if sep and module else (None, str(env_id))


def family_of(env_id: str) -> Family | None:
    """The family an id belongs to: by its name (``PointMaze_UMaze-v3``), or by the module it names
    when that is a family's package (``gymnasium_robotics:PointMaze_UMaze-v3``); else None."""
    module, name = split_id(env_id)
    for family in FAMILIES:
        if module is not None:
            if module == family.module:
                return family
        elif re.match(family.pattern, name):
            return family
    return None


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):  # a closed or detached stream: nothing to flush
            pass


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """File descriptors 1 and 2 (what C code and Python print to) point at ``/dev/null`` inside, and
    warnings are ignored; both are restored on the way out, an exception included. Where the
    descriptors cannot be duplicated (closed, a sandbox) only Python's warnings are silenced."""
    saved: list[tuple[int, int]] = []
    _flush()
    try:
        null = os.open(os.devnull, os.O_WRONLY)
    except OSError:
        null = -1
    try:
        if null >= 0:
            for fd in (1, 2):
                try:
                    saved.append((fd, os.dup(fd)))
                    os.dup2(null, fd)
                except OSError:
                    pass
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        _flush()  # what was printed inside goes to /dev/null, not out after the restore
        for fd, copy in saved:
            os.dup2(copy, fd)
            os.close(copy)
        if null >= 0:
            os.close(null)


class QuietCreator:
    """An env entry point that builds the env of ``target`` (``"module:Class"``) inside :func:`quiet`.
    Picklable (AsyncVectorEnv sends specs to its workers) and with a stable repr (specs are compared
    by repr)."""

    def __init__(self, target: str):
        self.target = target

    def _creator(self) -> Callable[..., gym.Env]:
        with quiet():  # the env's module may import pybullet, which prints its build time
            return gym.envs.registration.load_env_creator(self.target)

    @property
    def metadata(self) -> dict[str, Any]:  # gym.make reads the creator's render modes
        return getattr(self._creator(), "metadata", {})

    def __call__(self, **kwargs: Any) -> gym.Env:
        creator = self._creator()
        with quiet():
            return creator(**kwargs)

    def __repr__(self) -> str:
        return f"QuietCreator({self.target!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, QuietCreator) and other.target == self.target

    def __hash__(self) -> int:
        return hash(self.target)


_WRAPPED: set[str] = set()  # families whose entry points are wrapped


def _check_mujoco(label: str, family: Family) -> None:
    """mujoco 4.x breaks gymnasium-robotics 1.4.x (an AssertionError in ``set_joint_qpos``)."""
    import mujoco  # optional extra: mujoco (gymnasium-robotics)

    version = str(getattr(mujoco, "__version__", "0"))
    if not version.startswith("3."):  # checked before gymnasium_robotics is imported against it
        raise ConfigError(f"{label} needs mujoco 3.x; mujoco {version} is installed: {family.install}")


def load(family: Family, label: str) -> None:
    """Import the family's package (quietly; a no-op once imported); one ConfigError line if it is missing."""
    try:
        if family.extra == "robotics":
            _check_mujoco(label, family)
        for module in family.needs:
            if sys.modules.get(module) is None:  # None: blocked, importing raises ImportError
                with quiet():
                    importlib.import_module(module)
    except ImportError as exc:
        missing = getattr(exc, "name", None) or family.module
        raise ConfigError(f"{label} needs the {family.extra} extra ({missing} is not installed): "
                          f"{family.install}") from None
    except ConfigError:
        raise
    except Exception as exc:  # noqa: BLE001  (a broken install raises anything at import)
        why = outside(" ".join(f"{type(exc).__name__}: {exc}".split())[:300])
        raise ConfigError(f"{label}: importing {family.module} failed ({why}): {family.install}") from None
    if family.quiet_construction and family.module not in _WRAPPED:
        for spec in gym.registry.values():
            if isinstance(spec.entry_point, str) and spec.entry_point.startswith(family.module + "."):
                spec.entry_point = QuietCreator(spec.entry_point)
        _WRAPPED.add(family.module)


def _registered_like(name: str, family: Family) -> list[str]:
    """The family's registered ids that share ``name``'s prefix (``PointMaze_``), dense variants left out."""
    prefix = re.match(family.pattern, name)
    start = prefix.group(0) if prefix else ""
    return sorted(k for k in gym.registry if k.startswith(start) and "Dense" not in k and ":" not in k
                  and re.match(family.pattern, k))


def ensure_registered(env_id: str, name: str | None = None) -> None:
    """Import the package that registers ``env_id`` when the id belongs to a family above.

    Raises a one-line ConfigError naming the install command when the package (or mujoco) cannot be
    imported, when mujoco is a 4.x release (its joint setup breaks gymnasium-robotics 1.4.x: an
    AssertionError in ``set_joint_qpos``), or when the package registers no such id. Other ids are
    left alone (a ``module:id`` of any other module is :func:`import_env_module`'s).
    """
    family = family_of(env_id)
    if family is None:
        return
    label = f"env '{name}'" if name and name != "gym" else f"env.id '{env_id}'"
    load(family, label)
    bare = split_id(env_id)[1]
    if bare not in gym.registry:
        like = _registered_like(bare, family)
        shown = ", ".join(like[:16]) + (f", ... ({len(like)} in all)" if len(like) > 16 else "")
        raise ConfigError(f"unknown {family.name} env id '{env_id}'; {family.module} registers: {shown}")


# A user's own env module (``env.id=some.module:EnvName-v0``).

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
