"""Deleted keys and extreme values: each is one line ``her-run: error: ...``, exit 2, nothing written.

A ``~KEY`` that removes a key the run reads used to pass the checks and end in a KeyError after the
run folder was taken; a 100,000-digit number, a 300-byte folder name or 3,000 nested brackets ended
in a traceback. Refused commands run her-run's main in this process (``her_run_here``: reaching
Hydra's job fails the test); a few run the console script itself.
"""

import os
import subprocess

import pytest

import her_rl
from her_rl.errors import ConfigError

ENV = {**os.environ, "HYDRA_FULL_ERROR": "0", "OMP_NUM_THREADS": "1"}
RUN = {"algo": "her_dqn", "env": "bitflip", "n": "4", "budget.env_steps": "200", "progress": "false"}
BIG = "1" * 100_000


def _args(*extra):
    """RUN's overrides, less those of the keys ``extra`` deletes (a key deleted then set is Hydra's error)."""
    gone = {e[1:].split("=")[0] for e in extra if e.startswith("~")}
    return [f"{k}={v}" for k, v in RUN.items() if k not in gone and k.split(".")[0] not in gone] + list(extra)


def _refused(p, message):
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert "Traceback" not in p.stderr and p.stderr.strip().count("\n") == 0, p.stderr
    assert p.stderr.startswith("her-run: error: ") and message in p.stderr, p.stderr
    assert len(p.stderr) < 700, len(p.stderr)  # a huge value is shown by its ends


DELETIONS = [
    ("~seed", "seed is required; it was deleted with ~seed"),
    ("~threads", "threads is required; it was deleted with ~threads"),
    ("~device", "device is required; it was deleted with ~device"),
    ("~budget", "budget is required (the table of env_steps, wall_time_s); it was deleted with ~budget"),
    ("~eval", "eval is required (the table of every_iterations, every_env_steps, episodes"),
    ("~eval.episodes", "eval.episodes is required; it was deleted with ~eval.episodes"),
    ("~checkpoint.every_s", "checkpoint.every_s is required; it was deleted with ~checkpoint.every_s"),
    ("~checkpoint", "checkpoint is required (the table of every_s, save_replay)"),
    ("~progress", "progress is required; it was deleted with ~progress"),
    ("~resume", "resume is required; it was deleted with ~resume"),
    ("~algo", "config group 'algo' is required; it was deleted with ~algo: pick one with algo=NAME"),
    ("~env", "config group 'env' is required; it was deleted with ~env: pick one with env=NAME"),
    ("~algo.name", "algo.name is required; it was deleted with ~algo.name: pick one with algo=NAME"),
    ("~algo.lr", "algo.lr is required; it was deleted with ~algo.lr"),  # the learner's keys too
    ("~algo.batch_size", "algo.batch_size is required; it was deleted with ~algo.batch_size"),
    ("~env.id", "env.id is required; it was deleted with ~env.id"),
    ("~env.kwargs", "env.kwargs is required; it was deleted with ~env.kwargs"),
    ("~n", "algo.strategy needs n, which was deleted with ~n"),  # the tuned file's ${by_size:${n},...}
    ("~hydra.run.dir", "'~hydra.run.dir' is not accepted: Hydra's settings may be changed, not deleted"),
]


@pytest.mark.parametrize("deletion, message", DELETIONS)
@pytest.mark.parametrize("run_dir", [False, True])
def test_a_deleted_key_the_run_needs_is_one_line_and_no_folder(her_run_here, tmp_path, deletion, message, run_dir):
    extra = [f"hydra.run.dir={tmp_path / 'r'}"] if run_dir and "hydra" not in deletion else []
    p = her_run_here(_args(deletion, *extra), tmp_path)
    _refused(p, message)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("extra", [["~seed"], ["~budget"], ["~eval.episodes"], ["-m", "seed=0,1", "~threads"]])
def test_the_console_script_refuses_a_deletion_before_any_folder(her_run, tmp_path, extra):
    """The commands of the issue: they left .her-run.lock, config.yaml and history.jsonl behind."""
    folders = [f"hydra.run.dir={tmp_path / 'x1'}", f"hydra.sweep.dir={tmp_path / 's'}"]
    p = subprocess.run([her_run, *_args(*extra), *folders], cwd=tmp_path, env=ENV, capture_output=True, text=True,
                       timeout=120)
    _refused(p, "it was deleted with ~")
    assert list(tmp_path.iterdir()) == []


