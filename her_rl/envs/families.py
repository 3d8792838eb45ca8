"""Env families that live in optional packages: their ids are registered only once the package is imported.

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
"""

from __future__ import annotations

import contextlib
import importlib
import os
import re
import sys
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import gymnasium as gym

from her_rl.errors import ConfigError, outside


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


SETTINGS: tuple[tuple[str, str], ...] = (("fetch", r"Fetch"), ("panda", r"Panda"), ("point_maze", r"PointMaze_"),
                                         ("ant_maze", r"AntMaze_"), ("hand", r"Hand"))
"""Kinds of task within the families that may have measured settings of their own: a tuned file
``conf/tuned/<algo>_<kind>.yaml`` (the point mazes have one; the others take ``<algo>_gym``)."""


def settings_names(env_id: str) -> tuple[str, ...]:
    """The tuned-file suffixes whose settings an env of a family takes, most specific first: its kind
    of task (``fetch``, ``panda``, ``point_maze``, ``ant_maze``, ``hand``), then ``gym``; none for an env of no family."""
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
    left alone (a ``module:id`` of any other module is her_rl.envs.custom's).
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
