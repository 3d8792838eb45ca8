"""No code runs from a config override: what her-run refuses before Hydra composes anything, and
the Hydra settings it still accepts (docs/safety.md)."""

import os
import subprocess
from pathlib import Path

import forked
import pytest

from her_rl.errors import ConfigError
from her_rl.config.compose import HYDRA_SETTINGS, check_overrides

ENV = {**os.environ, "HYDRA_FULL_ERROR": "0", "OMP_NUM_THREADS": "1"}


def _one_line_refusal(p):
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert "Traceback" not in p.stderr and p.stderr.strip().count("\n") == 0, p.stderr
    assert p.stderr.startswith("her-run: error: ")


@pytest.mark.parametrize("args, message", [
    (["+hydra.callbacks.x._target_=builtins.open", "+hydra.callbacks.x._args_=[made.txt,w]"],
     "hydra.callbacks are her-rl's own"),
    (["-m", "seed=0,1", "+hydra.callbacks.x._target_=builtins.open", "+hydra.callbacks.x._args_=[made.txt,w]"],
     "hydra.callbacks are her-rl's own"),
    (["-m", "seed=0,1", "hydra.launcher._target_=builtins.open"], "cannot name code for Hydra to call"),
    (["-m", "seed=0,1", "+hydra.launcher.x={_target_:builtins.open,_args_:[made.txt,w]}"], "cannot name code"),
    (["+foo._target_=builtins.open", "+foo._args_=[made.txt,w]"], "cannot name code for Hydra to call"),
    (["hydra/launcher@hydra.callbacks.x=joblib"], "a config group cannot be put at another place"),
    (["hydra.searchpath=[file://configs]"], "of Hydra's settings a command may change hydra.run.dir"),
    (["hydra/job_logging=default", "+hydra.job_logging.handlers.file.filename=made.txt"], "of Hydra's settings"),
    (["-m", "seed=0,1", "hydra/launcher=submitit_local", "+hydra.launcher.setup=[touch made.txt]"],
     "of Hydra's settings"),
    (["-m", "seed=0,1", "+hydra.sweeper.params.hydra.callbacks.x._target_=builtins.open"], "hydra.callbacks"),
    (["-m", "seed=0,1", "hydra.launcher.n_jobs=${oc.decode:'1'}"], "takes a value, not an interpolation"),
    (["--run", "+hydra.callbacks.x._target_=builtins.open"], "hydra.callbacks"),
    (["--cfg", "job", "+hydra.callbacks.x._target_=builtins.open"], "hydra.callbacks"),
    (["--config-dir", "configs"], "--config-dir is not accepted"),
    (["--config-d=configs"], "--config-d is not accepted"),  # argparse would take the abbreviation
    (["--experimental-rerun", "configs/x.pickle"], "--experimental-rerun is not accepted"),
])
def test_an_override_naming_code_is_refused_and_runs_nothing(her_run_here, tmp_path, args, message):
    (tmp_path / "configs").mkdir()
    p = her_run_here([*args, "progress=false"], tmp_path)
    _one_line_refusal(p)
    assert message in p.stderr
    assert sorted(q.name for q in tmp_path.iterdir()) == ["configs"]  # no made.txt, no run or sweep folder
    assert list((tmp_path / "configs").iterdir()) == []


def test_the_console_script_refuses_an_override_naming_code(her_run, tmp_path):
    p = subprocess.run([her_run, "+hydra.callbacks.x._target_=builtins.open", "+hydra.callbacks.x._args_=[made.txt,w]",
                        "progress=false"], cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=120)
    _one_line_refusal(p)
    assert "hydra.callbacks are her-rl's own" in p.stderr and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("override", [
    "+hydra.callbacks.x._target_=builtins.open", "~hydra.callbacks.summary", "hydra.callbacks={}",
    "hydra.callbacks.summary._target_=her_rl.summary.report.SummaryCallback", "hydra={}", "hydra.mode=MULTIRUN",
    "hydra.output_subdir=../x", "hydra.job.env_set.PYTHONPATH=/tmp", "hydra.job.chdir=true",
    "hydra.launcher.python=sh", "hydra.launcher.submitit_folder=/tmp", "+hydra.launcher.additional_parameters.wrap=x",
    "hydra.sweeper.custom_search_space=os.system", "hydra.sweeper.storage=sqlite:////tmp/x.db",
    "hydra.sweeper.sampler._target_=os.system", "+hydra.launcher.ray.init.runtime_env.pip=[x]",
    "hydra/output=default", "hydra/callbacks=x", "algo@hydra.callbacks.x=ppo", "+x={a:{_target_:os.system}}",
    "+x._partial_=true", "hydra.sweeper.params={n:'1,2'}", "hydra.sweeper.n_trials=${oc.env:N}",
])
def test_check_overrides_refuses_what_hydra_would_call_or_read(override):
    with pytest.raises(ConfigError, match="is not accepted"):
        check_overrides([override])


@pytest.mark.parametrize("override", [
    "hydra.run.dir=outputs/x", "hydra.run.dir=outputs/${now:%Y}", "hydra.sweep.dir=sw",
    "hydra.sweep.subdir=trial-${hydra.job.num}", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2",
    "hydra/launcher=submitit_slurm", "hydra.launcher.timeout_min=60", "hydra.launcher.max_num_timeout=3",
    "hydra.launcher.partition=gpu", "+hydra.launcher.ray.init.num_cpus=2", "hydra/sweeper=optuna",
    "hydra.sweeper.n_trials=20", "hydra.sweeper.direction=maximize", "hydra/sweeper/sampler=random",
    "hydra.sweeper.sampler.seed=0", "hydra.sweeper.params.n=3,4", "hydra/job_logging=default", "hydra.verbose=true",
    "algo._target_=her_rl.algos.her_dqn.HerDQN", "algo=ppo", "+name=my_args_test", "n=3,4", "n=[",
])
def test_check_overrides_accepts_the_documented_settings(override):
    check_overrides([override])


