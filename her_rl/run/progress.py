"""Live progress of a training run: a one-line bar in a terminal, a short plain line in a log.

The fraction shown is that of whichever budget is further along: env steps (``budget.env_steps``)
or, when set, wall time (``budget.wall_time_s``); the run stops when either is spent, so the bar
reaches 100% exactly when the run ends at its budget. A run that stops early (solved, a signal, an
error) ends the bar with a word saying so instead of the percentage.

In a terminal the bar is redrawn in place and fits the terminal width (parts are dropped, least
useful first, rather than cut mid-word). Outside a terminal (a log file, a pipe), and for the jobs
of a parallel sweep (whose bars would overwrite each other on one line), a plain line is written
every ``LOG_EVERY_S`` seconds and once at the end. ``progress=false`` writes nothing.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Callable, TextIO

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode

from her_rl.errors import printable

LOG_EVERY_S = 10.0  # outside a terminal: a plain line this often (and one at the end)
REDRAW_S = 0.1      # in a terminal: redraw at most this often (a new evaluation redraws at once)
LABEL_WIDTH = 24    # the job's name is cut to this many characters
BAR_WIDTH = (6, 30)  # the bar itself: dropped below the first, never wider than the second
STATUS = ("solved", "done", "time up", "stopped")  # how a run ended: its env-step budget is "done"

_ACTIVE: list["Progress"] = []  # the bar on screen, cleared before a warning is printed


def clear_line() -> None:
    """Wipe the bar from the terminal line (it is redrawn on the next update), so that a message
    printed now starts on a clean line."""
    for bar in _ACTIVE:
        bar.clear()


def warn(message: str) -> None:
    clear_line()  # a warning starts on a clean line, not after the progress bar
    print(printable(f"her-run: warning: {message}"), file=sys.stderr, flush=True)


def job_label(algo: str, env: str) -> tuple[str, bool]:
    """The name shown for this run, and whether other jobs may write to the same terminal at once.

    A single run is ``algo/env``; a sweep job is ``#<job number> <its folder name>`` (the overrides
    the sweep varies), and runs in parallel unless Hydra's basic (sequential) launcher runs it."""
    if not HydraConfig.initialized():
        return f"{algo}/{env}", False
    hc = HydraConfig.get()
    if hc.mode != RunMode.MULTIRUN:
        return f"{algo}/{env}", False
    launcher = str(hc.launcher.get("_target_", ""))
    return f"#{hc.job.num} {Path(hc.runtime.output_dir).name}", not launcher.endswith("BasicLauncher")


def shorten(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 2, 1)] + ".."


def count(n: float) -> str:
    """Env steps in 4 characters or so: 300, 10.8k, 5M, 1.23M."""
    if n < 1000:
        return f"{n:.0f}"
    if n < 999_500:
        return f"{n / 1e3:.3g}k"
    return f"{n / 1e6:.3g}M"


def clock_time(seconds: float) -> str:
    seconds = int(max(seconds, 0))
    h, rest = divmod(seconds, 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60}:{rest % 60:02d}"


