"""Run one of her-rl's console scripts (``her-run``, ``her-summary``) as a forked child of the test
process, with the imports already paid for.

A fresh ``her-run`` spends about 3 s of its 4 s on a short run importing torch, Hydra and the
``torch._dynamo`` that torch's optimisers import on first use; a test suite of a few hundred runs
pays that again and again. A forked child starts with them in memory and otherwise runs as the
console script does: ``main()`` of the script's entry point with that argv, in that working
directory and environment, its own process (signals, exit status, file descriptors), stdout and
stderr captured. Tests of the console script as installed (its import errors, its start-up) keep
using a real subprocess.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from importlib.metadata import entry_points
from pathlib import Path

_SCRIPTS = {ep.name: ep for ep in entry_points(group="console_scripts") if ep.value.startswith("her_rl.")}


def console_script(name: str) -> bool:
    """Whether ``name`` (a command's first token, a path or a bare name) is one of her-rl's scripts."""
    return Path(name).name in _SCRIPTS


def _warm() -> None:
    """Import what every run imports, once per test process, before any fork."""
    import torch
    import torch._dynamo  # noqa: F401  (torch.optim imports it on an optimiser's first use)

    for ep in _SCRIPTS.values():
        ep.load()
    import her_rl.run.runner  # noqa: F401  (her-run imports the runner only once its signals are taken)

    torch.set_num_threads(1)


def _child(argv: list[str], cwd: str, env: dict, out_fd: int, err_fd: int) -> None:
    code = 1
    try:
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        sys.stdin = open(0, closefd=False)
        sys.stdout = open(1, "w", buffering=1, closefd=False)
        sys.stderr = open(2, "w", buffering=1, closefd=False)
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):
            signal.signal(sig, signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL)
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)
        sys.path[:0] = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p not in sys.path]
        sys.argv = list(argv)
        from hydra.core.global_hydra import GlobalHydra

        GlobalHydra.instance().clear()
        try:
            status = _SCRIPTS[Path(argv[0]).name].load()()
            raise SystemExit(status)  # what the console-script wrapper does: sys.exit(main())
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if not isinstance(exc.code, (int, type(None))):
                print(exc.code, file=sys.stderr)
        except KeyboardInterrupt:  # as Python ends on an uncaught one: the traceback, then killed by SIGINT
            import traceback

            traceback.print_exc()
            sys.stderr.flush()
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        except BaseException:  # an uncaught traceback, printed as Python would print it
            import traceback

            traceback.print_exc()
            code = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


class Popen:
    """The part of ``subprocess.Popen`` the tests use (pid, poll, wait, send_signal, kill, terminate,
    communicate, returncode), for one of her-rl's console scripts as a forked child. ``stdout`` and
    ``stderr`` take what ``subprocess.Popen`` takes (PIPE or None: captured into a temporary file that
    ``communicate`` reads once the child has ended; DEVNULL; STDOUT for stderr; an open file or fd)."""

    def __init__(self, argv, cwd=None, env=None, text=False, stdout=None, stderr=None):
        assert console_script(argv[0]), f"{argv[0]} is not one of her-rl's console scripts"
        _warm()
        self.args, self.text, self.returncode = list(argv), text, None
        self._opened = []  # devnull fds opened for the child: closed here once it has its copies
        self._out, out_fd = self._stream(stdout)
        self._err, err_fd = (None, out_fd) if stderr == subprocess.STDOUT else self._stream(stderr)
        env = dict(os.environ if env is None else env)
        sys.stdout.flush()
        sys.stderr.flush()
        self.pid = os.fork()
        if self.pid == 0:
            _child(self.args, str(cwd or os.getcwd()), env, out_fd, err_fd)
        for fd in self._opened:
            os.close(fd)

    def _stream(self, where):
        """(temporary file to read back or None, fd the child writes to) for a stdout/stderr argument."""
        if where is None or where == subprocess.PIPE:
            f = tempfile.TemporaryFile()
            return f, f.fileno()
        if where == subprocess.DEVNULL:
            self._opened.append(os.open(os.devnull, os.O_WRONLY))
            return None, self._opened[-1]
        return None, where if isinstance(where, int) else where.fileno()

    def poll(self):
        if self.returncode is None:
            done, status = os.waitpid(self.pid, os.WNOHANG)
            if done:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout=None):
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(self.args, timeout)
            time.sleep(0.02)
        return self.returncode

    def send_signal(self, sig):
        if self.poll() is None:
            os.kill(self.pid, sig)

    def kill(self):
        self.send_signal(signal.SIGKILL)

    def terminate(self):
        self.send_signal(signal.SIGTERM)

    def _read(self, f):
        if f is None:
            return None
        f.seek(0)
        data = f.read()
        return data.decode("utf-8", "replace") if self.text else data

    def communicate(self, timeout=None):
        self.wait(timeout)
        return self._read(self._out), self._read(self._err)

    def __del__(self):
        if getattr(self, "pid", 0) and self.returncode is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            except (ChildProcessError, ProcessLookupError):
                pass


def run(argv, cwd=None, env=None, timeout=300, text=False, stdout=None, stderr=None) -> subprocess.CompletedProcess:
    """``subprocess.run(argv, ..., capture_output=True)`` (unless stdout/stderr say otherwise) for one
    of her-rl's console scripts, as a forked child (see the module's docstring)."""
    proc = Popen(argv, cwd=cwd, env=env, text=text, stdout=stdout, stderr=stderr)
    try:
        out, err = proc.communicate(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