def test_every_allowed_launcher_and_sweeper_key_exists_in_a_plugin():
    """The allow-list names real keys: each is in the config of an installed launcher or sweeper
    (Ray's, when its plugin is not installed, are taken from its documented ``ray.init``/``ray.remote``)."""
    from her_rl.config.compose import compose
    from omegaconf import OmegaConf

    seen = set()
    for group, names in (("hydra/launcher", ["joblib", "submitit_slurm", "submitit_local"]),
                         ("hydra/sweeper", ["basic", "optuna"])):
        for name in names:
            hydra = compose([f"{group}={name}"], hydra=True).hydra
            node = hydra[group.split("/")[1]]
            seen |= {f"{group.split('/')[1]}.{key}" for key in _flat(OmegaConf.to_container(node))}
    allowed = {prefix + key for prefix, keys in HYDRA_SETTINGS.items() if prefix for key in keys}
    missing = sorted(k for k in allowed - seen if not k.startswith("launcher.ray."))
    assert missing == []


def _flat(d, prefix=""):
    for key, value in d.items():
        if isinstance(value, dict):
            yield from _flat(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}"


def test_her_rl_train_applies_the_same_checks(tmp_path, monkeypatch):
    import her_rl

    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="hydra.callbacks are her-rl's own"):
        her_rl.train(["+hydra.callbacks.x._target_=builtins.open", f"+hydra.callbacks.x._args_=[{tmp_path}/made,w]"])
    with pytest.raises(ConfigError, match="out_dir is empty"):
        her_rl.train(["n=3", "progress=false"], out_dir="")
    assert list(tmp_path.iterdir()) == []


def test_ctrl_c_outside_training_is_one_line_and_130(monkeypatch, capsys):
    from her_rl import cli

    def interrupted():
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "_main", interrupted)
    with pytest.raises(SystemExit) as exit_:
        cli.main()
    assert exit_.value.code == 130 and capsys.readouterr().err == "her-run: interrupted\n"


def test_the_page_lists_every_allowed_setting():
    page = (Path(__file__).resolve().parents[1] / "docs" / "safety.md").read_text(encoding="utf-8")
    from her_rl.config.compose import HYDRA_GROUPS

    for group in HYDRA_GROUPS:
        assert f"`{group}=NAME`" in page, group
    for prefix, keys in HYDRA_SETTINGS.items():
        for key in keys:
            assert f"`{key}`" in page or f"`hydra.{prefix}{key}" in page, key


def test_cfg_shows_only_a_config_the_run_would_accept(her_run, tmp_path):
    bad = forked.run([her_run, "--cfg", "job", "n=abc"], cwd=tmp_path, text=True, timeout=120)
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.strip().splitlines() == ["her-run: error: n='abc' is not allowed: n must be an integer in [1, 4096]"]
    good = forked.run([her_run, "--cfg", "job", "n=5"], cwd=tmp_path, text=True, timeout=120)
    assert good.returncode == 0 and "\n'n': 5\n" in good.stdout


@pytest.mark.parametrize("args, shown", [
    (["--cfg", "job", "--resolve"], "\n'n': 15\n"),  # the bit-flip learning rate: a resolver that reads n
    (["--cfg", "job", "--resolve", "--package", "algo", "n=100"], "# @package algo\nname: her_dqn\n"),
    (["--cfg=job", "--resolve", "--package=algo.lr", "n=100"], "# @package algo.lr\n0.001\n"),
    (["--cfg", "all", "--resolve", "-p", "env.kwargs"], "# @package env.kwargs\n'n': 15\n"),
    (["--cfg", "hydra", "--resolve", "-p", "hydra.launcher"], "# @package hydra.launcher\n_target_: hydra._internal"),
])
def test_cfg_resolve_shows_any_package_of_the_resolved_config(her_run_here, tmp_path, args, shown):
    p = her_run_here(args, tmp_path)
    assert p.returncode == 0 and p.stderr == "" and shown in p.stdout, p
    assert "???" not in p.stdout.split("hydra:")[0]


def test_cfg_resolve_of_a_package_that_is_not_there_is_one_line(her_run_here, tmp_path):
    p = her_run_here(["--cfg", "job", "--resolve", "--package", "hydra"], tmp_path)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.strip().splitlines() == ["her-run: error: package 'hydra' not found in the job config (--cfg job)"]


@pytest.mark.parametrize("choice", ["hydra/launcher=basic", "hydra/launcher=joblib", "hydra/launcher=submitit_local",
                                    "hydra/launcher=submitit_slurm", "hydra/launcher=ray", "hydra/sweeper=optuna"])
def test_every_launcher_and_sweeper_passes_the_settings_check_with_its_own_defaults(choice):
    """The check refuses bad values, never a plugin's defaults (a key its config lacks is not checked)."""
    from her_rl.config.compose import compose
    from her_rl.run.sweep import check_settings

    try:
        cfg = compose(["n=4", choice], hydra=True)
    except Exception as exc:  # noqa: BLE001  (the plugin's extra is not installed here)
        pytest.skip(f"{choice}: {exc}")
    check_settings(cfg)
