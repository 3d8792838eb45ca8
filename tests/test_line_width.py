"""Every line her-rl prints fits a screen where it embeds text from outside (a user env's exception, a
value or key from the command line, a value read from a run folder): that text is cut in its middle
("…") so the line is no wider than the terminal (COLUMNS here; 120 where no terminal tells, never below
80). A command the user must copy (the continue line) and a path the user needs are never cut."""

import os
import signal
import sys
import time
import uuid

import pytest

from her_rl import errors
from her_rl.errors import printable
from her_rl.run.progress import warn
from her_rl.run.signals import StopSignals, resume_command

WIDTH = 120  # the width where no terminal tells (set: the tests may run in one)
MESSAGE = "boom " * 20_000  # 100,000 characters of short words: no long run of non-spaces to spot

USER_ENV = '''
import gymnasium as gym
import numpy as np
from gymnasium import spaces

MESSAGE = "boom " * 20_000


class Failing(gym.Env):
    def __init__(self, fail_in="init"):
        if fail_in == "init":
            raise ValueError(MESSAGE)
        self.observation_space = spaces.Box(-1, 1, (2,), np.float32)
        self.action_space = spaces.Discrete(2)
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(2, np.float32), {}

    def step(self, action):
        self.t += 1
        if self.t > 100:
            raise ValueError(MESSAGE)
        return np.zeros(2, np.float32), float(self.np_random.random()), False, False, {}


gym.register("{name}/Failing-v0", entry_point=Failing, max_episode_steps=20)
'''


@pytest.fixture
def width(monkeypatch):
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    return WIDTH


@pytest.fixture
def user_env(tmp_path, monkeypatch):
    """A module of the user's in the current folder whose env raises a 100,000-character message."""
    name = f"lw_{uuid.uuid4().hex[:6]}"  # short: the id is named twice in a line
    (tmp_path / f"{name}.py").write_text(USER_ENV.replace("{name}", name))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield f"{name}:{name}/Failing-v0"
    sys.modules.pop(name, None)


