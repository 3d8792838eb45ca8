"""The gate (her_rl/run/plan.py): one run, her-run's or her_rl.train's, makes each check once."""

import sys

import pytest

import her_rl
from her_rl import cli  # noqa: F401  (imported, so its names are counted too)
from her_rl.run import runner  # noqa: F401

COUNTED = ("check_overrides", "check_required", "check_algo_keys")
RUN = ["n=4", "budget.env_steps=100", "eval.every_iterations=1", "eval.episodes=2", "progress=false"]


def _count(monkeypatch) -> dict[str, int]:
    """Every module of her_rl that holds one of ``COUNTED`` gets a wrapper that counts its calls: a
    check is counted wherever it is looked up."""
    counts = dict.fromkeys(COUNTED, 0)
    originals = {name: getattr(sys.modules[module], name) for module, name in
                 [("her_rl.config.compose", "check_overrides"), ("her_rl.config.checks", "check_required"),
                  ("her_rl.config.registry", "check_algo_keys")]}

    def counting(name):
        def call(*args, **kwargs):
            counts[name] += 1
            return originals[name](*args, **kwargs)
        return call
    for module in [m for name, m in sys.modules.items() if name.startswith("her_rl") and m is not None]:
        for name, original in originals.items():
            if getattr(module, name, None) is original:
                monkeypatch.setattr(module, name, counting(name))
    return counts


def _her_run(her_run_here, tmp_path, monkeypatch):
    counts = _count(monkeypatch)
    done = her_run_here([*RUN, f"hydra.run.dir={tmp_path / 'run'}"], tmp_path)
    assert done.returncode == 0, done.stderr
    return counts


def _train(tmp_path, monkeypatch):
    counts = _count(monkeypatch)
    her_rl.train(RUN, out_dir=tmp_path / "run")
    return counts


@pytest.mark.parametrize("run", [_her_run, _train], ids=["her-run", "her_rl.train"])
def test_each_check_runs_once_per_run(run, her_run_here, tmp_path, monkeypatch):
    counts = run(her_run_here, tmp_path, monkeypatch) if run is _her_run else run(tmp_path, monkeypatch)
    assert (tmp_path / "run" / "results.json").is_file()
    assert counts["check_overrides"] == 1
    assert counts["check_required"] == 1
    assert counts["check_algo_keys"] == 1  # the gate's; building the planned learner does not check again
