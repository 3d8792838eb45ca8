"""A run's scalars as plain text: ``metrics.jsonl`` in its run folder, beside ``tb/``.

One JSON object a line, one line per env step at which anything was logged, steps increasing::

    {"step": 12800, "wall_time": 1767225600.123, "charts/SPS": 2113.5, "losses/td_loss": 0.04, "eval/success_rate": 0.93}

``step`` is the env step, ``wall_time`` the Unix time (seconds) its last value was logged, and
every other key a tag as TensorBoard shows it (``charts/*``, ``losses/*``, ``eval/*``); a
non-finite value is ``null``. Lines are appended as the run goes (a step's line once the step is
complete). The file is flushed (no fsync) at every evaluation, before every checkpoint is written
and when the run ends, so a killed run keeps every line its last checkpoint covers (perhaps with a
cut last line, which the reader skips). A run that starts in a folder that already has the file
keeps only the lines before the step it continues from (as TensorBoard's ``purge_step``): no step
appears twice, and none is lost.

So a run killed (even by SIGKILL) and resumed has the same ``metrics.jsonl`` as one that never
stopped, line for line and value for value, except for what measures the clock rather than the
training: ``wall_time`` and the tags in :data:`WALL_CLOCK_TAGS` (``charts/SPS``, env steps per
second). Every other tag (losses, training episodes, epsilon, evaluations) is a function of the
seed and the checkpointed state (on CPU, as the run itself).

On resume a line that is not a JSON object with an integer ``step`` (bytes that are not UTF-8,
a line cut short) is dropped: the file is repaired to its good lines rather than refused.

:func:`read_metrics` reads it back, tag by tag; for run folders written before the file existed
it reads the TensorBoard events instead.
"""

from __future__ import annotations

import json
import logging
import math
import time
from pathlib import Path
from typing import Any, Callable, NamedTuple

from her_rl.folder.atomic import remove_stale_temps, write_atomic_text
from her_rl.folder.parse import json_value

METRICS = "metrics.jsonl"
WALL_CLOCK_TAGS = ("charts/SPS",)
"""Tags that time the run: they differ between a resumed run and one that never stopped."""


class Point(NamedTuple):
    step: int
    wall_time: float
    value: float


class MetricsWriter:
    """Appends the scalars of a run to ``folder/metrics.jsonl`` (see the module docstring)."""

    def __init__(self, folder: Path, start_step: int = 0):
        self.path = Path(folder) / METRICS
        remove_stale_temps(self.path)  # a rewrite a killed run left half done (a folder of that name stays)
        self.damaged: list[int] = []  # numbers of the damaged lines dropped on open (a cut last line is not told)
        if self.path.exists():  # drop what a run logged after the state this one continues from
            lines = _lines(self.path, skip_bad=self.damaged) if start_step > 0 else []
            write_atomic_text(self.path, "".join(text + "\n" for text, line in lines if line["step"] < start_step))
        self.file = open(self.path, "a", encoding="utf-8")
        self.pending: dict[str, Any] | None = None  # the line of the current step, written when it is complete
        self.on_line: Callable[[dict[str, Any]], None] | None = None  # told each line as it is written (trackers)

    def add(self, values: dict[str, float], step: int) -> None:
        if self.pending is not None and self.pending["step"] != step:
            self._write()
        if self.pending is None:
            self.pending = {"step": int(step), "wall_time": 0.0}
        self.pending["wall_time"] = round(time.time(), 3)
        self.pending.update((tag, _number(value)) for tag, value in values.items())
        if any(tag.startswith("eval/") for tag in values):  # the numbers a crashed run must not lose
            self.flush()

    def _write(self) -> None:
        if self.pending is not None:
            self.file.write(json.dumps(self.pending) + "\n")
            if self.on_line is not None:
                self.on_line(self.pending)
            self.pending = None

    def flush(self) -> None:
        self._write()
        self.file.flush()

    def close(self) -> None:
        if not self.file.closed:
            self.flush()
            self.file.close()


def _number(value: Any) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None


def _lines(path: Path, skip_bad: list[int] | None = None) -> list[tuple[str, dict[str, Any]]]:
    """(text, object) of every line; a last line cut short by a kill is skipped, any other bad
    line (not UTF-8, not a JSON object with an integer step) is a ValueError naming it, or with
    ``skip_bad`` (a list) skipped too and its number appended there."""
    raw = path.read_bytes().split(b"\n")
    if raw[-1] == b"":  # the file ends with a newline, as a complete one does
        raw.pop()
    out = []
    for number, data in enumerate(raw, 1):
        try:
            text = data.decode("utf-8")  # decoded line by line: a bad byte damages one line, not the file
            line = json_value(text)
            if not isinstance(line, dict) or type(line.get("step")) is not int:
                raise ValueError
        except ValueError:  # UnicodeDecodeError is one
            if number == len(raw):
                continue
            if skip_bad is None:
                raise ValueError(f"{path.name} line {number} is not a JSON object with an integer step") from None
            skip_bad.append(number)
            continue
        out.append((text, line))
    return out


def read_metrics(folder: str | Path) -> dict[str, list[Point]]:
    """Every scalar the run in ``folder`` logged: tag -> points, steps increasing (a step logged
    twice: the later value; ``null`` reads as NaN). From ``metrics.jsonl``, else (a folder from an
    older version) from ``tb/``; ``{}`` when the folder has neither."""
    folder = Path(folder)
    if not (folder / METRICS).is_file():
        return _from_events(folder / "tb") if (folder / "tb").is_dir() else {}
    by_tag: dict[str, dict[int, Point]] = {}
    for _, line in _lines(folder / METRICS):
        step, wall = line["step"], float(line.get("wall_time") or 0.0)
        for tag, value in line.items():
            if tag not in ("step", "wall_time"):
                by_tag.setdefault(tag, {})[step] = Point(step, wall, math.nan if value is None else float(value))
    return {tag: [points[s] for s in sorted(points)] for tag, points in by_tag.items()}


def _from_events(tb_dir: Path) -> dict[str, list[Point]]:
    # lazy: tensorboard is heavy, and only runs that logged to tb/ alone need it (her-tune and
    # her-summary import this module at their start)
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    logging.getLogger("tensorboard").setLevel(logging.ERROR)  # "No path found after ..." at the end of a file
    if any(p.is_symlink() or not p.is_file() for p in tb_dir.iterdir() if "tfevents" in p.name):
        return {}  # an event file that is a FIFO would block the read for ever; a link may lead anywhere
    acc = EventAccumulator(str(tb_dir), size_guidance={"scalars": 0})
    acc.Reload()
    out = {}
    for tag in acc.Tags().get("scalars", []):
        if not tag.startswith("hparams/"):  # the final metrics, logged at step 0; results.json has them
            points = {e.step: Point(int(e.step), float(e.wall_time), float(e.value)) for e in acc.Scalars(tag)}
            out[tag] = [points[s] for s in sorted(points)]
    return out