def lines_of(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def one_error_line(p, code: int) -> str:
    assert "Traceback" not in p.stderr, p.stderr[-2000:]
    assert p.returncode == code, (p.returncode, p.stderr[-2000:])
    lines = lines_of(p.stderr)
    assert len(lines) == 1 and lines[0].startswith("her-run: error: "), p.stderr[-2000:]
    return lines[0]


def test_a_user_env_exception_of_100000_characters_is_one_line_within_the_width(her_run_here, tmp_path, user_env,
                                                                                width):
    line = one_error_line(her_run_here([f"env.id={user_env}", "env=gym", "progress=false",
                                        f"hydra.run.dir={tmp_path}/run"], tmp_path), 2)
    assert len(line) <= width, (len(line), line)
    assert "the constructor raised ValueError: boom" in line and "…" in line, line
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("override", [
    "n=" + "7x" * 50_000,  # a value echoed by its rule
    "+algo." + "k" * 100_000 + "=1",  # a key Hydra names
    "seed='" + "a b " * 25_000 + "'",  # a quoted value of many words
])
def test_an_override_with_a_huge_value_or_key_is_one_line_within_the_width(her_run_here, tmp_path, width, override):
    line = one_error_line(her_run_here([override, "progress=false", f"hydra.run.dir={tmp_path}/run"], tmp_path), 2)
    assert len(line) <= width, (len(line), line)
    assert "…" in line


def test_the_width_is_the_terminal_s_or_120_and_never_below_80(monkeypatch):
    monkeypatch.setenv("COLUMNS", "40")
    assert errors.screen_width() == 80
    monkeypatch.setenv("COLUMNS", "200")
    assert errors.screen_width() == 200
    monkeypatch.delenv("COLUMNS")

    def no_terminal(fd=None):
        raise OSError("not a terminal")

    monkeypatch.setattr(os, "get_terminal_size", no_terminal)
    assert errors.screen_width() == 120
    assert len(printable("her-run: error: n=" + "9" * 1000 + " is not allowed")) == 120


def test_the_continue_line_of_a_stopped_run_is_whole(tmp_path, capsys, width):
    """The command to copy is never cut, whatever the width, nor the folder in it."""
    folder = tmp_path / ("a-long-run-folder-" * 20) / "run"
    stops = StopSignals()
    stops.received.append(signal.SIGTERM)
    with pytest.raises(SystemExit) as stopped:
        stops.end_run(folder, 1234, saved=True)
    assert stopped.value.code == 128 + signal.SIGTERM
    line = lines_of(capsys.readouterr().out)[-1]
    command = resume_command(folder)
    assert line.endswith(f"continue with: {command}") and str(folder) in command and len(line) > width, line


def test_an_env_fault_in_training_cuts_the_message_and_keeps_the_continue_command(her_run_here, tmp_path, user_env,
                                                                                  width):
    run = tmp_path / ("a-run-folder-named-at-length-" * 3)
    line = one_error_line(her_run_here([f"env.id={user_env}", "env=gym", "+env.kwargs.fail_in=step", "algo=ppo",
                                        "algo.num_envs=1", "algo.num_steps=32", "checkpoint.every_s=0",
                                        "progress=false", f"hydra.run.dir={run}"], tmp_path), 4)
    command = resume_command(run, user_env)
    assert line.endswith(f"continue with {command}"), line
    assert "step raised ValueError: " in line and "boom " * 10 not in line, line
    assert len(line.replace(command, "")) <= 2 * width, (len(line), line)  # her-rl's own words, not the message


def test_a_warning_with_a_huge_value_fits(capsys, width):
    warn(f"{'/tmp/run'}: dropped 3 damaged line(s) of {errors.outside(MESSAGE)}; the rest is kept")
    [line] = lines_of(capsys.readouterr().err)
    assert line.startswith("her-run: warning: /tmp/run: dropped 3") and line.endswith("the rest is kept")
    assert len(line) <= width


class TestPrintable:
    def test_her_rl_s_own_wording_is_left_whole(self):
        line = ("her-run: error: a network of layers [8, 1000000, 1000000, 4] needs 16,000.2 GB, more than this "
                "process may still use (5.4 GB, its address-space limit, ulimit -v): lower algo.hidden")
        assert printable(line, width=80) == line

    def test_a_long_value_is_cut_to_fit_and_keeps_its_ends(self):
        line = printable("her-run: error: n=START" + "5" * 5000 + "END is not allowed: n must be an integer", width=90)
        assert len(line) == 90 and "n=START" in line and "END is not allowed: n must be an integer" in line
        assert line.count("…") == 1

    def test_marked_outside_text_is_cut_first(self):
        text = f"her-run: error: env x: step raised ValueError: {errors.outside(MESSAGE)}; training stopped"
        line = printable(text, width=90)
        assert len(line) == 90 and line.startswith("her-run: error: env x: step raised ValueError: boom")
        assert line.endswith("; training stopped")

    def test_a_short_outside_message_is_read_whole(self):
        """An ordinary exception message is the one thing the user needs: only a long one is cut."""
        text = (f"her-run: error: env mine:Mine-v0: step raised RuntimeError: {errors.outside('the simulator crashed ' * 3)}"
                "(mine.py:75 in step); training stopped at env step 1,024, its last checkpoint (env step 1,000) is kept")
        assert printable(text, width=80) == text

    def test_a_long_line_of_unmarked_short_words_is_cut_to_the_width(self):
        line = printable(f"her-summary: warning: skipped run: {'word ' * 100_000}", width=80)
        assert len(line) == 80 and line.startswith("her-summary: warning: skipped run: word")

    def test_commands_kept_and_paths_are_never_cut(self):
        path = "/tmp/" + "p" * 150
        command = errors.whole("her-run resume=true hydra.run.dir=/tmp/" + "d" * 400)
        text = f"stopped ({'v' * 3000}) in {path}; continue with: {command}"
        line = printable(text, width=80)
        assert line.endswith(f"in {path}; continue with: {command}") and "v…v" in line
        assert printable("x " + "y" * 300, keep=["y" * 300], width=80) == "x " + "y" * 300

    def test_control_characters_are_escaped_in_kept_parts_too(self):
        command = errors.whole("her-run resume=true hydra.run.dir=/tmp/\x1b[31mred\nrun")
        line = printable(f"continue with: {command}", width=80)
        assert "\x1b" not in line and "\n" not in line and "\\x1b[31mred\\nrun" in line

    def test_a_huge_value_is_cut_at_once(self):
        start = time.monotonic()
        line = printable("her-run: warning: " + "v" * 30_000_000, width=120)
        assert len(line) == 120 and time.monotonic() - start < 2


@pytest.mark.parametrize("config", ["a: [" + "x" * 100_000 + ":\n  - ]", "algo: {name: '" + "y " * 50_000 + "'}\n"])
def test_a_value_read_from_a_run_folder_is_cut_to_the_width(her_run_here, tmp_path, width, config):
    """resume=auto on a folder stopped before its first checkpoint reads its config.yaml; the file's path is
    named whole (it does not count against the width)."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text(config)
    (run / "history.jsonl").write_text("")  # with config.yaml: a her-rl run's folder
    line = one_error_line(her_run_here(["resume=auto", "progress=false", f"hydra.run.dir={run}"], tmp_path), 2)
    assert f" {run / 'config.yaml'} " in line and len(line) <= width + len(str(run / "config.yaml")), (len(line), line)
