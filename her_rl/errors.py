"""The errors her-rl reports to the user as one line, and the exit status ``her-run`` gives each.

Bad input (a config value, a run folder, a checkpoint file) is caught before anything is
written; the other two end a run that had started.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import sys
import unicodedata
from typing import Any, Iterable


WORD_MAX = 200  # an echoed value past this many characters is shortened to its ends
SCREEN_FALLBACK, SCREEN_MIN = 120, 80  # columns where no terminal tells its width; never fewer
OUTSIDE_WORD = 80  # a run of non-spaces this long is a value, an id or a message, not her-rl's own wording
OUTSIDE_LONG = 80  # a marked message from outside longer than this may be cut (a shorter one is read whole)
CUT_TO = 20  # text from outside is cut to no fewer characters than this: its two ends stay recognisable
TRACE = 8  # an env's message, where her-rl's own wording leaves no room for CUT_TO, keeps this trace
# (a key or value of the command line is never cut below CUT_TO: the line would no longer say which is meant)
_MARKS_MAX = 16  # strings whole() and outside() remember, the latest kept
_WHOLE: dict[str, None] = {}
_OUTSIDE: dict[str, None] = {}
_CONTROL = ("Cc", "Cf", "Cs", "Zl", "Zp")


def one_line(text: Any) -> str:
    """``text`` with every run of whitespace (newlines too) made one space."""
    return " ".join(str(text).split())


def _remember(marks: dict[str, None], text: str) -> None:
    marks.pop(text, None)
    marks[text] = None
    while len(marks) > _MARKS_MAX:
        del marks[next(iter(marks))]


def whole(text: str) -> str:
    """``text`` as it is, remembered as a command the user must copy or a path the user needs whole: a
    line :func:`printable` makes of it never cuts it, however wide (a cut command would run another)."""
    if text:
        _remember(_WHOLE, text)
    return text


def outside(text: str) -> str:
    """``text`` as it is, remembered as text from outside her-rl (an env's exception message): a line
    :func:`printable` makes of it that is wider than the screen is cut there first, if it is longer
    than OUTSIDE_LONG."""
    if len(text) > OUTSIDE_LONG:
        _remember(_OUTSIDE, text)
    return text


def screen_width() -> int:
    """Columns of the terminal (``COLUMNS``, else stdout's, else stderr's), SCREEN_FALLBACK where none
    tells (a log file, a pipe), never fewer than SCREEN_MIN."""
    columns = shutil.get_terminal_size((0, 0)).columns
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stderr__.fileno()).columns
        except (AttributeError, ValueError, OSError):
            columns = 0
    return max(SCREEN_MIN, columns or SCREEN_FALLBACK)


def _escaped(text: str, spaces: bool = True) -> str:
    """Control and format characters as Python writes them; ``spaces``: newlines and tabs left as they are."""
    return "".join(c.encode("unicode_escape").decode("ascii")
                   if unicodedata.category(c) in _CONTROL and not (spaces and c in "\n\t") else c for c in text)


def _pieces(text: str, keep: Iterable[str]) -> list[tuple[str, str]]:
    """``text`` as ``(kind, text)`` pieces: ``whole`` (``keep`` and what :func:`whole` marked), ``outside``
    (what :func:`outside` marked) and ``free``, in order."""
    spans: list[tuple[int, int, str]] = []
    for kind, marks in (("whole", [*keep, *_WHOLE]), ("outside", list(_OUTSIDE))):
        for mark in filter(None, marks):
            start, found = text.find(mark), 0
            while start != -1 and found < _MARKS_MAX:  # a huge text of one mark repeated: its first few
                end = start + len(mark)
                if not any(s < end and start < e for s, e, _ in spans):
                    spans.append((start, end, kind))
                    found += 1
                start = text.find(mark, end)
    pieces, at = [], 0
    for start, end, kind in sorted(spans):
        if at < start:
            pieces.append(("free", text[at:start]))
        pieces.append((kind, text[start:end]))
        at = end
    if at < len(text):
        pieces.append(("free", text[at:]))
    return pieces


def _cut(text: str, by: int, least: int = CUT_TO) -> str:
    """``text`` shorter by ``by`` characters (to no fewer than ``least``), its middle made "…"."""
    left = max(least, len(text) - by)
    if left >= len(text):
        return text
    head = (left - 1) * 2 // 3
    return f"{text[:head]}…{text[len(text) - (left - 1 - head):]}"


def printable(text: Any, keep: Iterable[str] = (), width: int | None = None) -> str:
    """``text`` as one line a terminal shows as written, cut to a screen's width where it embeds text
    from outside.

    Control and format characters are escaped as Python writes them (an ANSI sequence in a value is not
    run by the terminal), whitespace runs made one space, an over-long run of non-spaces (a value from a
    huge argv) cut to its ends. While the line is wider than ``width`` (None: :func:`screen_width`), text
    from outside is cut in its middle ("…"), in this order: what :func:`outside` marked (if longer than
    OUTSIDE_LONG: a short message is read whole) and runs of non-spaces of OUTSIDE_WORD characters or
    more (values, ids), each to CUT_TO characters, then what :func:`outside` marked to TRACE; a line still longer than her-rl
    writes itself (8 x WORD_MAX) in its longest stretch of text not kept. Never cut: ``keep`` and what
    :func:`whole` marked (a command the user must copy, a path needed whole; escaped only); nor, but in
    such a line, paths of up to WORD_MAX characters and her-rl's own words: a line of them and of short
    values may stay wider than the screen."""
    text = str(text)
    width = min(screen_width() if width is None else int(width), 8 * WORD_MAX)
    segments: list[list[str]] = []  # [kind, text]: whole, path, outside, value (a long word), word or space
    for kind, piece in _pieces(text, keep):
        if kind == "whole":
            segments.append(["whole", _escaped(piece, spaces=False)])
            continue
        if len(piece) > 20 * WORD_MAX:  # a 300 MB value: its ends are what is shown, so only they are escaped
            piece = f"{piece[:10 * WORD_MAX]}…{piece[-10 * WORD_MAX:]}"
        clean = re.sub(r"\s+", " ", _escaped(piece))
        words = [(w if len(w) <= WORD_MAX else f"{w[:WORD_MAX - 50]}…{w[-49:]}", "/" in w and len(w) <= WORD_MAX)
                 for w in clean.split(" ")]
        if kind == "outside":
            segments.append(["outside", " ".join(w for w, _ in words)])
            continue
        for i, (word, path) in enumerate(words):
            if i:
                segments.append(["space", " "])
            if word:
                segments.append(["path" if path else "value" if len(word) >= OUTSIDE_WORD else "word", word])
    while segments and segments[0][0] == "space":
        segments.pop(0)
    while segments and segments[-1][0] == "space":
        segments.pop()
    over = sum(len(t) for _, t in segments) - width
    # outside text to its ends first, then to a trace where her-rl's own wording leaves it little room
    for kind, least in (("outside", CUT_TO), ("value", CUT_TO), ("outside", TRACE)):
        for segment in sorted((s for s in segments if s[0] == kind and len(s[1]) > least), key=lambda s: -len(s[1])):
            if over <= 0:
                break
            before = len(segment[1])
            segment[1] = _cut(segment[1], over, least)
            over -= before - len(segment[1])
    if over + width > 8 * WORD_MAX:  # still longer than her-rl writes: many short words (or paths) from outside
        runs: list[list[int]] = []
        for i, (kind, _) in enumerate(segments):
            if kind != "whole":
                if runs and runs[-1][-1] == i - 1:
                    runs[-1].append(i)
                else:
                    runs.append([i])
        if runs:
            run = max(runs, key=lambda r: sum(len(segments[i][1]) for i in r))
            merged = "".join(segments[i][1] for i in run)
            segments[run[0]:run[-1] + 1] = [["word", _cut(merged, over)]]
    return "".join(t for _, t in segments)


def show(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 14_000:
        return f"<an integer of about {int(value.bit_length() * 0.30103):,} digits>"  # str() refuses past 4,300
    if isinstance(value, (list, tuple)):  # a huge integer inside a list, too
        return "[" + ", ".join(show(v) if not isinstance(v, str) else repr(v) for v in value) + "]"
    return repr(value) if isinstance(value, str) else str(value)



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


class RuleError(ConfigError):
    """A value outside its rule; ``source`` names the interpolation it came from, if any."""

    def __init__(self, key: str, value: Any, allowed: str, source: str | None = None):
        self.key, self.value, self.allowed = key, value, allowed
        origin = f" (from {source})" if source else ""
        super().__init__(f"{key}={show(value)}{origin} is not allowed: {key} must be {allowed}")

    def from_source(self, source: str) -> RuleError:
        return RuleError(self.key, self.value, self.allowed, source)


class EnvFault(EnvError, ConfigError):
    """An env fault as first raised: exit 2, and a ConfigError too, so that wherever a run is refused
    before it starts (the CLI's checks, a Hydra job before training) it is told as bad input is.
    The trainer re-raises it as a plain EnvError with exit 4 once training has started."""


class FolderBusy(ConfigError):
    """A live her-run holds the folder's lock."""


class VideoError(ConfigError):
    """The env cannot be recorded, or the writer is missing: one line, exit status 2."""


class NoBlockToHold(ConfigError):
    """``env.start_in_gripper`` asked of an env without a Fetch block."""


class Interrupt(KeyboardInterrupt):
    """A stop her-rl raises itself on a signal (a Ctrl-C, SIGTERM): told apart from a KeyboardInterrupt
    an env raises, which is the env's fault."""


def raised_by_code(exc: BaseException) -> bool:
    """Whether ``exc``, caught around a call into an env or other foreign code, came from that code:
    anything but her-rl's own :class:`Interrupt` and a Ctrl-C under Python's own SIGINT handler. A
    ``GeneratorExit`` out of a call is the code's own too (Python throws it only into a suspended generator)."""
    if isinstance(exc, Interrupt):
        return False
    if isinstance(exc, KeyboardInterrupt):
        return signal.getsignal(signal.SIGINT) is not signal.default_int_handler  # her-rl's handler: not a Ctrl-C
    return True


__all__ = ["CheckpointError", "ConfigError", "EnvError", "EnvFault", "FolderBusy", "Interrupt", "NoBlockToHold",
           "NonFiniteError", "OutputError", "RuleError", "VideoError", "one_line", "outside", "printable",
           "raised_by_code", "screen_width", "show", "whole"]
