"""her-run --help and --version say what her-rl is, not only that Hydra powers it."""

import os
import re
from importlib.metadata import version
from pathlib import Path

import forked

import her_rl

ENV = {**os.environ, "HYDRA_FULL_ERROR": "0", "OMP_NUM_THREADS": "1"}


def _run(her_run, *args, cwd):
    return forked.run([her_run, *args], cwd=cwd, env=ENV, text=True, timeout=120)


def test_version_is_her_rls(her_run, tmp_path):
    p = _run(her_run, "--version", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout == f"her-rl {her_rl.__version__}\n" == f"her-rl {version('her-rl')}\n"
    assert list(tmp_path.iterdir()) == []


def test_help_starts_with_her_rl_and_lists_groups_examples_and_flags(her_run, tmp_path):
    p = _run(her_run, "--help", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert "her-rl" in lines[0] and "powered by Hydra" not in p.stdout
    groups = {line.split(":")[0]: line for line in lines if line.split(":")[0] in ("algo", "env", "experiment", "tuned")}
    assert set(groups) == {"algo", "env", "experiment", "tuned"}  # Hydra's own list of the installed groups
    assert "her_dqn" in groups["algo"] and "rnd_ppo" in groups["algo"] and "deep_sea" in groups["env"]
    assert any(line.strip().startswith("her-run -m hydra/sweeper=optuna") for line in lines)
    flags = lines[lines.index("== Flags ==") + 1:]
    assert any(line.startswith("--cfg, -c job|hydra|all") for line in flags) and "-m, --multirun" in p.stdout
    for refused in ("--config-dir", "--config-path", "--config-name", "--experimental-rerun"):
        assert refused not in p.stdout  # her-run refuses them, so its help does not offer them
    assert "Exit status: 0" in p.stdout
    assert list(tmp_path.iterdir()) == []


def test_a_bare_help_is_the_page_hydra_prints_after_overrides(her_run, tmp_path):
    """her-run fills the template itself for a bare --help (no config composed); after overrides Hydra fills
    it: the same page, the config groups included (files and the learners' stored configs alike)."""
    bare, short = _run(her_run, "--help", cwd=tmp_path), _run(her_run, "-h", cwd=tmp_path)
    hydras = _run(her_run, "seed=0", "--help", cwd=tmp_path)
    assert bare.returncode == short.returncode == hydras.returncode == 0, hydras.stderr
    assert bare.stdout == short.stdout == hydras.stdout
    assert "algo: her_crossq, her_ddpg, her_dqn" in bare.stdout and "tuned: her_crossq_gym" in bare.stdout


def test_an_unknown_group_option_with_help_is_still_one_line(her_run, tmp_path):
    p = _run(her_run, "algo=nope", "--help", cwd=tmp_path)  # an override is still checked before the page
    assert p.returncode == 2 and p.stderr.startswith("her-run: error:") and len(p.stderr.splitlines()) == 1, p.stderr


def test_help_after_overrides_and_hydras_own_help_still_work(her_run, tmp_path):
    p = _run(her_run, "algo=ppo", "env=cartpole", "--help", cwd=tmp_path)
    assert p.returncode == 0 and "her-rl" in p.stdout.splitlines()[0], p.stderr
    p = _run(her_run, "--hydra-help", cwd=tmp_path)
    assert p.returncode == 0 and "hydra/launcher" in p.stdout, p.stderr


def test_the_help_quoted_on_the_cli_page_is_what_her_run_prints(her_run, tmp_path):
    page = (Path(__file__).parents[1] / "docs" / "cli.md").read_text()
    quoted = page.split("It starts:\n\n```text\n", 1)[1].split("```", 1)[0].splitlines()
    printed = _run(her_run, "--help", cwd=tmp_path).stdout.splitlines()
    for line in quoted:  # "..." on the page stands for the rest of a long list
        pattern = re.compile(".*".join(map(re.escape, line.split("..."))) + "$")
        assert any(pattern.match(p) for p in printed), f"docs/cli.md quotes a help line her-run does not print: {line!r}"
