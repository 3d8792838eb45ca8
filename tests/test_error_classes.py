"""Every error ``her_rl.train`` can raise is a class of ``her_rl.errors``, importable from there."""

import importlib
import pkgutil

import pytest

import her_rl
from her_rl import errors

# Raised where her_rl.train never lets them out: the summary's (her-summary), a sweep job's death (her-run -m),
# a value the env-state copy cannot save (caught where it is raised), and her-run's stop before training
# (an errors.Interrupt, so a KeyboardInterrupt as the API page says).
ELSEWHERE = {"her_rl.run.signals.Stopped", "her_rl.summary.report.NothingWritten", "her_rl.summary.runs.BadRun", "her_rl.folder.failures.JobDied",
             "her_rl.envs.state.NotSaveable"}


def _subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def test_every_error_class_of_her_rl_lives_in_her_rl_errors():
    for info in pkgutil.walk_packages(her_rl.__path__, "her_rl."):
        importlib.import_module(info.name)
    ours = {f"{c.__module__}.{c.__qualname__}" for c in _subclasses(BaseException) if c.__module__.startswith("her_rl")}
    assert ours - ELSEWHERE == {f"her_rl.errors.{c.__qualname__}" for c in _subclasses(BaseException)
                                if c.__module__ == "her_rl.errors"}
    assert all(name in errors.__all__ for name in (n.rpartition(".")[2] for n in ours - ELSEWHERE))


def test_a_bad_value_given_to_train_is_a_rule_error_of_her_rl_errors(tmp_path):
    with pytest.raises(errors.RuleError, match=r"algo\.k=1\.5 is not allowed"):
        her_rl.train(["algo.k=1.5"], out_dir=tmp_path / "run")


@pytest.mark.parametrize("cuda_build, says", [(None, "is a CPU build without CUDA: install a CUDA build of torch"),
                                              ("12.6", "finds no CUDA device")])
def test_device_cuda_without_cuda_says_which_case_and_what_to_do(monkeypatch, cuda_build, says):
    import torch

    from her_rl.config.checks import check_device

    monkeypatch.setattr(torch.version, "cuda", cuda_build)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(errors.ConfigError, match=says):
        check_device("cuda")
    check_device("auto")  # falls back to the CPU
