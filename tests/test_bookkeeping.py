"""The bookkeeping-key table: one list drives resume, sweep folder names, summaries and HParams."""

import json

import pytest

from her_rl.config import saved as bookkeeping
from her_rl.config.saved import merge
from her_rl.errors import ConfigError
from her_rl.run.logger import hparams_of
from her_rl.config.compose import compose
from her_rl.config.checks import TOP
from her_rl.summary.report import summarise
from her_rl.summary.runs import find_runs


def _plain(overrides):
    from omegaconf import OmegaConf

    return OmegaConf.to_container(compose(overrides), resolve=True)


def _get(cfg, key):
    for part in key.split("."):
        cfg = cfg[part]
    return cfg


def _set(cfg, key, value):
    *parents, last = key.split(".")
    for part in parents:
        cfg = cfg[part]
    cfg[last] = value


def _leaves(cfg, prefix=""):
    for key, value in cfg.items():
        if isinstance(value, dict) and value:
            yield from _leaves(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}"


def test_every_name_in_the_table_is_a_config_key():
    for table in bookkeeping.TABLES:
        assert isinstance(TOP[table], dict), table
    for key in (*bookkeeping.KEYS, *bookkeeping.VERBS):
        assert key in TOP, key


def test_resume_takes_changes_of_bookkeeping_keys_and_refuses_every_other_change():
    saved = _plain(["algo=her_dqn", "env=bitflip", "n=5"])
    for key in _leaves(saved):
        top = key.split(".")[0]
        if top in ("resume", "load") or key.endswith(("name", "_target_")):
            continue
        value = "x" if not isinstance(_get(saved, key), str) else "y"
        current = json.loads(json.dumps(saved))
        _set(current, key, value)
        if bookkeeping.is_bookkeeping(key):
            effective, changes = merge(saved, current, [f"{key}={value}"])
            assert key in changes and _get(effective, key) == value, key
        else:
            with pytest.raises(ConfigError, match="cannot resume"):
                merge(saved, current, [f"{key}={value}"])


def test_sweep_folder_names_leave_out_exactly_the_bookkeeping_keys():
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module
    from omegaconf import OmegaConf

    from her_rl.folder import rundir

    rundir.register_resolvers()
    with initialize_config_module(config_module="her_rl.conf", version_base="1.3"):
        cfg = hydra_compose(config_name="config", return_hydra_config=True)
    excluded = list(cfg.hydra.job.config.override_dirname.exclude_keys)
    assert excluded == bookkeeping.exclude_keys()
    config = OmegaConf.to_container(compose([]), resolve=True)
    assert {k for k in _leaves(config) if bookkeeping.is_bookkeeping(k)} <= set(excluded)
    assert not {k for k in excluded if not bookkeeping.is_bookkeeping(k)}


def _fake_run(folder, overrides, success):
    folder.mkdir(parents=True)
    (folder / "history.jsonl").write_text(json.dumps({"event": "start", "overrides": overrides}) + "\n")
    (folder / "results.json").write_text(json.dumps(
        {"seed": int(next(o for o in overrides if o.startswith("seed="))[5:]), "eval_success_rate": success, "solved": False, "solved_at_env_steps": None, "wall_time_s": 1.0}))


def test_summary_rows_ignore_bookkeeping_but_keep_thresholds_apart(tmp_path):
    _fake_run(tmp_path / "a", ["n=5", "seed=0", "budget.env_steps=100", "threads=1"], 0.5)
    _fake_run(tmp_path / "b", ["n=5", "seed=1", "budget.env_steps=900", "checkpoint.every_s=0"], 0.7)
    _fake_run(tmp_path / "c", ["n=5", "seed=0", "eval.success_threshold=0.5"], 0.9)
    rows = {r["setting"]: r for r in summarise(find_runs(tmp_path))}
    assert sorted(rows) == ["eval.success_threshold=0.5 n=5", "n=5"]
    assert rows["n=5"]["seeds"] == 2


def test_hparams_leave_out_bookkeeping_overrides():
    config = _plain(["algo=her_dqn", "env=bitflip", "n=5"])
    given = ["n=5", "algo.lr=0.01", "budget.env_steps=100", "progress=false", "eval.success_threshold=0.5",
             "hydra.run.dir=x", "resume=auto"]
    logged = hparams_of(config, given)
    assert {"n", "algo.lr", "eval.success_threshold"} <= set(logged)
    assert not {"budget.env_steps", "progress", "hydra.run.dir", "resume"} & set(logged)