def number(value: float) -> str:
    """A success rate or a return, short: 0.84, 9.50, 19.5, -123."""
    if abs(value) >= 100:
        return f"{value:.0f}"
    return f"{value:.1f}" if abs(value) >= 10 else f"{value:.2f}"


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _columns(stream: TextIO) -> int:
    env = os.environ.get("COLUMNS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    try:
        return os.get_terminal_size(stream.fileno()).columns or 80
    except (AttributeError, ValueError, OSError):
        return 80


class Progress:
    """Progress of one run. ``update`` after each iteration, ``close(status)`` once at the end.

    ``step`` and ``elapsed`` are the run's totals (a resumed run counts its earlier part); the
    speed is measured over this process only."""

    def __init__(self, env_steps: int, wall_time_s: float | None = None, *, step: int = 0, elapsed: float = 0.0,
                 label: str = "", enabled: bool = True, plain: bool = False, stream: TextIO | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.stream = stream if stream is not None else sys.stderr
        self.mode = "off" if not enabled else "plain" if plain or not _isatty(self.stream) else "bar"
        self.total, self.wall = int(env_steps), wall_time_s
        self.label = shorten(label, LABEL_WIDTH)
        self.step, self.elapsed = step, elapsed
        self.first_step, self.first_elapsed = step, elapsed
        self.metrics: dict[str, float] = {}
        self.clock = clock
        self.last_draw = clock()  # plain lines: the first one LOG_EVERY_S after the start
        self.drawn = False
        encoding = (getattr(self.stream, "encoding", None) or "").lower().replace("-", "")
        self.unicode = encoding == "utf8"  # block characters for the bar, else "#"
        if self.mode == "bar":
            _ACTIVE.append(self)

    # -- numbers ---------------------------------------------------------------------------------

    def fraction(self) -> float:
        parts = [self.step / self.total if self.total > 0 else 1.0]
        if self.wall:
            parts.append(self.elapsed / self.wall)
        return min(max(parts), 1.0)

    def rate(self) -> float | None:
        seconds = self.elapsed - self.first_elapsed
        return (self.step - self.first_step) / seconds if seconds > 0 and self.step > self.first_step else None

    def remaining(self) -> float | None:
        """Seconds until the first budget runs out, at the speed so far."""
        rate = self.rate()
        left = [(self.total - self.step) / rate] if rate else []
        if self.wall:
            left.append(self.wall - self.elapsed)
        return max(min(left), 0.0) if left else None

    # -- output ----------------------------------------------------------------------------------

    def update(self, step: int, elapsed: float, **metrics: float | None) -> None:
        """New totals; ``eval=`` / ``train=`` (success rate in goal envs, else mean return) when known."""
        self.step, self.elapsed = step, elapsed
        fresh_eval = metrics.get("eval") is not None
        self.metrics.update({k: float(v) for k, v in metrics.items() if v is not None})
        if self.mode == "off":
            return
        now = self.clock()
        wait = LOG_EVERY_S if self.mode == "plain" else REDRAW_S
        if now - self.last_draw >= wait or (self.mode == "bar" and (fresh_eval or not self.drawn)):
            self._write(self.line(None))
            self.last_draw = now

    def close(self, status: str = "stopped") -> None:
        """The final state: the status word instead of the percentage, then a new line."""
        if self in _ACTIVE:
            _ACTIVE.remove(self)
        if self.mode != "off":
            self._write(self.line(status), end="\n")
            self.mode = "off"

    def clear(self) -> None:
        if self.mode == "bar" and self.drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self.drawn = False

    def _write(self, text: str, end: str = "") -> None:
        if self.mode == "bar":
            self.stream.write("\r" + text + "\x1b[K" + end)
            self.drawn = not end
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def line(self, status: str | None) -> str:
        """The bar (terminal) or the plain line (log) for the current state; ``status`` when ended."""
        frac = self.fraction()
        if status is None:
            left = self.remaining()
            head = f"{frac * 100:3.0f}%" if self.mode == "bar" else f"{frac * 100:.0f}%"  # the bar: fixed width
            when = clock_time(self.elapsed) + "<" + (clock_time(left) if left is not None else "?")
        else:
            head, when = status, clock_time(self.elapsed)
            frac = 1.0 if status != "stopped" else frac
        rate = self.rate()
        steps = f"{count(self.step)}/{count(self.total)}"
        parts = [  # (text, rank) in the order shown; a narrow terminal drops the lowest ranks first
            (steps if self.mode == "bar" else f"{steps} steps", 4),
            (when, 3),
            (f"{count(rate)}/s" if rate else "", 2),
            (f"eval={number(self.metrics['eval'])}" if "eval" in self.metrics else "", 5),
            (f"train={number(self.metrics['train'])}" if "train" in self.metrics else "", 1),
        ]
        parts = [(text, rank) for text, rank in parts if text]
        if self.mode != "bar":
            return " ".join([self.label, head] + [text for text, _ in parts]).strip()
        return self._fit(head, frac, parts, _columns(self.stream) - 1)  # the last column would wrap

    def _fit(self, head: str, frac: float, parts: list[tuple[str, int]], width: int) -> str:
        label = f"{self.label} " if self.label else ""
        while True:
            tail = " ".join(text for text, _ in parts)
            room = width - len(label) - len(head) - len(tail) - 3  # the two "|" and a space
            droppable = [p for p in parts if p[1] <= 3]  # the steps and the evaluation stay
            if room >= BAR_WIDTH[0] or not droppable:
                break
            parts.remove(min(droppable, key=lambda p: p[1]))
        if room < BAR_WIDTH[0]:  # too narrow for a bar: the numbers alone, cut at the edge
            return f"{label}{head} {tail}"[:width].rstrip()
        return f"{label}{head}|{self._bar(frac, min(room, BAR_WIDTH[1]))}| {tail}".rstrip()

    def _bar(self, frac: float, width: int) -> str:
        if not self.unicode:
            return ("#" * round(frac * width)).ljust(width)
        full, part = divmod(int(frac * width * 8), 8)
        return ("█" * full + (" ▏▎▍▌▋▊▉"[part] if full < width else "")).ljust(width)[:width]