def test_python_callers_get_the_same_line(tmp_path):
    with pytest.raises(ConfigError, match=r"^seed is required; it was deleted with ~seed "):
        her_rl.train(["n=4", "~seed"], out_dir=tmp_path / "r")
    with pytest.raises(ConfigError, match=r"^config group 'env' is required; it was deleted with ~env"):
        her_rl.train(["~env"], out_dir=tmp_path / "r")
    with pytest.raises(ConfigError, match=r"^n: a number of more than 4,300 digits is not accepted$"):
        her_rl.train([f"n={BIG}"], out_dir=tmp_path / "r")
    assert list(tmp_path.iterdir()) == []


def test_a_config_built_in_python_is_checked_for_every_key_the_run_reads(tmp_path):
    from omegaconf import OmegaConf

    from her_rl.run.plan import plan_run
    from her_rl.config.compose import compose

    cfg = OmegaConf.to_container(compose(["n=4"]), resolve=True)
    del cfg["checkpoint"]["save_replay"]
    with pytest.raises(ConfigError, match=r"^checkpoint.save_replay is missing from the config; the run needs it"):
        plan_run(cfg, tmp_path / "r", None)
    assert list(tmp_path.iterdir()) == []


LONG = "a" * 300
NESTED = "[" * 3000 + "]" * 3000


@pytest.mark.parametrize("args, message", [
    ([f"n={BIG}"], "n: a number of more than 4,300 digits is not accepted"),
    ([f"seed={BIG}"], "seed: a number of more than 4,300 digits is not accepted"),
    ([f"algo.hidden=[64,{BIG}]"], "algo.hidden: a number of more than 4,300 digits is not accepted"),
    ([f"algo.hidden={NESTED}"], "algo.hidden: a value nested more than 32 levels deep"),
    (["algo.hidden=" + "[" * 33 + "]" * 33], "nested more than 32 levels deep"),
    (["algo.hidden=[[64]]"], "algo.hidden=[[64]] is not allowed"),  # shallow: the value's own rule
    ([f"hydra.run.dir={{tmp}}/{LONG}/x"], "hydra.run.dir is not allowed: its name 'aaaa"),
    ([f"load={{tmp}}/{LONG}"], "load is not allowed: its name 'aaaa"),
    (["-m", "seed=0,1", f"hydra.sweep.dir={{tmp}}/{LONG}"], "hydra.sweep.dir is not allowed: its name 'aaaa"),
    (["--help", "hydra/help=../../x"], "'hydra/help=../../x' is not accepted: hydra/help takes the name of one"),
    (["--help", "hydra/help=nope"], "Could not find 'hydra/help/nope'; available: default, her_rl"),
    (["--cfg", "job", "~seed"], "seed is required; it was deleted with ~seed"),
    (["env=../tuned/her_dqn_bitflip"], "env takes the name of one of its options, not a path"),
    (["algo=ppo", "env=gym", "env.id=" + "x" * 100_000], "unknown gymnasium env id 'xxxx"),
])
def test_an_extreme_value_is_one_short_line(her_run_here, tmp_path, args, message):
    p = her_run_here([a.replace("{tmp}", str(tmp_path)) for a in args], tmp_path)
    _refused(p, message)
    assert list(tmp_path.iterdir()) == []


def test_a_long_name_is_shown_by_its_ends(her_run_here, tmp_path):
    p = her_run_here(_args(f"hydra.run.dir={tmp_path}/{'b' * 150}{'c' * 150}/x"), tmp_path)
    _refused(p, "has 300 bytes; a file or folder name may have at most 255")
    shown = p.stderr.split("its name ")[1].split(" has ")[0]
    assert shown.startswith("'bbb") and shown.endswith("ccc'") and "…" in shown and len(shown) <= 200


@pytest.mark.parametrize("value, escaped", [
    ("'\x1b[31mBad\x07'", "'\\x1b[31mBad\\x07'"),  # colour, bell
    ("'a\u202eb\rc'", "'a\\u202eb\\rc'"),  # right-to-left override, carriage return
])
def test_control_characters_in_an_echoed_value_are_escaped(her_run_here, tmp_path, value, escaped):
    p = her_run_here(["algo=ppo", "env=gym", f"env.id={value}"], tmp_path)
    _refused(p, f"unknown gymnasium env id {escaped}")
    assert not any(c in p.stderr for c in "\x1b\x07\r\u202e")


def test_a_control_character_in_a_path_is_escaped(her_run_here, tmp_path):
    (tmp_path / "f\x1b[2J").write_text("a file")
    p = her_run_here(_args(f"hydra.run.dir='{tmp_path}/f\x1b[2J'"), tmp_path)
    _refused(p, f"cannot use run folder {tmp_path}/f\\x1b[2J: it is a file")
    assert "\x1b" not in p.stderr
