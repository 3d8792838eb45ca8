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


@pytest.fixture
def her_run_here(monkeypatch, capsys):
    """``her_run_here(args, cwd)``: her-run's ``main`` in this process, for commands it refuses before
    Hydra starts a job (a subprocess costs seconds of imports; test_cli.py runs the console script
    itself). Returns a ``subprocess.CompletedProcess`` with the exit status and the printed text.
    Reaching Hydra's job machinery fails the test: such a command belongs in a subprocess."""
    import subprocess
    import sys

    from her_rl import cli

    def hydra_job():
        raise AssertionError("the command reached Hydra's job machinery: run it as a subprocess")

    monkeypatch.setattr(cli, "_hydra_main", hydra_job)
    monkeypatch.setenv("HYDRA_FULL_ERROR", "0")

    def run(args, cwd):
        monkeypatch.chdir(cwd)
        monkeypatch.setattr(sys, "argv", ["her-run", *args])
        capsys.readouterr()
        try:
            cli.main()
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(["her-run", *args], code, out, err)
    return run
