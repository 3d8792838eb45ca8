"""A piece of an update in a forked child: it sees shared tensors both ways, its errors come back as one
line, and it never outlives the process that forked it, however that process ends."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import torch

from her_rl.algos.parallel_update import ForkedHalf, can_fork

pytestmark = pytest.mark.skipif(not can_fork(), reason="processes do not fork here")


def _gone(pid: int, within_s: float = 10.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:  # ended, but not yet reaped by whoever adopted it (a container's first process may not)
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except OSError:
            pass
        try:  # our own child: reaped here, or it lingers as a zombie
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return True
        except ChildProcessError:
            pass
        time.sleep(0.05)
    return False


def test_the_child_reads_and_writes_shared_tensors_and_its_error_is_one_line():
    x, y = torch.zeros(3).share_memory_(), torch.zeros(3).share_memory_()

    def piece():
        if x[0] < 0:
            raise ValueError("a negative input\nand a second line")
        y.copy_(x * 2)

    half = ForkedHalf(piece, name="test half")
    half.start()
    try:
        x.copy_(torch.tensor([1.0, 2.0, 3.0]))  # written after the fork: seen through shared memory
        half.submit()
        half.result()
        assert y.tolist() == [2.0, 4.0, 6.0]
        x[0] = -1.0
        half.submit()
        with pytest.raises(RuntimeError) as err:
            half.result()
        assert str(err.value) == "test half failed: ValueError: a negative input"
        x[0] = 5.0  # the child serves on after an error
        half.submit()
        half.result()
        assert y[0] == 10.0
    finally:
        process = half._process
        half.close()
    assert not process.is_alive()


def test_a_child_that_dies_is_one_line_naming_it():
    half = ForkedHalf(lambda: os._exit(3), name="test half")
    half.start()
    half.submit()
    with pytest.raises(RuntimeError, match=r"^test half ended \(exit code 3\) in the middle of an update$"):
        half.result()
    assert not half.started


def test_the_child_ignores_interrupts_and_ends_with_the_process_that_forked_it_even_on_sigkill(tmp_path):
    script = tmp_path / "parent.py"
    script.write_text(textwrap.dedent("""
        import sys, time
        from her_rl.algos.parallel_update import ForkedHalf
        half = ForkedHalf(lambda: None, name="test half")
        half.start()
        half.submit(); half.result()
        print(half._process.pid, flush=True)
        time.sleep(60)
    """))
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True,
                              cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    try:
        child = int(parent.stdout.readline())
        os.kill(child, signal.SIGINT)  # what Ctrl-C sends the whole process group: the parent answers it
        os.kill(child, signal.SIGTERM)
        time.sleep(0.3)
        os.kill(child, 0)  # still there
        parent.kill()  # SIGKILL: no handler, no atexit in the parent
        parent.wait()
        assert _gone(child), "the forked half outlived its parent"
    finally:
        if parent.poll() is None:
            parent.kill()
