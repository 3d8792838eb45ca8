"""The progress display: its numbers, its width in a terminal, its plain lines in a log."""

import io

import pytest

from her_rl.run import progress as progress_module
from her_rl.run.progress import LOG_EVERY_S, Progress, clear_line, clock_time, count, number


class Terminal(io.StringIO):
    encoding = "utf-8"

    def isatty(self):
        return True


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def _screen(text: str) -> list[str]:
    """What each redraw leaves on the line: split on \\r and \\n, ANSI codes dropped."""
    import re

    text = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", text)
    return [line for line in re.split(r"[\r\n]", text) if line]


def _run(bar: Progress, clock: Clock, steps: int, every: int, seconds_per_step: float, **metrics):
    for step in range(every, steps + 1, every):
        clock.now = step * seconds_per_step
        bar.update(step, clock.now, **metrics)


def test_numbers_are_short():
    assert [count(n) for n in (300, 10_800, 30_000, 999_999, 5_000_000, 1_234_567)] == \
        ["300", "10.8k", "30k", "1M", "5M", "1.23M"]
    assert [clock_time(s) for s in (9.7, 65, 16_719)] == ["0:09", "1:05", "4:38:39"]
    assert [number(v) for v in (0.84, 1.0, 19.54, -123.4)] == ["0.84", "1.00", "19.5", "-123"]


def test_fraction_is_that_of_the_budget_further_along():
    bar = Progress(1000, 10.0, enabled=False)
    bar.update(100, 5.0)
    assert bar.fraction() == pytest.approx(0.5)  # the wall budget binds
    bar.update(800, 6.0)
    assert bar.fraction() == pytest.approx(0.8)  # now the env steps do
    assert bar.remaining() == pytest.approx(200 / (800 / 6.0))  # 200 steps at the speed so far (< 4 s of wall)
    alone = Progress(5_000_000, None, enabled=False)
    alone.update(50_000, 10.0)
    assert alone.fraction() == pytest.approx(0.01) and alone.remaining() == pytest.approx(990.0)


def test_a_resumed_run_counts_its_speed_from_where_this_process_started():
    bar = Progress(10_000, None, step=4000, elapsed=100.0, enabled=False)
    bar.update(5000, 110.0)
    assert bar.rate() == pytest.approx(100.0) and bar.fraction() == pytest.approx(0.5)


@pytest.mark.parametrize("columns", [80, 100, 60])
@pytest.mark.parametrize("label", ["her_dqn/bitflip", "#12 algo.lr=0.000123,algo.polyak=0.9,seed=2"])
def test_terminal_bar_fits_the_width_with_the_evaluation_visible(monkeypatch, columns, label):
    monkeypatch.setenv("COLUMNS", str(columns))
    out, clock = Terminal(), Clock()
    bar = Progress(5_000_000, None, label=label, stream=out, clock=clock)
    _run(bar, clock, 40_000, 400, 0.001, train=0.31)
    bar.update(40_400, 40.4, eval=0.84)
    lines = _screen(out.getvalue())
    assert lines and max(len(line) for line in lines) <= columns - 1
    assert "eval=0.84" in lines[-1]
    assert lines[-1].count("/s") <= 1  # the speed once
    assert "1%" in lines[-1] and "40.4k/5M" in lines[-1]


def test_solved_run_ends_the_bar_saying_so(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    out, clock = Terminal(), Clock()
    bar = Progress(30_000, None, label="her_dqn/bitflip", stream=out, clock=clock)
    _run(bar, clock, 10_800, 400, 0.001, eval=0.5)
    bar.update(10_800, 10.8, eval=0.96)
    bar.close("solved")
    assert out.getvalue().endswith("\n")
    last = _screen(out.getvalue())[-1]
    assert last.startswith("her_dqn/bitflip solved|") and "36%" not in last and "10.8k/30k" in last
    assert "eval=0.96" in last and "█" * 10 in last  # a finished bar, full


def test_outside_a_terminal_a_short_plain_line_every_few_seconds():
    out, clock = io.StringIO(), Clock()  # isatty() is False
    bar = Progress(1_000_000, None, label="#3 n=4,seed=1", stream=out, clock=clock)
    _run(bar, clock, 100_000, 100, 0.001, eval=0.5, train=0.25)  # 100 s of updates, 1000 of them
    bar.close("done")
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue() and "\x1b" not in out.getvalue()
    assert len(lines) == int(100 / LOG_EVERY_S) + 1  # one every LOG_EVERY_S and the last
    assert all(len(line) < 120 for line in lines)
    assert lines[0] == "#3 n=4,seed=1 1% 10k/1M steps 0:10<16:30 1k/s eval=0.50 train=0.25"
    assert lines[-1].startswith("#3 n=4,seed=1 done 100k/1M steps 1:40")


def test_progress_false_writes_nothing():
    for stream in (Terminal(), io.StringIO()):
        bar = Progress(1000, None, enabled=False, stream=stream)
        bar.update(500, 1.0, eval=1.0)
        bar.close("solved")
        assert stream.getvalue() == ""


def test_parallel_jobs_write_plain_lines_even_in_a_terminal():
    out, clock = Terminal(), Clock()
    bar = Progress(1000, None, label="#0 n=3", plain=True, stream=out, clock=clock)
    bar.update(10, 0.1)
    bar.close("solved")
    assert out.getvalue() == "#0 n=3 solved 10/1k steps 0:00 100/s\n"


def test_a_warning_clears_the_bar_first(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    out = Terminal()
    bar = Progress(1000, None, label="x", stream=out, clock=Clock())
    bar.update(10, 0.1)
    assert bar in progress_module._ACTIVE
    clear_line()
    assert out.getvalue().endswith("\r\x1b[K")
    bar.close("stopped")
    assert bar not in progress_module._ACTIVE and _screen(out.getvalue())[-1].startswith("x stopped|")
