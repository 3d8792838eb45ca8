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


def load_script(name: str):
    """Import scripts/<name>.py as module ``name`` (registered in sys.modules, as dataclasses and
    pickling need); a fixture yields it and calls ``unload_script`` after."""
    import importlib.util
    import sys
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().parents[1] / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def unload_script(name: str) -> None:
    import sys

    sys.modules.pop(name, None)
