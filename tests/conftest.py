import os

import pytest
import torch

# Tests run two at a time (pytest -n 2) on a 2-core machine: one torch thread per worker.
torch.set_num_threads(1)
os.environ.setdefault("OMP_NUM_THREADS", "1")  # for the her-run subprocesses the CLI tests start


@pytest.fixture
def her_run():
    """Path of the her-run console script of this environment."""
    import shutil
    import sys
    from pathlib import Path

    exe = Path(sys.executable).with_name("her-run")
    return str(exe) if exe.exists() else shutil.which("her-run")
