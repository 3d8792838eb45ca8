"""The errors her-rl reports to the user as one line, and the exit status ``her-run`` gives each.

Bad input (a config value, a run folder, a checkpoint file) is caught before anything is
written; the other two end a run that had started.
"""

from __future__ import annotations

import signal
import unicodedata
from typing import Any


WORD_MAX = 200  # an echoed value past this many characters is shortened to its ends


def one_line(text: Any) -> str:
    """``text`` with every run of whitespace (newlines too) made one space."""
    return " ".join(str(text).split())


def printable(text: Any) -> str:
    """``text`` as one line a terminal shows as written: control and format characters escaped as
    Python writes them (an ANSI sequence in a value is not run by the terminal), whitespace runs made
    one space, and an over-long run of non-spaces (a value from a huge argv) cut to its ends."""
    text = str(text)
    if len(text) > 20 * WORD_MAX:  # a 300 MB value: its ends are what is shown, so only they are escaped
        text = f"{text[:10 * WORD_MAX]} … {text[-10 * WORD_MAX:]}"
    escaped = "".join(c.encode("unicode_escape").decode("ascii")
                      if c not in "\n\t " and unicodedata.category(c) in ("Cc", "Cf", "Cs", "Zl", "Zp") else c
                      for c in text)
    words = [w if len(w) <= WORD_MAX else f"{w[:WORD_MAX - 50]}…{w[-49:]}" for w in one_line(escaped).split(" ")]
    line = " ".join(words)
    return line if len(line) <= 8 * WORD_MAX else f"{line[:7 * WORD_MAX]}…{line[-WORD_MAX:]}"


class ConfigError(ValueError):
    """A bad configuration, reported to the user as one clear line (no traceback)."""

    exit_code = 2


class CheckpointError(ConfigError):
    """A checkpoint file that cannot be used, named with the reason (one line)."""


class OutputError(RuntimeError):
    """A result could not be written (full disk, unwritable folder): the final checkpoint,
    ``results.json``, ``eval.json`` or a video. The line says what is kept."""

    exit_code = 5


class NonFiniteError(RuntimeError):
    """Training produced a non-finite loss or weight; the run stopped without saving it."""

    exit_code = 3


class EnvError(RuntimeError):
    """The env failed (its constructor, reset, step, render, close or compute_reward raised) or returned
    what its spaces do not allow; the message names the env and the field. Exit 2 before training
    starts, 4 once it has (the run folder keeps its last checkpoint, so it can be resumed)."""

    exit_code = 2
    TRAINING_EXIT_CODE = 4

    def __init__(self, message: str, exit_code: int | None = None):
        super().__init__(one_line(message))
        if exit_code is not None:
            self.exit_code = exit_code


class Interrupt(KeyboardInterrupt):
    """A stop her-rl raises itself on a signal (a Ctrl-C, SIGTERM): told apart from a KeyboardInterrupt
    an env raises, which is the env's fault."""


def raised_by_code(exc: BaseException) -> bool:
    """Whether ``exc``, caught around a call into an env or other foreign code, came from that code:
    anything but her-rl's own :class:`Interrupt` and a Ctrl-C under Python's own SIGINT handler."""
    if isinstance(exc, Interrupt) or isinstance(exc, GeneratorExit):
        return False
    if isinstance(exc, KeyboardInterrupt):
        return signal.getsignal(signal.SIGINT) is not signal.default_int_handler  # her-rl's handler: not a Ctrl-C
    return True


__all__ = ["CheckpointError", "ConfigError", "EnvError", "Interrupt", "NonFiniteError", "OutputError", "one_line",
           "printable", "raised_by_code"]
