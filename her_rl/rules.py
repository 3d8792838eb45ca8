"""Value rules: what one config key may be, and the check that names the key when it is not.

A rule names the allowed values (``an integer in [1, 4096]``); a violation is a ConfigError of one
line naming the key, the value and what is allowed. Types are strict: ``k=1.5`` is refused rather
than truncated, ``maybe`` is not a boolean, ``1e6`` is a float (write ``1000000``).

Each rule is written once, on what it configures: a learner's hyperparameter is a dataclass field
made by :func:`setting` (its default, its rule and what it means), read back by :func:`rules_of` and
:func:`meanings_of`, and keys that constrain each other are a learner's ``check_config``; an env
constructor's argument carries its rule in its annotation (``Annotated[int, integer(1, 4096)]``),
read back by :func:`arg_rules`. ``her_rl.config.checks`` reads them for the command line, the
constructors call them for Python callers, and the docs' configuration page is generated from them.
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
import math
import numbers
import os
import typing
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from her_rl.errors import ConfigError, RuleError, show  # noqa: F401  (RuleError: importable from here too)

MAX_SEED = 2**32 - 1  # numpy's SeedSequence and torch both take seeds in [0, 2**32 - 1] here
MAX_ENVS = 4096  # parallel env copies (num_envs, eval.episodes, episodes per cycle)


NAME_MAX, PATH_MAX = 255, 4096  # bytes of one file or folder name, of a whole path (Linux, macOS)


def check_path(key: str, value: Any) -> None:
    """A path the file system can take: a longer name fails (ENAMETOOLONG) only once it is used."""
    raw = os.fsencode(str(value))
    name = max(raw.split(b"/"), key=len)
    if len(name) > NAME_MAX:
        raise ConfigError(f"{key} is not allowed: its name {show(os.fsdecode(name))} has {len(name):,} bytes; a file "
                          f"or folder name may have at most {NAME_MAX}")
    if len(raw) >= PATH_MAX:
        raise ConfigError(f"{key} is not allowed: the path has {len(raw):,} bytes; a path may have at most "
                          f"{PATH_MAX - 1}")


@dataclass(frozen=True)
class Rule:
    allowed: str
    """What is allowed, as it reads after "must be"."""
    ok: Callable[[Any], bool]

    def check(self, key: str, value: Any) -> None:
        if not self.ok(value):
            raise RuleError(key, value, self.allowed)


def check_values(rules: Mapping[str, Rule], values: Mapping[str, Any], prefix: str = "algo.") -> None:
    """Check every key of ``values`` that has a rule (keys without one are the caller's business)."""
    for key, value in values.items():
        if key in rules:
            rules[key].check(f"{prefix}{key}", value)


def setting(default: Any, rule: Rule | None = None, doc: str = "") -> Any:
    """A learner's hyperparameter field: its default (a tuple, never a list: one default shared by every
    instance), what it may be and what it means. A subclass that redeclares the field with a plain default,
    or with no ``rule`` or ``doc`` here, keeps the nearest base's (see :func:`rules_of`); a narrower rule
    there is how a learner takes only some of its base's values."""
    metadata: dict[str, Any] = {}
    if rule is not None:
        metadata["rule"] = rule
    if doc:
        metadata["doc"] = doc
    return dataclasses.field(default=default, metadata=metadata)


def _nearest(cls: type, what: str) -> dict[str, Any]:
    """Field -> its ``setting`` ``what`` in the nearest class of ``cls``'s MRO that declares the field
    with one, in field order."""
    found: dict[str, Any] = {}
    for klass in cls.__mro__:
        own = inspect.get_annotations(klass)  # declared in this class's body, not inherited
        for name, field in vars(klass).get("__dataclass_fields__", {}).items():
            if name in own and what in field.metadata:
                found.setdefault(name, field.metadata[what])
    return {f.name: found[f.name] for f in dataclasses.fields(cls) if f.name in found}


def rules_of(cls: type) -> dict[str, Rule]:
    """Field -> its rule, as the nearest class declaring one gives it."""
    return _nearest(cls, "rule")


def meanings_of(cls: type) -> dict[str, str]:
    """Field -> what it means, as the nearest class declaring it with words gives it."""
    return _nearest(cls, "doc")


@functools.lru_cache(maxsize=None)
def arg_rules(function: Callable) -> dict[str, Rule]:
    """Parameter -> the rule its ``Annotated`` annotation carries (parameters without one are left out)."""
    hints = typing.get_type_hints(function, include_extras=True)
    return {name: extra for name, hint in hints.items() for extra in getattr(hint, "__metadata__", ())
            if isinstance(extra, Rule)}


def _is_int(v: Any) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _is_real(v: Any) -> bool:
    if not isinstance(v, numbers.Real) or isinstance(v, bool):
        return False
    try:
        return math.isfinite(float(v))
    except OverflowError:  # an integer past the float range: no finite number
        return False


def integer(lo: int | None = None, hi: int | None = None) -> Rule:
    if hi is not None:
        text = f"an integer in [{lo}, {hi}]"
    else:
        text = "an integer" if lo is None else f"an integer >= {lo}"
    return Rule(text, lambda v: _is_int(v) and (lo is None or v >= lo) and (hi is None or v <= hi))


def real(lo: float | None = None, hi: float | None = None, lo_open: bool = False, hi_open: bool = False) -> Rule:
    if lo is not None and hi is not None:
        text = f"a number in {'(' if lo_open else '['}{lo}, {hi}{')' if hi_open else ']'}"
    elif lo is not None:
        text = f"a finite number {'>' if lo_open else '>='} {lo}"
    else:
        text = "a finite number"

    def ok(v: Any) -> bool:
        if not _is_real(v):
            return False
        if lo is not None and (v <= lo if lo_open else v < lo):
            return False
        return hi is None or (v < hi if hi_open else v <= hi)
    return Rule(text, ok)


def optional(rule: Rule) -> Rule:
    return Rule(f"null or {rule.allowed}", lambda v: v is None or rule.ok(v))


def choice(*values: Any) -> Rule:
    # compare type too: 1 == True in Python, but `resume=1` is not `resume=true`
    text = "one of " + ", ".join(str(v).lower() if isinstance(v, bool) else str(v) for v in values)
    return Rule(text, lambda v: any(type(v) is type(c) and v == c for c in values))


BOOL = Rule("true or false", lambda v: isinstance(v, bool))
POSITIVE = real(0, lo_open=True)
NON_NEGATIVE = real(0)
UNIT_OPEN_CLOSED = real(0, 1, lo_open=True)  # (0, 1]: discounts, decays, fractions that must be > 0
UNIT = real(0, 1)  # [0, 1]
COUNT = integer(1)
SEED = integer(0, MAX_SEED)
TEXT = Rule("a non-empty string", lambda v: isinstance(v, str) and v != "")
HIDDEN = Rule("a non-empty list of positive integers, e.g. [64, 64]",
              lambda v: isinstance(v, (list, tuple)) and len(v) > 0 and all(_is_int(h) and h >= 1 for h in v))
GRAD_NORM = optional(POSITIVE)  # a negative max norm would flip the gradient's sign in torch
CRITIC_THREADS = integer(1, 2)  # twin critics: one thread each at most
